"""Each layer equals its catalog operator on small float64 inputs; causality, dtypes, gradients, bad input."""
import math

import pytest
import torch

from energylab import layers as M
from energylab.forms import _common as cm
from energylab.forms import expressive as ea
from energylab.forms import free_energy as fe
from energylab.forms import hyperspherical as hs
from energylab.forms import newton as nw
from energylab.kernels import attention as fa

B, N, D, HEADS = 2, 7, 15, 3  # distinct sizes; d_h = 5
F64 = torch.float64
ATTENTION = [M.MultiHeadAttention, M.ExpressiveAttention, M.MHA2nd1st, M.MHA2nd1stCorrected]
HYPERSPHERICAL = [M.BiSoftmaxAttention, M.SigmoidAttention, M.KernelLinearAttention]
FEEDFORWARD = [M.ReLUEnergyFeedforward, M.SoftmaxEnergyFeedforward, M.GatedEnergyFeedforward]


def _x(seed=0, dtype=F64, n=N):
    return torch.randn(B, n, D, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _layer(cls, seed=0, **kw):
    torch.manual_seed(seed)
    if cls in FEEDFORWARD:
        return cls(D, hidden=11, **kw).to(F64)
    return cls(D, HEADS, **kw).to(F64)


def _rel(a, b):
    return float(((a - b).norm() / b.norm()).detach())


def _per_head(weight):
    """(d, d) Linear weight -> (H, d_h, d): the rows of head h."""
    return weight.unflatten(0, (HEADS, -1))


def _reference_qkv(layer, x, step):
    """Σ_h [step(z, H_prefix, W_QK,h, W_O,h W_V,h) − z] per batch and query, causal prefix."""
    W_q, W_k, W_v = (_per_head(w) for w in layer.qkv.weight.chunk(3, dim=0))
    W_o = layer.out.weight.unflatten(1, (HEADS, -1)).transpose(0, 1)  # (H, d, d_h)
    out = torch.zeros_like(x)
    for b in range(B):
        for i in range(N):
            tokens, z = x[b, : i + 1], x[b, i]
            for h in range(HEADS):
                out[b, i] += step(z, tokens, W_q[h].T @ W_k[h], W_o[h] @ W_v[h]) - z
    return out


def test_mha_equals_attention_step():
    layer, x = _layer(M.MultiHeadAttention), _x()
    ref = _reference_qkv(layer, x, lambda z, H, W_QK, W_V: fe.attention_step(z, H, W_QK, W_V, math.sqrt(D // HEADS)))
    assert _rel(layer(x), ref) < 1e-12


def test_expressive_attention_equals_catalog_step():
    layer, x = _layer(M.ExpressiveAttention, scale=0.5), _x(1)
    ref = _reference_qkv(layer, x, lambda z, H, W_QK, W_V: ea.expressive_attention_step(z, H, 0.5 * W_QK, W_V))
    assert _rel(layer(x), ref) < 1e-12


@pytest.mark.parametrize("ridge", [0.0, 1e-3])
def test_mha2nd1st_equals_catalog_operator(ridge):
    layer, x = _layer(M.MHA2nd1st, ridge=ridge), _x(2)
    T = torch.tensor([0.7, 1.3, 2.9], dtype=F64)
    T_b = torch.tensor([1.1, 0.6, 4.0], dtype=F64)
    with torch.no_grad():
        layer.log_temperature.copy_(T.log())
        layer.log_temperature_b.copy_(T_b.log())
        layer.out.weight.copy_(-layer.query.weight.T)  # W_{O,h} = −W_{Q,h}ᵀ: the energy's own direction
    W1, W2 = _per_head(layer.query.weight), _per_head(layer.key.weight)
    out = layer(x)
    for b in range(B):
        for i in range(N):
            per_head = [
                nw.mha2nd1st_update(x[b, i], x[b, : i + 1], W1[h : h + 1], W2[h : h + 1], float(T[h]),
                                    T2=float(T_b[h]), potential="dot", ridge=ridge)
                for h in range(HEADS)
            ]
            assert _rel(out[b, i], sum(per_head)) < 1e-10


def test_corrected_mha2nd1st_equals_its_catalog_operator_with_general_weights():
    layer, x = _layer(M.MHA2nd1stCorrected), _x(2)
    with torch.no_grad():
        layer.log_temperature.fill_(math.log(0.9))
        layer.log_temperature_b.fill_(math.log(1.7))
        layer.out.weight.copy_(-torch.linalg.inv(layer.query.weight))  # −WᵀG⁻¹ = −W⁻¹ absorbed into W_O
    W1, W2 = _per_head(layer.query.weight), _per_head(layer.key.weight)
    W = layer.query.weight.detach()
    assert float((W @ W.T - torch.eye(D, dtype=F64)).norm()) > 0.5  # not orthonormal: G ≠ I
    out = layer(x)
    for b in range(B):
        for i in range(N):
            ref = nw.mha2nd1st_corrected_update(x[b, i], x[b, : i + 1], W1, W2, 0.9, T2=1.7, potential="dot")
            assert _rel(out[b, i], ref) < 1e-10
    assert sum(p.numel() for p in layer.parameters()) == 3 * D * D + 2 * HEADS


def test_mha2nd1st_parameters_and_initial_temperatures():
    layer = M.MHA2nd1st(D, HEADS)
    assert sum(p.numel() for p in layer.parameters()) == 3 * D * D + 2 * HEADS
    assert torch.allclose(layer.log_temperature.exp(), torch.full((HEADS,), float(D // HEADS)))
    assert sum(p.numel() for p in M.MultiHeadAttention(D, HEADS).parameters()) == 4 * D * D


@pytest.mark.parametrize("cls", HYPERSPHERICAL)
def test_hyperspherical_layers_equal_their_operators(cls):
    layer, x = _layer(cls), _x(3)
    fn = {M.BiSoftmaxAttention: hs.hyperset_attention_update, M.SigmoidAttention: hs.sigmoid_attention_update,
          M.KernelLinearAttention: hs.kernel_linear_attention_update}[cls]
    out = layer(x)
    for b in range(B):  # batching must not mix sequences
        ref = fn(x[b], layer.weight, 1 / math.sqrt(D // HEADS), rms=True, eps=1e-6)
        assert _rel(out[b], ref) < 1e-12


@pytest.mark.parametrize("cls", FEEDFORWARD)
def test_feedforward_layers_equal_their_operators(cls):
    layer, x = _layer(cls), _x(4)
    fn = {M.ReLUEnergyFeedforward: hs.hyperset_feedforward_update, M.SoftmaxEnergyFeedforward:
          hs.softmax_feedforward_update, M.GatedEnergyFeedforward: hs.gated_feedforward_update}[cls]
    assert _rel(layer(x), fn(x, layer.weight, rms=True, eps=1e-6)) < 1e-12
    assert _rel(layer(x[:1, :3]), fn(x[0, :3], layer.weight, rms=True, eps=1e-6)) < 1e-12


@pytest.mark.parametrize("cls", ATTENTION)
def test_causal_layers_ignore_the_future(cls):
    x = _x(5)
    y = x.clone()
    y[:, 4:] += 1.0  # change tokens 4.. only
    causal, full = _layer(cls), _layer(cls, causal=False)
    assert torch.equal(causal(x)[:, :4], causal(y)[:, :4])
    assert (causal(x)[:, 4:] - causal(y)[:, 4:]).abs().max() > 1e-3
    assert (full(x)[:, :4] - full(y)[:, :4]).abs().max() > 1e-3


@pytest.mark.parametrize("cls", ATTENTION + HYPERSPHERICAL + FEEDFORWARD)
def test_float32_bfloat16_and_gradients(cls):
    torch.manual_seed(0)
    layer = (cls(D, hidden=11) if cls in FEEDFORWARD else cls(D, HEADS)).to(torch.float32)
    x = _x(6, dtype=torch.float32).requires_grad_(True)
    out = layer(x)
    assert out.shape == x.shape and out.dtype == torch.float32 and torch.isfinite(out).all()
    out.square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in layer.parameters())
    assert x.grad is not None and torch.isfinite(x.grad).all()
    layer_bf16 = layer.to(torch.bfloat16)
    out_bf16 = layer_bf16(x.detach().to(torch.bfloat16))
    assert out_bf16.dtype == torch.bfloat16
    assert _rel(out_bf16.float(), out.detach()) < 0.1


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="heads"):
        M.MultiHeadAttention(D, 4)
    with pytest.raises(ValueError, match="heads"):
        M.MHA2nd1st(D, 2)
    with pytest.raises(ValueError, match="causal"):
        M.BiSoftmaxAttention(D, HEADS, causal=True)
    with pytest.raises(ValueError, match="hidden"):
        M.GatedEnergyFeedforward(D, hidden=0)
    with pytest.raises(ValueError, match="ridge"):
        M.MHA2nd1st(D, HEADS, ridge=-1.0)
    layer = M.ExpressiveAttention(D, HEADS)
    with pytest.raises(ValueError, match="x"):
        layer(torch.randn(B, N, D + 1))
    with pytest.raises(ValueError, match="x"):
        layer(torch.randn(N, D))
    bad = torch.randn(B, N, D)
    bad[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match="x"):
        M.MHA2nd1st(D, HEADS)(bad)


@pytest.mark.parametrize("cls", [M.ExpressiveAttention, M.MHA2nd1st, M.BiSoftmaxAttention, M.SigmoidAttention])
def test_blockwise_evaluation_equals_one_block(cls, monkeypatch):
    """Layers loop over cache-sized query blocks; with tiny blocks (3 rows) the result must not change."""
    layer, x = _layer(cls), _x(7, n=10)
    x.requires_grad_(True)
    one_block = layer(x)
    (g_one,) = torch.autograd.grad(one_block.square().sum(), x)
    original = cm.row_blocks
    tiny = lambda n_rows, n_cols, batch: original(n_rows, n_cols, batch, budget=1, min_rows=3)  # noqa: E731
    for module in (cm, hs, M.newton):  # every module that calls row_blocks
        monkeypatch.setattr(module, "row_blocks", tiny)
    monkeypatch.setattr(fa, "TILE", 1)  # the tiled kernels: one (batch·head) and 3 rows per tile
    monkeypatch.setattr(fa, "MIN_ROWS", 3)
    blocked = layer(x)
    assert len(cm.row_blocks(10, 10, 6)) == 4  # the patch is active: blocks of 3, 3, 3, 1 rows
    (g_blocked,) = torch.autograd.grad(blocked.square().sum(), x)
    assert _rel(blocked, one_block) < 1e-13
    assert _rel(g_blocked, g_one) < 1e-12


@pytest.mark.parametrize("causal", [False, True])
def test_mha_weights_are_the_weights_forward_applies(causal):
    """MultiHeadAttention.weights (the hook the chapters read) times the values gives forward's output, in
    float64; causal rows put no weight on later tokens."""
    torch.manual_seed(0)
    layer = M.MultiHeadAttention(12, 3, causal=causal).double()
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    p = layer.weights(x)  # (B, H, N, N)
    v = layer._qkv(x)[2]
    y = layer.out((p @ v).transpose(1, 2).reshape(2, 7, 12))
    assert torch.allclose(p.sum(-1), torch.ones(2, 3, 7, dtype=torch.float64), atol=1e-14)
    assert (y - layer(x)).abs().max() < 1e-13
    assert (p.triu(1) == 0).all() if causal else (p > 0).all()


def test_every_layer_the_catalog_registers_is_checked_against_its_operator_here():
    """The per-family tests above compare each layer with its form's operator in float64; the catalog's layer
    registry (what the Atlas lists) must hold exactly the layers they cover, so a new layer cannot go unchecked."""
    from energylab import catalog
    from energylab.layers.sparse_hopfield import HopfieldAttention  # checked in test_sparse_hopfield_layer.py

    checked = set(ATTENTION + HYPERSPHERICAL + FEEDFORWARD) | {HopfieldAttention}
    assert {layer.cls for layer in catalog.LAYERS} == checked
    assert all(catalog.FORMS[layer.form].layers for layer in catalog.LAYERS)
