"""Bad input to the sphere flows and the sphere geometry they run on (issues 13 and 35): a config given as a dict,
empty token sets, zero vectors, large inverse temperatures."""
import pytest
import torch

from energylab import flows as fl
from energylab import sphere as sp
from energylab.forms import sphere as fs
from tests.probes import F64, SYM, D, N, randn, unit


def test_simulate_given_a_dict_config_says_to_build_a_flow_config():
    x0, w = sp.random_tokens(1, 4, 3, seed=0), fl.preset_weights("identity", 3)
    with pytest.raises(TypeError, match=r"^config must be a FlowConfig, got dict \(build one with "
                                        r"FlowConfig\(\*\*settings\)\)"):
        fl.simulate(x0, w, {"beta": 1.0, "steps": 3})
    traj = fl.simulate(x0, w, fl.FlowConfig(**{"beta": 1.0, "steps": 3}))
    assert traj.x.shape == (4, 1, 4, 3)


@pytest.mark.parametrize("call, name", [
    (lambda: fl.energy(torch.zeros(1, 0, 3, dtype=F64), 1.0, fl.preset_weights("random", 3)), "x"),
])
def test_empty_token_sets_raise_naming_the_tokens(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must hold at least 1"):
        call()


@pytest.mark.parametrize("call", [
    lambda x: sp.tangent_projection(x, randn(*x.shape)),
    lambda x: sp.sphere_step(x, randn(*x.shape), 0.1),
    lambda x: fs.sphere_interaction_update(x, 1.0),
    lambda x: fs.symmetric_attention_update(x, SYM, 1.0),
])
@pytest.mark.parametrize("which", ["all", "one"])
def test_zero_vectors_have_no_direction_on_the_sphere(call, which):
    x = torch.zeros(N, D, dtype=F64) if which == "all" else torch.cat([unit(N - 1, D), torch.zeros(1, D, dtype=F64)])
    row = 0 if which == "all" else N - 1
    with pytest.raises(ValueError, match=rf"^x has a zero row at index \({row},\)"):
        call(x)


@pytest.mark.parametrize("method, beta", [("euler", 1e4), ("rk4", 1e4), ("rk4", 100.0)])
def test_usa_flow_overflow_names_beta_and_step(method, beta):
    x0, w = sp.random_tokens(2, 8, 3, seed=1), fl.preset_weights("random", 3)
    cfg = fl.FlowConfig(beta=beta, normalized=False, method=method, steps=20, step=0.1)
    pattern = rf"^beta={beta:g}, step=0.1: .*overflowed" + (".*rk4" if method == "rk4" else "")
    with pytest.raises(ValueError, match=pattern):
        fl.simulate(x0, w, cfg)
    sa = fl.simulate(x0, w, fl.FlowConfig(beta=beta, normalized=True, method=method, steps=20, step=0.1))
    assert torch.isfinite(sa.x).all()  # the normalised flow (softmax) is finite for any beta


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_sa_velocity_at_huge_beta_is_the_stable_softmax(dtype):
    x, w, beta = sp.random_tokens(2, 6, 3, seed=2), fl.preset_weights("random", 3, heads=1), 1e4
    q, k, v = x @ w.Q[0].T, x @ w.K[0].T, x @ w.V[0].T
    y = torch.softmax(beta * q @ k.transpose(-1, -2), -1) @ v  # torch.softmax subtracts the max: stable
    reference = y - (y * x).sum(-1, keepdim=True) * x
    got = fl.velocity(x.to(dtype), w.to(x.to(dtype)), beta)
    assert torch.isfinite(got).all()
    assert torch.allclose(got.double(), reference, atol=1e-12 if dtype == F64 else 1e-5)
