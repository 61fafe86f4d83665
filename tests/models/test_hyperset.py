"""Hyper-SET (paper 004): the layer against the catalog forms, its hooks, the sphere measures, the model."""
from __future__ import annotations

import contextlib
import math

import pytest
import torch

from energylab import kernels
from energylab.forms import hyperspherical as hs
from energylab.kernels import hyperset_layer as hk
from energylab.layers.block import TransformerBlock
from energylab.layers.hyperset import HyperSETLayer, sinusoidal_embedding
from energylab.layers.registry import layer_builder
from energylab.models import count_parameters
from energylab.models.hyperset import HyperSET
from energylab.models.looped import LoopedConfig, LoopedModel
from energylab.sphere import average_angle, effective_rank, mean_cosine, mean_pairwise_angle

UPDATES = {"bisoftmax": hs.hyperset_attention_update, "sigmoid": hs.sigmoid_attention_update,
           "linear": hs.kernel_linear_attention_update}
FF_UPDATES = {"relu": hs.hyperset_feedforward_update, "softmax": hs.softmax_feedforward_update,
              "gated": hs.gated_feedforward_update}


def _layer(**kwargs) -> HyperSETLayer:
    torch.manual_seed(0)
    return HyperSETLayer(12, 3, 2, eps=0.0, **kwargs).double()


