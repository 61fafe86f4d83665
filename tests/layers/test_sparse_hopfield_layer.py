"""The Hopfield–Fenchel–Young layer (energylab.layers.sparse_hopfield): one rate-one step of its form's energy at
W_KQ = βI, W_PV = I (float64), its gradients, its registration on the five forms, and bad input."""
import pytest
import torch

from energylab import catalog
from energylab.forms import sparse_hopfield as sh
from energylab.layers.sparse_hopfield import HopfieldAttention

F64 = torch.float64
KINDS = [("softmax", None), ("sparsemax", None), ("entmax15", None), ("entmax", 1.7), ("normmax", 2.0)]


def _at_identity(kind, alpha, d, beta):
    layer = HopfieldAttention(d, kind, alpha).double()
    with torch.no_grad():
        layer.W_KQ.copy_(beta * torch.eye(d, dtype=F64))
        layer.W_PV.copy_(torch.eye(d, dtype=F64))
    return layer


@pytest.mark.parametrize("kind, alpha", KINDS)
def test_at_scaled_identities_the_layer_is_one_step_of_its_energy(kind, alpha):
    g = torch.Generator().manual_seed(0)
    d, L, B, beta = 6, 9, 4, 2.5
    memories, xi = torch.randn(B, L, d, generator=g, dtype=F64), torch.randn(B, d, generator=g, dtype=F64)
    layer = _at_identity(kind, alpha, d, beta)
    want = torch.stack([xi[b] + sh.fy_hopfield_update(xi[b], memories[b], beta, kind, alpha) for b in range(B)])
    assert (layer(xi, memories) - want).abs().max() < 1e-12
    # several queries at once give the same rows
    many = layer(xi[:, None].expand(B, 3, d), memories)
    assert many.shape == (B, 3, d) and (many - want[:, None]).abs().max() < 1e-12


def test_sparse_maps_retrieve_a_memory_exactly_where_softmax_only_comes_close():
    d, beta = 5, 4.0
    memories = torch.eye(d, dtype=F64)[None]  # orthonormal patterns: margin x_iᵀx_i − x_jᵀx_i = 1
    xi = memories[:, 0] + 0.05 * torch.ones(1, d, dtype=F64)
    exact = _at_identity("sparsemax", None, d, beta)(xi, memories)  # β · margin = 4 ≥ 1: one-hot
    assert torch.equal(exact, memories[:, 0])
    close = _at_identity("softmax", None, d, beta)(xi, memories)
    assert 1e-3 < (close - memories[:, 0]).abs().max() < 0.5


@pytest.mark.parametrize("kind, alpha", [("softmax", None), ("entmax15", None), ("sparsemax", None)])
def test_gradients_match_finite_differences(kind, alpha):
    torch.manual_seed(1)
    layer = HopfieldAttention(4, kind, alpha, init_scale=0.7).double()
    memories, q = torch.randn(2, 6, 4, dtype=F64), torch.randn(2, 4, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: layer(x, memories), (q,), eps=1e-6, atol=1e-7)
    layer(q, memories).square().sum().backward()
    assert layer.W_KQ.grad.abs().sum() > 0 and layer.W_PV.grad.abs().sum() > 0


def test_the_layer_is_registered_on_every_form_of_its_family():
    forms = {layer.form for layer in catalog.LAYERS if layer.cls is HopfieldAttention}
    assert forms == {"hopfield_retrieval", "sparsemax_retrieval", "entmax15_retrieval", "entmax_retrieval",
                     "normmax_retrieval"}


def test_bad_input_is_named():
    layer = HopfieldAttention(4, "sparsemax")
    with pytest.raises(ValueError, match="d = 4"):
        layer(torch.randn(2, 5), torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="same B"):
        layer(torch.randn(3, 4), torch.randn(2, 3, 4))
    with pytest.raises(TypeError, match="dtype"):
        layer(torch.randn(2, 4, dtype=F64), torch.randn(2, 3, 4, dtype=F64))
    with pytest.raises(ValueError, match="kind must be one of"):
        HopfieldAttention(4, "sparse")
    with pytest.raises(TypeError, match="alpha must be a real number"):
        HopfieldAttention(4, "entmax")
