"""The symmetric fast path of FlowConfig(fused=True) (energylab.kernels.sphere_symmetric): which step runs, and its
numbers.

In float64 the C kernel must reproduce the default integrator to rounding, for every preset whose Q_hᵀK_h is
symmetric, one and three heads, SA and USA, token counts that are not multiples of the unrolled block; in float32
it must stay within the tolerance of the compiled fused step.
"""
import warnings

import pytest
import torch

from energylab.flows import FlowConfig, SphereWeights, fused_way, preset_weights, simulate
from energylab.kernels import sphere_symmetric
from energylab.sphere import random_tokens

FLOAT32_TOL = 1e-4  # as tests/layers/test_fused_flow.py (measured here: ~1e-6)


def _fused(cfg: FlowConfig) -> FlowConfig:
    return FlowConfig(**{**cfg.__dict__, "fused": True})


def _run_fused(x0, w, cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a silent fallback (no compiler) would fail here
        return simulate(x0, w, _fused(cfg))


@pytest.mark.parametrize("preset", ["identity", "symmetric", "antisymmetric"])
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("n", [5, 13, 37])
def test_symmetric_path_equals_the_default_integrator_in_float64(preset, heads, normalized, n):
    x0 = random_tokens(2, n, 3, seed=n)
    w = preset_weights(preset, 3, heads=heads, seed=4)
    cfg = FlowConfig(beta=2.5, normalized=normalized, step=0.1, steps=4, save_every=2)
    assert fused_way(x0, w, _fused(cfg)) == "symmetric"
    want, got = simulate(x0, w, cfg), _run_fused(x0, w, cfg)
    assert got.x.shape == want.x.shape == (3, 2, n, 3)
    assert (got.x - want.x).abs().max() < 1e-13
    assert (torch.linalg.vector_norm(got.x, dim=-1) - 1).abs().max() < 1e-14
    assert torch.equal(got.times, want.times)


def test_symmetric_path_across_the_column_chunks_and_in_higher_dimension():
    x0 = random_tokens(1, sphere_symmetric.CHUNK + 45, 3, seed=1)  # two chunks of columns, a partial block of rows
    w = preset_weights("symmetric", 3, seed=2)
    cfg = FlowConfig(beta=1.5, step=0.05, steps=2)
    assert (_run_fused(x0, w, cfg).x - simulate(x0, w, cfg).x).abs().max() < 1e-13
    g = torch.Generator().manual_seed(3)
    Q = torch.randn(2, 4, 5, generator=g, dtype=torch.float64) / 3  # d = 5, d_h = 4, two heads
    w5 = SphereWeights(Q, 2 * Q, torch.randn(2, 5, 5, generator=g, dtype=torch.float64))  # Q_hᵀK_h = 2 Q_hᵀQ_h
    x5 = random_tokens(2, 21, 5, seed=4)
    for normalized in (True, False):
        cfg5 = FlowConfig(beta=1.5, normalized=normalized, step=0.05, steps=3)
        assert fused_way(x5, w5, _fused(cfg5)) == "symmetric"
        assert (_run_fused(x5, w5, cfg5).x - simulate(x5, w5, cfg5).x).abs().max() < 1e-13


def test_the_precondition_check_chooses_the_step():
    x0 = random_tokens(1, 16, 3, seed=5)
    sa = FlowConfig(beta=2.0, fused=True)
    assert fused_way(x0, preset_weights("identity", 3), sa) == "symmetric"
    assert fused_way(x0.float(), preset_weights("identity", 3, heads=3, dtype=torch.float32), sa) == "symmetric"
    assert fused_way(x0, preset_weights("random", 3), sa) == "fused"  # Q_hᵀK_h not symmetric
    assert fused_way(x0, preset_weights("identity", 3), FlowConfig(beta=2.0, causal=True, fused=True)) == "fused"
    assert fused_way(x0, preset_weights("identity", 3), FlowConfig(beta=400.0, fused=True)) == "unfused"
    assert fused_way(x0, preset_weights("identity", 3), FlowConfig(beta=400.0, normalized=False,
                                                                   fused=True)) == "symmetric"
    w = preset_weights("identity", 3)
    tilted = SphereWeights(w.Q, w.K + 1e-6 * torch.tensor([[[0.0, 1, 0], [0, 0, 0], [0, 0, 0]]]), w.V)
    assert sphere_symmetric.symmetric_scores(tilted.Q, tilted.K) is None  # 1e-6 is far above float64 rounding
    assert fused_way(x0, tilted, sa) == "fused"
    assert sphere_symmetric.symmetric_scores(tilted.Q.float(), tilted.K.float()) is not None  # below float32's


def test_causal_and_unsymmetric_weights_still_take_the_exact_fused_formula():
    x0 = random_tokens(1, 9, 3, seed=6)
    for w, causal in ((preset_weights("identity", 3), True), (preset_weights("random", 3, seed=1), False)):
        cfg = FlowConfig(beta=1.5, causal=causal, step=0.1, steps=3)
        assert fused_way(x0, w, _fused(cfg)) == "fused"
        want = simulate(x0, w, cfg).x
        assert (simulate(x0, w, _fused(cfg)).x - want).abs().max() < 1e-13


def test_float32_symmetric_path_matches_float64():
    x64 = random_tokens(1, 200, 3, seed=7)
    w64 = preset_weights("identity", 3)
    base = FlowConfig(beta=2.0, step=0.05, steps=200, save_every=50)
    for normalized in (True, False):
        cfg = FlowConfig(**{**base.__dict__, "normalized": normalized})
        want = simulate(x64, w64, cfg)
        got = _run_fused(x64.float(), preset_weights("identity", 3, dtype=torch.float32), cfg)
        assert got.x.dtype == torch.float32
        err = (got.x.double() - want.x).abs().max()
        assert 0 < err < FLOAT32_TOL


def test_the_shifted_exponential_is_exact_to_float32_rounding_at_the_edge_of_the_safe_range():
    # beta = 39 is the largest shift_is_safe allows in float32 with Q = K = I: exponents down to -78 (nat units)
    x0 = random_tokens(1, 64, 3, seed=8)
    cfg = FlowConfig(beta=39.0, step=0.01, steps=3)
    assert fused_way(x0.float(), preset_weights("identity", 3, dtype=torch.float32), _fused(cfg)) == "symmetric"
    want = simulate(x0, preset_weights("identity", 3), cfg).x
    got = _run_fused(x0.float(), preset_weights("identity", 3, dtype=torch.float32), cfg).x
    assert (got.double() - want).abs().max() < 1e-5


def test_usa_overflow_is_reported_by_the_symmetric_path():
    x0 = random_tokens(1, 8, 3, seed=9, dtype=torch.float32)
    w = preset_weights("identity", 3, dtype=torch.float32)
    with pytest.raises(ValueError, match="beta"):
        simulate(x0, w, FlowConfig(beta=120.0, normalized=False, step=0.01, steps=2, fused=True))


def test_without_a_compiler_the_fused_step_is_used(monkeypatch):
    x0 = random_tokens(1, 10, 3, seed=10)
    w = preset_weights("identity", 3)
    cfg = FlowConfig(beta=1.0, step=0.1, steps=2, fused=True)
    monkeypatch.setattr(sphere_symmetric, "compiler", lambda: None)
    sphere_symmetric.library.cache_clear()
    try:
        with pytest.warns(UserWarning, match="symmetric sphere step could not be built"):
            got = simulate(x0, w, cfg).x
    finally:
        sphere_symmetric.library.cache_clear()
    want = simulate(x0, w, FlowConfig(**{**cfg.__dict__, "fused": False})).x
    assert (got - want).abs().max() < 1e-13


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nan_tokens_are_refused_before_any_kernel_runs(dtype):
    """Issue 35: a NaN token into the symmetric C kernel's route is a ValueError naming x0, not NaN trajectories."""
    x0 = random_tokens(1, 7, 3, seed=1).to(dtype)
    x0[0, 2, 1] = float("nan")
    w = preset_weights("identity", 3, heads=1, seed=4)
    w = SphereWeights(w.Q.to(dtype), w.K.to(dtype), w.V.to(dtype))
    with pytest.raises(ValueError, match="x0"):
        simulate(x0, w, _fused(FlowConfig(beta=2.0, step=0.1, steps=3)))