def _x(B=2, N=5, d=12, seed=1):
    return torch.randn(B, N, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("attention", sorted(UPDATES))
def test_attention_step_is_the_catalog_update(attention):
    layer, x = _layer(attention=attention), _x()
    W, _ = layer.weights()
    ref = UPDATES[attention](x, W, layer.beta, rms=True)  # −∇E at the normalised projections
    assert torch.allclose(layer.attention_update(x), ref, atol=1e-12, rtol=0)
    with torch.no_grad():  # a fixed step: the layer's attention half is x + α · (−∇E)
        layer_fixed = _layer(attention=attention, step=0.3)
        layer_fixed.load_state_dict({k: v for k, v in layer.state_dict().items() if not k.startswith("steps")})
    half = x + 0.3 * ref
    full = half + 0.3 * FF_UPDATES["relu"](half, layer.weights()[1], rms=True)
    assert torch.allclose(layer_fixed(x, None, t=1, x0=x), full, atol=1e-12, rtol=0)


@pytest.mark.parametrize("feedforward", sorted(FF_UPDATES))
def test_feedforward_step_is_the_catalog_update(feedforward):
    layer, x = _layer(feedforward=feedforward), _x()
    ref = FF_UPDATES[feedforward](x, layer.D, rms=True)
    assert torch.allclose(layer.feedforward_update(x), ref, atol=1e-12, rtol=0)


def test_attention_update_is_the_gradient_at_the_normalised_projections_without_the_rmsnorm_jacobian():
    """Eq. 9: u = −Σ_h (∂E/∂Zʰ at Zʰ = RMSNorm(W_h x)) W_h; the chain rule through RMSNorm would give another vector."""
    layer, x = _layer(), _x()
    W, _ = layer.weights()
    Z, _ = layer.normalised(x)
    B, H, N, dh = Z.shape
    Zl = Z.detach().requires_grad_(True)
    eye = torch.eye(H * dh, dtype=x.dtype).view(H, dh, H * dh)
    energy = hs.hyperset_attention_energy(Zl.transpose(1, 2).reshape(B, N, H * dh), eye, layer.beta).sum()
    (G,) = torch.autograd.grad(energy, Zl)  # (B, H, N, d_h)
    u = -(G.transpose(1, 2).reshape(B, N, H * dh) @ W.flatten(0, 1))
    assert torch.allclose(layer.attention_update(x), u, atol=1e-12, rtol=0)
    xg = x.clone().requires_grad_(True)
    (full,) = torch.autograd.grad(layer.energies(xg)["attention"].sum(), xg)  # through the normalisation
    assert float((full + u).detach().abs().max()) > 1e-3


def test_zero_initialised_step_sizes_make_the_layer_the_identity():
    for name in ("hyperset", "hyperset-sigmoid", "hyperset-lora4", "hyperset-gains"):
        layer = layer_builder(name)(16, 4, 4).double()
        x = _x(d=16)
        alpha, gamma = layer.step_sizes(x, 3)
        assert float(alpha.detach().abs().max()) == 0.0 and float(gamma.detach().abs().max()) == 0.0
        assert torch.equal(layer(x, None, t=3, x0=x), x)


def test_fixed_steps_and_lora_change_the_state():
    x = _x(d=16)
    assert not torch.allclose(layer_builder("hyperset-fixed0.1")(16, 4, 4).double()(x, None, t=1, x0=x), x)
    layer = layer_builder("hyperset-lora4")(16, 4, 4).double()
    with torch.no_grad():
        layer.lora_W_B.normal_()
    W1, W2 = layer.weights(1)[0], layer.weights(2)[0]
    assert not torch.allclose(W1, W2)  # one adapter per iteration
    assert torch.equal(layer.weights(8)[0], layer.weights(20)[0])  # past T: the last adapter


def test_fewer_parameters_than_the_transformer_block_at_equal_width():
    for dim, heads in ((32, 4), (64, 4), (256, 8)):
        hyper, block = count_parameters(HyperSETLayer(dim, heads, 4)), count_parameters(TransformerBlock(dim, heads))
        # W (d²) + D (4d²) + step sizes (d² + d² + 2d² and biases) vs qkv, out (4d²) + FF (8d²) + norms
        assert hyper == 9 * dim * dim + 4 * dim
        assert block == 12 * dim * dim + 2 * dim
        assert hyper < block


def test_energy_hooks_on_a_hand_example():
    """Two heads of d_h = 1 and one hidden unit: the normalised projections are ±1, so the energies are exact."""
    layer = HyperSETLayer(2, 2, 1, eps=0.0).double()
    with torch.no_grad():
        layer.W.copy_(torch.eye(2))
        layer.D.copy_(torch.tensor([[1.0, 0.0], [0.0, 0.0]])[:, :2])
    x = torch.tensor([[[2.0, 1.0], [-3.0, 1.0]]], dtype=torch.float64)  # (1, N=2, d=2)
    e = layer.energies(x)
    # head 1: z = (+1, −1): per token log(e^1 + e^−1); head 2: z = (1, 1): per token log(2e); β = 1
    expect_attn = 2 * math.log(math.exp(1) + math.exp(-1)) + 2 * math.log(2 * math.e)
    assert e["attention"].shape == (1,) and math.isclose(float(e["attention"]), expect_attn, rel_tol=1e-12)
    # hidden units (M = 2): u = (x_1, 0) normalised to RMS 1 -> (±√2, 0); ReLU keeps token 1 only: −½ · 2
    assert math.isclose(float(e["feedforward"]), -1.0, rel_tol=1e-12)
    m = layer.metrics(x)
    assert m["effective_rank"].shape == (1, 2) and m["average_angle"].shape == (1, 2)
    assert m["effective_rank_full"].shape == (1,)
    assert torch.allclose(m["average_angle"][0], torch.tensor([180.0, 0.0], dtype=torch.float64), atol=1e-5)
    assert torch.allclose(m["effective_rank"][0], torch.ones(2, dtype=torch.float64))  # one direction per head


def test_effective_rank_of_a_known_spectrum():
    U, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    V, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))
    for sigma in ([1.0, 1.0, 1.0, 1.0], [3.0, 1.0, 0.0, 0.0], [2.0, 1.0, 1.0, 0.0]):
        s = torch.tensor(sigma, dtype=torch.float64)
        X = U[:, :4] @ torch.diag(s) @ V.T  # (N = 6, d = 4) with singular values sigma
        p = s[s > 0] / s.sum()
        assert math.isclose(float(effective_rank(X)), math.exp(-float((p * p.log()).sum())), rel_tol=1e-10)
    assert math.isclose(float(effective_rank(torch.eye(4, dtype=torch.float64))), 4.0, rel_tol=1e-12)


def test_both_average_angles_on_a_known_configuration():
    # three unit vectors at 0°, 90°, 180° in a plane: cosines 0, −1, 0 -> mean cosine −1/3
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    assert math.isclose(float(mean_cosine(x)), -1 / 3, rel_tol=1e-12)
    assert math.isclose(float(average_angle(x)), math.degrees(math.acos(-1 / 3)), rel_tol=1e-12)  # 109.47°
    assert math.isclose(float(mean_pairwise_angle(x)), 120.0, rel_tol=1e-12)  # (90 + 180 + 90) / 3
    # the angles ignore norms; mean_cosine of unnormalised rows is a mean inner product, not a cosine
    assert math.isclose(float(average_angle(3 * x)), float(average_angle(x)), rel_tol=1e-12)
    # equal pairwise angles: the two definitions agree (regular simplex, cos = −1/(n − 1))
    simplex = torch.eye(4, dtype=torch.float64) - 0.25
    assert math.isclose(float(average_angle(simplex)), float(mean_pairwise_angle(simplex)), rel_tol=1e-9)
    with pytest.raises(ValueError, match="x has a zero row"):
        average_angle(torch.zeros(3, 2))


