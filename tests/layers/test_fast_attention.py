"""The tiled kernels of energylab.kernels.attention against autograd through the catalog's formulas.

Values in float64 (to 1e-12), gradients in float64 against autograd and in float32 against the float64 ones,
with tiles of 3 rows (so every kernel loops over several (batch, rows) tiles), and the saved memory bound.
"""
import math

import pytest
import torch

from energylab import layers as M
from energylab.forms import expressive as ea
from energylab.forms.newton import newton_first_order_direction, ridge_inverse
from energylab.kernels import attention as fa
from tests.probes import rel, value_and_grads

BH, N, DH = 6, 11, 5
F64 = torch.float64


@pytest.fixture
def small_tiles(monkeypatch):
    monkeypatch.setattr(fa, "TILE", 1)
    monkeypatch.setattr(fa, "MIN_ROWS", 3)
    assert len(fa.tiles(BH, N, N)) == BH * 4  # one (batch·head) and 3 rows per tile: 3, 3, 3, 2


def _randn(seed, *shape, dtype=F64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(dtype)


def _causal():
    return torch.ones(N, N, dtype=torch.bool).tril()


def _newton_reference(q, k, T, T2, G=None, mask=None):
    logits = q @ k.transpose(-1, -2) / T
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    G_inv = None if G is None else ridge_inverse(G, 1e-4)
    return newton_first_order_direction(q, k, torch.softmax(logits, -1), G, T2, G_inv=G_inv)


def _newton_fast(q, k, T, T2, G=None, mask=None):
    return fa.newton_direction(q, k, T, T2, G, None if G is None else ridge_inverse(G, 1e-4), mask)


def _bisoftmax_reference(z, beta):
    A = torch.softmax(beta * z @ z.transpose(-1, -2), -1)
    return A @ z + A.transpose(-1, -2) @ z


def _sigmoid_reference(z, beta):
    s = torch.sigmoid(beta * z @ z.transpose(-1, -2))
    return (s * (1 - s)) @ z


def _cases(dtype):
    q, k, v, z = (_randn(i, BH, N, DH, dtype=dtype) for i in range(4))
    T, T2 = (0.5 + _randn(i, BH, 1, 1, dtype=dtype).abs() for i in (5, 6))
    W = _randn(7, BH, DH, DH, dtype=dtype)
    G = W @ W.transpose(-1, -2) + torch.eye(DH, dtype=dtype)
    return {
        "expressive": (fa.expressive_attention, lambda q, k, v: ea.expressive_weights(q @ k.mT) @ v, (q, k, v)),
        "expressive-causal": (lambda q, k, v: fa.expressive_attention(q, k, v, _causal()),
                              lambda q, k, v: ea.expressive_weights(q @ k.mT, _causal()) @ v, (q, k, v)),
        "expressive-scaled": (lambda q, k, v: fa.expressive_attention(q, k, v, scale=0.37),
                              lambda q, k, v: ea.expressive_weights(0.37 * q @ k.mT) @ v, (q, k, v)),
        "bisoftmax": (lambda z: fa.bisoftmax_attention(z, 0.7), lambda z: _bisoftmax_reference(z, 0.7), (z,)),
        "sigmoid": (lambda z: fa.sigmoid_attention(z, 0.7), lambda z: _sigmoid_reference(z, 0.7), (z,)),
        "newton": (_newton_fast, _newton_reference, (q, k, T, T2, G)),
        "newton-identity-causal": (lambda q, k, T, T2: _newton_fast(q, k, T, T2, mask=_causal()),
                                   lambda q, k, T, T2: _newton_reference(q, k, T, T2, mask=_causal()),
                                   (q, k, T, T2)),
    }


def _check_against_float64_autograd(name, dtype, value_tol, grad_tol):
    """The kernel on ``dtype`` inputs against autograd through the reference formula in float64."""
    fast, _, inputs = _cases(dtype)[name]
    _, reference, inputs64 = _cases(F64)[name]
    weight = _randn(9, BH, N, DH)
    y, grads = value_and_grads(fast, inputs, weight)
    y_ref, grads_ref = value_and_grads(reference, inputs64, weight)
    assert rel(y, y_ref) < value_tol
    for g, g_ref in zip(grads, grads_ref):
        assert rel(g, g_ref) < grad_tol


@pytest.mark.parametrize("name", list(_cases(F64)))
def test_kernel_equals_autograd_in_float64(name, small_tiles):
    _check_against_float64_autograd(name, F64, 1e-12, 1e-11)


@pytest.mark.parametrize("name", list(_cases(F64)))
def test_float32_gradients_match_float64(name, small_tiles):
    _check_against_float64_autograd(name, torch.float32, 1e-5, 1e-4)


def test_newton_gradcheck(small_tiles):
    q, k, T, T2, G = _cases(F64)["newton"][2]
    inputs = [t.clone().requires_grad_(True) for t in (q[:2], k[:2], T[:2], T2[:2], G[:2], ridge_inverse(G[:2]))]
    assert torch.autograd.gradcheck(lambda *t: fa.newton_direction(*t), inputs)


def test_expressive_zero_scores_give_zeros_not_nan():
    q, k, v = torch.zeros(1, 3, 2, requires_grad=True), torch.ones(1, 4, 2), torch.ones(1, 4, 2)
    y = fa.expressive_attention(q, k, v)
    assert torch.equal(y, torch.zeros(1, 3, 2))
    (grad,) = torch.autograd.grad(y.sum(), q)
    assert torch.equal(grad, torch.zeros_like(grad))  # such a row passes no gradient back (not NaN)


def test_flex_route_equals_the_kernel():
    """The CUDA route (flex attention with log(s²/(1+s²))) in flex's uncompiled reference mode, on CPU, no grad."""
    q, k, v = (_randn(i, 2, 3, 16, 8) for i in range(3))
    for causal in (False, True):
        mask = torch.ones(16, 16, dtype=torch.bool).tril() if causal else None
        with torch.no_grad():
            flex = fa.flex_expressive_attention(q, k, v, causal, scale=0.5, compiled=False)
        tiled = fa.expressive_attention(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), mask, scale=0.5)
        assert rel(flex, tiled.view_as(flex)) < 1e-12


def _saved_bytes(fn, *inputs):
    sizes = {}

    def pack(t):
        sizes[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return sum(sizes.values())


@pytest.mark.parametrize("cls", [M.ExpressiveAttention, M.MHA2nd1st, M.BiSoftmaxAttention, M.SigmoidAttention])
def test_layers_keep_no_score_tensor(cls):
    """Saved activations stay below a quarter of one (B, H, N, N) score tensor at N = 256 (a route that saves the
    scores keeps one or more whole ones)."""
    b, n, d, h = 2, 256, 16, 4
    layer = cls(d, h, causal=False) if cls in (M.ExpressiveAttention, M.MHA2nd1st) else cls(d, h)
    x = _randn(0, b, n, d, dtype=torch.float32).requires_grad_(True)
    scores = b * h * n * n * 4
    assert _saved_bytes(layer, x) < 0.25 * scores
    assert math.isfinite(float(layer(x).sum()))
