"""Hyper-SET's step sizes α_t, γ_t learn to depend on the iteration t (issue: the all-zero initialisation saddle).

Zero-initialising all three linear maps of the step-size network (Table 5's description; the authors' Sudoku code)
is a saddle: c_t = time[2](GELU(time[0](e_t))) = 0 and neither time map's weight ever receives a gradient, so α_t
is the same at every t. The layer zero-initialises only the last map; these tests train a tiny layer a few Adam
steps on a target that needs t-dependent steps and check both facts in float64."""
import pytest
import torch

from energylab.layers.hyperset import HyperSETLayer, StepSizes
from energylab.models.looped import LoopedConfig, LoopedModel


def _train(layer: HyperSETLayer, steps: int = 60, T: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(5, 7, 16, generator=g, dtype=torch.float64)
    target = torch.randn(5, 7, 16, generator=g, dtype=torch.float64)
    opt = torch.optim.Adam(layer.parameters(), lr=1e-2)
    for _ in range(steps):
        x = x0
        for t in range(1, T + 1):
            x = layer(x, None, t=t, x0=x0)
        loss = (x - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return x0


def _spread_over_t(layer: HyperSETLayer, x0: torch.Tensor, T: int = 6) -> float:
    """max over t of max |α_t − α_1| (and the same for γ)."""
    with torch.no_grad():
        a1, g1 = layer.step_sizes(x0, 1)
        return max(max(float((a - a1).abs().max()), float((g - g1).abs().max()))
                   for a, g in (layer.step_sizes(x0, t) for t in range(2, T + 1)))


def test_only_the_last_map_starts_at_zero_and_the_layer_is_the_identity():
    torch.manual_seed(0)
    steps = StepSizes(16)
    with torch.no_grad():
        assert float(steps.out.weight.abs().max()) == 0.0 and float(steps.out.bias.abs().max()) == 0.0
        assert float(steps.time[0].weight.abs().max()) > 0.05 and float(steps.time[2].weight.abs().max()) > 0.05


def test_step_size_gradients_are_nonzero_at_initialisation():
    torch.manual_seed(0)
    layer = HyperSETLayer(16, 4).double()
    x0 = torch.randn(3, 5, 16, dtype=torch.float64)
    layer(layer(x0, None, t=1, x0=x0), None, t=2, x0=x0).pow(2).sum().backward()
    assert float(layer.steps.out.weight.grad.abs().max()) > 1e-3  # the outer map moves at the first step
    # the inner maps get their gradient through out.weight, which is 0 for one step: after one step they move
    _train(layer, steps=2)
    for p in layer.steps.time.parameters():
        assert p.grad is not None and float(p.grad.abs().max()) > 1e-8


def test_trained_step_sizes_depend_on_the_iteration():
    torch.manual_seed(0)
    layer = HyperSETLayer(16, 4).double()
    x0 = _train(layer)
    assert _spread_over_t(layer, x0) > 1e-2
    for p in (layer.steps.time[0].weight, layer.steps.time[2].weight):
        assert float(p.abs().max()) > 0.05


def test_all_zero_initialisation_is_the_saddle_the_fix_avoids():
    torch.manual_seed(0)
    layer = HyperSETLayer(16, 4).double()
    for lin in (layer.steps.time[0], layer.steps.time[2]):
        torch.nn.init.zeros_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
    x0 = _train(layer)
    assert float(layer.steps.time[0].weight.abs().max()) == 0.0 and float(layer.steps.time[2].weight.abs().max()) == 0.0
    assert _spread_over_t(layer, x0) == 0.0  # constant over t, to the last bit
    assert float(layer.steps.out.weight.abs().max()) > 1e-3  # while the outer map did learn


@pytest.mark.parametrize("condition", ["x0", "xt"])
def test_condition_selects_what_the_step_sizes_see(condition):
    torch.manual_seed(0)
    layer = HyperSETLayer(16, 4, condition=condition).double()
    with torch.no_grad():
        layer.steps.out.weight.normal_()
    x0 = torch.randn(2, 5, 16, dtype=torch.float64)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    seen = x0 if condition == "x0" else x
    alpha, gamma = layer.step_sizes(seen, 3)
    expected = x + alpha * layer.attention_update(x, 3)
    expected = expected + gamma * layer.feedforward_update(expected, 3)
    assert torch.allclose(layer(x, None, t=3, x0=x0), expected, atol=1e-12, rtol=0)
    assert torch.allclose(layer.half_step(x, 3, x0=x0), x + alpha * layer.attention_update(x, 3), atol=1e-12, rtol=0)


def test_condition_is_checked():
    with pytest.raises(ValueError, match="condition"):
        HyperSETLayer(16, 4, condition="x1")


def test_looped_sudoku_model_passes_x0_and_the_image_model_conditions_on_xt():
    from energylab.models.hyperset import HyperSET

    model = LoopedModel(LoopedConfig(size=4, dim=16, heads=4, layer="hyperset"))
    assert model.layer.condition == "x0"
    assert HyperSET(4, 16, 10, dim=16, heads=4).layer.condition == "xt"


def test_the_shared_step_embedding_is_the_computed_one_and_survives_inference_mode():
    """sin_e(t) is made once per (t, width, dtype, device): the same bits as computing it, and first made under
    torch.inference_mode (an evaluation) it must still serve a training step's backward afterwards."""
    from energylab.layers import hyperset as hs_layer

    hs_layer._cached_embedding.cache_clear()
    torch.manual_seed(0)
    layer = HyperSETLayer(16, 4)
    x = torch.randn(2, 5, 16)
    with torch.inference_mode():
        layer(x, None, t=11, x0=x)
    e = hs_layer._step_embedding(11, layer.steps.time_dim, torch.float32, x.device)
    assert not e.is_inference()
    assert torch.equal(e, hs_layer.sinusoidal_embedding(torch.tensor(11), layer.steps.time_dim).float())
    layer(x.requires_grad_(True), None, t=11, x0=x.detach()).square().sum().backward()
    assert float(layer.steps.out.weight.grad.abs().max()) > 0  # (the time maps get theirs one step later)
