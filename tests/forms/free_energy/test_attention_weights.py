"""Attention weights from raw scores: dot-product (softmax) and expressive (z²/(1+z²)), with causal masks."""
import pytest
import torch

from energylab.forms import expressive as ea
from energylab.forms import free_energy as fe


def _scores(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_dot_product_weights_match_softmax_and_mask():
    s = _scores(0, 2, 7, 7)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    a = fe.dot_product_weights(s, causal, beta=0.5)
    assert torch.allclose(a.sum(-1), torch.ones(2, 7, dtype=torch.float64), atol=1e-14)
    assert (a.masked_select(~causal) == 0).all()
    ref = torch.softmax((0.5 * s).masked_fill(~causal, float("-inf")), -1)
    assert torch.allclose(a, ref, rtol=1e-14, atol=0)
    assert a[0, 0, 0] == 1.0  # first token attends only to itself


def test_weights_bad_input():
    s = _scores(0, 4, 4)
    with pytest.raises(TypeError, match="mask"):
        fe.dot_product_weights(s, torch.ones(4, 4))
    with pytest.raises(ValueError, match="mask"):
        ea.expressive_weights(s, torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="beta"):
        fe.dot_product_weights(s, beta=0.0)
    s[0, 0] = float("nan")
    with pytest.raises(ValueError, match="scores"):
        ea.expressive_weights(s)
