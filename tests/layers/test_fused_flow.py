"""The fused Euler step of the sphere flows (energylab.kernels.sphere_fused, FlowConfig(fused=True)).

The kernel's formula is checked uncompiled in float64 against the default integrator on every preset, head count,
flow and mask; the compiled path once, in float32 against the float64 default (the stated tolerance): compiling
takes seconds per shape.
"""
import warnings

import pytest
import torch

from energylab.flows import PRESETS, FlowConfig, SphereWeights, fused_way, preset_weights, simulate
from energylab.kernels import sphere_fused
from energylab.sphere import random_tokens

FLOAT32_TOL = 1e-4  # max |x_float32 fused - x_float64| after 200 steps of h = 0.05 (the random preset here)


def _weights_tensors(w: SphereWeights):
    return w.Q, w.K, w.V


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_formula_equals_the_default_step(preset, heads, normalized, causal):
    x0 = random_tokens(2, 11, 3, seed=3)
    w = preset_weights(preset, 3, heads=heads, seed=4)
    cfg = FlowConfig(beta=2.5, normalized=normalized, causal=causal, step=0.1, steps=1)
    want = simulate(x0, w, cfg).x[-1]  # (B, N, d)
    beta, h = torch.tensor(2.5, dtype=torch.float64), torch.tensor(0.1, dtype=torch.float64)
    got = sphere_fused.euler_step(x0.transpose(-1, -2).contiguous(), *_weights_tensors(w), beta, h, normalized,
                                causal).transpose(-1, -2)
    assert got.shape == want.shape
    assert (got - want).abs().max() < 1e-13
    assert (torch.linalg.vector_norm(got, dim=-1) - 1).abs().max() < 1e-14


def test_fused_formula_with_general_weights_in_higher_dimension():
    g = torch.Generator().manual_seed(5)
    H, d_h, d = 2, 3, 5
    w = SphereWeights(*(torch.randn(*shape, generator=g, dtype=torch.float64)
                        for shape in ((H, d_h, d), (H, d_h, d), (H, d, d))))
    x0 = random_tokens(3, 7, d, seed=6)
    want = simulate(x0, w, FlowConfig(beta=1.7, step=0.05, steps=1)).x[-1]
    one = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    got = sphere_fused.euler_step(x0.transpose(-1, -2).contiguous(), w.Q, w.K, w.V, one(1.7), one(0.05), True, False)
    assert (got.transpose(-1, -2) - want).abs().max() < 1e-13


def test_compiled_fused_flow_float32_matches_float64():
    x64 = random_tokens(1, 64, 3, seed=7)
    w64 = preset_weights("random", 3)  # Q_hᵀK_h not symmetric: the compiled step, not kernels.sphere_symmetric
    base = FlowConfig(beta=2.0, step=0.05, steps=200, save_every=50)
    w32 = w64.to(x64.float())  # the same weights rounded (the preset draws other numbers in float32)
    assert fused_way(x64.float(), w32, FlowConfig(**{**base.__dict__, "fused": True})) == "fused"
    want = simulate(x64, w64, base)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got32 = simulate(x64.float(), w32, FlowConfig(**{**base.__dict__, "fused": True}))
    assert not [w for w in caught if "fused sphere step" in str(w.message)]  # compiled, no silent fallback
    assert got32.x.shape == want.x.shape == (5, 1, 64, 3)
    assert got32.x.dtype == torch.float32
    err = (got32.x.double() - want.x).abs().max()
    assert 0 < err < FLOAT32_TOL  # float32 really ran, and stays within the stated tolerance
    assert (got32.times == want.times.float()).all()


def test_shift_safety_bound_and_fallback():
    w = preset_weights("identity", 3, dtype=torch.float32)
    assert sphere_fused.shift_is_safe(w.Q, w.K, 39.0, torch.float32)
    assert not sphere_fused.shift_is_safe(w.Q, w.K, 40.0, torch.float32)
    assert sphere_fused.shift_is_safe(w.Q, w.K, 300.0, torch.float64)
    # beyond the bound SA takes the unfused step: the same numbers as fused=False, without compiling anything
    x0 = random_tokens(1, 9, 3, seed=8, dtype=torch.float32)
    cfg = FlowConfig(beta=60.0, step=0.01, steps=5)
    a = simulate(x0, w, cfg).x
    b = simulate(x0, w, FlowConfig(**{**cfg.__dict__, "fused": True})).x
    assert torch.equal(a, b)


def test_fused_needs_euler():
    x0 = random_tokens(1, 5, 3, seed=9)
    with pytest.raises(ValueError, match="method"):
        simulate(x0, preset_weights("identity", 3), FlowConfig(method="rk4", fused=True))
