"""Bad input to Hyper-SET's forms and the bi-softmax layer (issues 13 and 35): empty token sets, zero rows under RMS
normalisation, negative eps, zero heads, the dictionary's dtype.
"""
import pytest
import torch

from energylab import catalog
from energylab import layers as M
from energylab.forms import hyperspherical as hs
from tests.probes import F64, NO_KEYS, W_HEADS, D, N, randn, sample, zero_heads


@pytest.mark.parametrize("call, name", [
    (lambda: hs.hyperset_attention_energy(NO_KEYS, W_HEADS, 1.0), "X"),
    (lambda: hs.hyperset_attention_update(NO_KEYS, W_HEADS, 1.0), "X"),
])
def test_empty_token_sets_raise_naming_the_tokens(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must hold at least 1"):
        call()


def test_rms_normalisation_of_a_zero_row_needs_eps():
    zero = torch.zeros(N, D, dtype=F64)
    with pytest.raises(ValueError, match="^u has a zero row"):
        hs.rms_normalize(zero)
    with pytest.raises(ValueError, match="^X has a zero row"):
        hs.hyperset_attention_update(zero, W_HEADS, 1.0, rms=True)
    with pytest.raises(ValueError, match="^X has a zero row"):
        hs.softmax_feedforward_update(zero, randn(D, 9), rms=True)
    assert torch.equal(hs.rms_normalize(zero, 1e-6), zero)  # with eps > 0 a zero row stays zero
    assert torch.isfinite(hs.hyperset_attention_update(zero, W_HEADS, 1.0, rms=True, eps=1e-6)).all()


def test_negative_eps_is_refused():
    with pytest.raises(ValueError, match="^eps must be a finite number >= 0"):
        M.BiSoftmaxAttention(4, 2, eps=-1e-6)
    X = 0.1 * randn(N, D)
    for call in (lambda: hs.rms_normalize(X, eps=-1.0),
                 lambda: hs.hyperset_attention_update(X, W_HEADS, 1.0, True, -1.0),
                 lambda: hs.hyperset_feedforward_update(X, randn(D, 9), rms=True, eps=-1.0)):
        with pytest.raises(ValueError, match="^eps must be a finite number >= 0"):
            call()
    assert torch.equal(M.BiSoftmaxAttention(4, 2, eps=0)(torch.randn(1, 3, 4)).isfinite(), torch.ones(1, 3, 4) > 0)


@pytest.mark.parametrize("name", ["hyperset_attention", "sigmoid_attention", "kernel_linear_attention"])
@pytest.mark.parametrize("part", ["energy", "update"])
def test_hyperset_forms_refuse_zero_heads(name, part):
    X, params = sample(name)
    with pytest.raises(ValueError, match=r"W must hold at least 1 head"):
        getattr(catalog.FORMS[name], part)(X, **{**params, "W": zero_heads(params["W"])})


def test_hyperset_feedforward_names_the_dictionary_dtype():
    X, params = sample("hyperset_feedforward")
    with pytest.raises(TypeError, match=r"D has dtype torch.float64, which differs from X \(torch.float32\)"):
        hs.hyperset_feedforward_update(X.float(), params["D"])