def test_sinusoidal_embedding_and_hooks_have_no_side_effects():
    e = sinusoidal_embedding(torch.tensor([0.0, 1.0]), 8)
    assert e.shape == (2, 8) and torch.equal(e[0], torch.tensor([1.0] * 4 + [0.0] * 4, dtype=torch.float64))
    torch.manual_seed(0)
    model = LoopedModel(LoopedConfig(size=4, dim=16, heads=4, layer="hyperset", iterations=3))
    tokens = torch.randint(0, 5, (2, 16))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rows = model.trace(tokens, 3, lambda t, x, c: model.layer.metrics(x, t))
    assert len(rows) == 3 and rows[0]["effective_rank"].shape == (2, 4)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert set(vars(model.layer)) == set(vars(LoopedModel(LoopedConfig(size=4, dim=16, heads=4, layer="hyperset",
                                                                       iterations=3)).layer))


def test_image_model_shapes_and_baseline():
    x = torch.randn(3, 16, 4)
    for layer in ("hyperset", "hyperset-lora2", "transformer"):
        model = HyperSET(4, 16, 10, dim=16, heads=4, iterations=2, layer=layer)
        assert model(x).shape == (3, 10) and model(x, iterations=5).shape == (3, 10)
    with pytest.raises(ValueError, match="unknown layer"):
        HyperSET(4, 16, 10, layer="nope")


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-11), (torch.float32, 2e-5)])
def test_fast_paths_give_the_reference_layer_values_and_gradients(monkeypatch, dtype, tol):
    """Issue 27, item 5: the one-exponential bi-softmax and the fused ReLU feedforward are drop-in: one iteration's
    output and the gradients of every parameter, of x and of x_0 equal the plain PyTorch route's (the route taken
    under torch.func / torch.compile, forced here)."""
    torch.manual_seed(0)
    layer = HyperSETLayer(12, 3, 2).to(dtype)
    with torch.no_grad():  # non-zero step sizes, so both halves count
        for p in layer.steps.parameters():
            p.normal_(0, 0.3)
    x, x0 = _x().to(dtype), _x(seed=2).to(dtype)

    def run():
        xs, x0s = x.clone().requires_grad_(True), x0.clone().requires_grad_(True)
        y = layer(xs, None, t=2, x0=x0s)
        weight = torch.linspace(-1, 2, y.numel(), dtype=dtype).view_as(y)
        grads = torch.autograd.grad((y * weight).sum(), [xs, x0s, *layer.parameters()])
        return [y.detach(), *grads]

    fast = run()
    with kernels.reference_paths():
        reference = run()
    for got, want in zip(fast, reference):
        assert float((got - want).norm() / want.norm()) < tol


def test_fast_paths_run_under_autocast():
    """Mixed precision (the GPU profiles' amp): the fast paths' backward passes meet bf16 activations and float32
    gradients; they must compute, and agree with float32 to bf16's precision."""
    torch.manual_seed(0)
    layer = HyperSETLayer(16, 2, 2)
    with torch.no_grad():
        for p in layer.steps.parameters():
            p.normal_(0, 0.3)
    x = torch.randn(2, 9, 16, generator=torch.Generator().manual_seed(3))

    def grads(autocast: bool):
        layer.zero_grad()
        xs = x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = layer(xs, None, t=2, x0=xs)
        y.float().square().sum().backward()
        return [xs.grad, layer.W.grad, layer.D.grad]

    for got, want in zip(grads(True), grads(False)):
        assert got.dtype == torch.float32 and float((got - want).norm() / want.norm()) < 0.05


@pytest.mark.parametrize("kwargs", [{}, {"gains": True}, {"attention": "sigmoid"}])
def test_zero_tokens_give_the_same_clear_error_on_every_route(kwargs):
    """The one-exponential fast path took a max over 0 tokens (IndexError); the plain route raised ValueError."""
    layer, x = HyperSETLayer(8, 2, **kwargs), torch.randn(2, 0, 8)
    for route in (contextlib.nullcontext(), kernels.reference_paths()):
        with route, pytest.raises(ValueError, match=r"^x must hold at least 1 token, got shape \(2, 0, 8\) "
                                                   r"\(attention needs at least one key\)$"):
            layer(x)
    with pytest.raises(ValueError, match=r"^z must hold at least 1 token"):
        hk.bisoftmax_one_exp(torch.randn(2, 0, 4), 0.5)
