"""Bad input to expressive attention (issue 13): empty token sets, all-zero scores, huge scores."""
import math

import pytest
import torch

from energylab.forms import expressive as ea
from tests.probes import F64, NO_KEYS, D, H, W, Z


@pytest.mark.parametrize("call, name", [
    (lambda: ea.expressive_free_energy(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: ea.expressive_free_energy_update(Z, NO_KEYS, W, 1.0), "H"),
    (lambda: ea.expressive_attention_step(Z, NO_KEYS, W, W), "H"),
    (lambda: ea.expressive_weights(torch.zeros(3, 0, dtype=F64)), "scores"),
])
def test_empty_token_sets_raise_naming_the_tokens(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must hold at least 1"):
        call()


def test_expressive_gradient_at_all_zero_scores_raises_and_energy_is_inf():
    zero = torch.zeros(3, D, dtype=F64)
    with pytest.raises(ValueError, match="^z: every score"):
        ea.expressive_free_energy_update(zero, H, W, 1.0)
    with pytest.raises(ValueError, match="^z: every score"):
        ea.expressive_free_energy_update(Z, H, torch.zeros(D, D, dtype=F64), 1.0)
    assert torch.equal(ea.expressive_free_energy(zero, H, W, 1.0), torch.full((3,), math.inf, dtype=F64))
    # the layer form attends to nothing: zero weights (documented), so EA(z) = z, no NaN
    assert torch.equal(ea.expressive_attention_step(zero, H, W, W), zero)
    # one query with all-zero scores is enough to raise; a single zero score is fine (the update is smooth there)
    s_one_zero = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=F64)
    H_orth = torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]], dtype=F64)
    assert torch.isfinite(ea.expressive_free_energy_update(s_one_zero, H_orth, torch.eye(D, dtype=F64), 1.0)).all()


def test_expressive_weights_at_huge_scores_are_finite_and_correct():
    s32 = torch.tensor([[1e20, 1.0, -3e19, 0.0], [2.0, -1e25, 0.5, 3.0]], dtype=torch.float32)
    reference = ea.expressive_weights(s32.double())  # s² ≤ 1e50 is finite in float64
    got = ea.expressive_weights(s32)
    assert torch.isfinite(got).all()
    assert torch.allclose(got.double(), reference, rtol=1e-6, atol=0)
    assert torch.allclose(got[0], torch.tensor([0.4, 0.2, 0.4, 0.0]))  # raw weights 1, ½, 1, 0
    s64 = torch.tensor([[1e200, 1.0, -1e300]], dtype=F64, requires_grad=True)  # s² overflows float64
    w = ea.expressive_weights(s64)
    assert torch.allclose(w, torch.tensor([[0.4, 0.2, 0.4]], dtype=F64), rtol=1e-15, atol=0)
    (grad,) = torch.autograd.grad(w[0, 1], s64)
    assert torch.isfinite(grad).all()


def test_expressive_energy_and_update_at_huge_scores_match_float64():
    z, tokens = torch.tensor([[1e10, 1.0]]), torch.tensor([[1e10, 0.0], [0.0, 1.0]])  # s = (1e20, 1) in float32
    eye = torch.eye(2)
    for fn in (ea.expressive_free_energy, ea.expressive_free_energy_update, ea.expressive_potentials):
        got, ref = fn(z, tokens, eye, 1.0), fn(z.double(), tokens.double(), eye.double(), 1.0)
        assert torch.isfinite(got).all(), fn.__name__
        assert torch.allclose(got.double(), ref, rtol=1e-6, atol=1e-30), fn.__name__
