"""Bad input to the recurrent layers (issue 47, last item): ItrSA's step, the sizes of MSA, the Kuramoto layer and
the norm readout, and the oscillator helpers' sizes and constants, each refused naming the argument."""
from __future__ import annotations

import pytest
import torch

from energylab.layers import recurrent as R

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("eta", [NAN, INF, -INF])
def test_itrsa_refuses_a_non_finite_step(eta):
    """Before: ItrSA(eta=nan) built a layer whose every state was NaN."""
    with pytest.raises(ValueError, match=r"^eta must be a finite number in \(-inf, inf\), got "):
        R.ItrSA(8, 2, eta=eta)


@pytest.mark.parametrize("build, error, expected", [
    (lambda: R.ItrSA(8, 2, norm="yes"), TypeError, r"^norm must be True or False, got 'yes'"),
    (lambda: R.MSA(8, 0), ValueError, r"^heads must be an int >= 1, got 0"),
    (lambda: R.MSA(0, 2), ValueError, r"^dim must be an int >= 1, got 0"),
    (lambda: R.MSA(8, 1.5), TypeError, r"^heads must be an int, got 1.5"),
    (lambda: R.KuramotoLayer(8, 2, n=0), ValueError, r"^n must be an int >= 2, got 0"),
    (lambda: R.KuramotoLayer(8, 2, n=-2), ValueError, r"^n must be an int >= 2, got -2"),
    (lambda: R.KuramotoLayer(8, 2, n=2.0), TypeError, r"^n must be an int, got 2.0"),
    (lambda: R.KuramotoLayer(8, 2, rmsnorm=1), TypeError, r"^rmsnorm must be True or False, got 1"),
    (lambda: R.NormReadout(8, 2, 0), ValueError, r"^n must be an int >= 1, got 0"),
    (lambda: R.NormReadout(8, 0, 2), ValueError, r"^out must be an int >= 1, got 0"),
])
def test_layer_sizes_and_flags_are_checked(build, error, expected):
    """Before: MSA(8, 0) and KuramotoLayer(n=0) raised ZeroDivisionError; MSA(0, 2), KuramotoLayer(n=-2),
    NormReadout with 0 oscillators or outputs and non-bool flags built a layer silently."""
    with pytest.raises(error, match=expected):
        build()


def test_oscillator_helpers_check_sizes_and_constants():
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match=r"^n must be an int >= 1, got 0"):
        R.oscillator_normalize(x, 0)
    with pytest.raises(ValueError, match=r"^the last dim of x must be a multiple of the oscillator size n=3, got "
                                         r"shape \(2, 8\)"):
        R.oscillator_normalize(x, 3)
    with pytest.raises(ValueError, match=r"^eps must be a finite number > 0, got nan"):
        R.oscillator_normalize(x, 2, eps=NAN)
    with pytest.raises(ValueError, match=r"^the last dim of x must be a multiple of the oscillator size n=2"):
        R.omega_rotate(torch.randn(2, 7), 0.1)
    with pytest.raises(ValueError, match=r"^omega must be a finite number in \(-inf, inf\), got nan"):
        R.omega_rotate(x, NAN)
    with pytest.raises(ValueError, match=r"^gamma must be a finite number in \(-inf, inf\), got inf"):
        R.akorn_reference_step(x, x, INF, 2)
    with pytest.raises(ValueError, match=r"^the last dim of x must be a multiple of the oscillator size n=3"):
        R.akorn_reference_step(x, x, 1.0, 3)
    with pytest.raises(ValueError, match=r"^y must be a tensor of x's shape \(2, 8\), got \(2, 4\)"):
        R.akorn_reference_step(x, x[:, :4], 1.0, 2)
    with pytest.raises(TypeError, match=r"^x must be a floating-point torch.Tensor, got torch.int64"):
        R.oscillator_normalize(torch.ones(2, 8, dtype=torch.long), 2)
    # valid input, unchanged: a tensor omega (the layer's buffer) still works
    assert torch.equal(R.omega_rotate(x, torch.tensor(0.5)), R.omega_rotate(x, 0.5))
