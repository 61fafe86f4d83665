"""The claims chapter 1 makes, asserted in float64 (the notebook prints the same quantities)."""
import math

import pytest
import torch

from energylab.forms import free_energy as fe

pytestmark = pytest.mark.usefixtures("float64_default")


def _instance(seed, n_tokens=11, dim=7):
    g = torch.Generator().manual_seed(seed)
    W = torch.eye(dim) + 0.4 * torch.randn(dim, dim, generator=g) / math.sqrt(dim)
    H = torch.randn(n_tokens, dim, generator=g)
    z = 3.0 * torch.randn(5, dim, generator=g)
    return g, z, H, W


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("T", [0.05, 1.0, 20.0])
def test_gap_is_temperature_times_kl(seed, T):
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(13, generator=g) * 3
    P = torch.distributions.Dirichlet(torch.ones(13)).sample((200,))
    p_star = fe.boltzmann_weights(E, T)
    gap = fe.free_energy_of_weights(P, E.expand_as(P), T) - fe.helmholtz_free_energy(E, T)
    kl = (P * (P.log() - p_star.log())).sum(-1)
    assert torch.allclose(gap, T * kl, rtol=1e-10, atol=1e-12)
    assert (gap >= -1e-12).all()


@pytest.mark.parametrize("seed", range(3))
def test_dot_product_energy_is_an_upper_bound_inside_the_ball(seed):
    g, _, _, W = _instance(seed)
    rho, d = 1.3, W.shape[0]

    def inside(n):
        u = torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=-1)
        return rho * torch.rand(n, 1, generator=g) * u

    z = inside(500)
    H = torch.linalg.solve(W, inside(9).T).T  # ‖W h_i‖ <= rho
    gap = fe.dot_product_free_energy(z, H, W, 0.7) + rho**2 - fe.softmax_free_energy(z, H, W, 0.7)
    assert gap.min() >= -1e-12
    # and it is tight on the sphere
    z_s = rho * torch.nn.functional.normalize(z, dim=-1)
    H_s = torch.linalg.solve(W, (rho * torch.nn.functional.normalize(H @ W.T, dim=-1)).T).T
    tight = fe.dot_product_free_energy(z_s, H_s, W, 0.7) + rho**2 - fe.softmax_free_energy(z_s, H_s, W, 0.7)
    assert tight.abs().max() < 1e-10


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("eta", [0.1, 1.0, 1.9])
def test_descent_with_step_below_two_never_increases_free_energy(seed, eta):
    """∇²F* ⪯ I (Lemma 2), so the descent lemma gives monotone decrease for 0 < η < 2."""
    _, z, H, W = _instance(seed)
    for T in (0.3, 1.0, 4.0):
        zk = z.clone()
        prev = fe.softmax_free_energy(zk, H, W, T)
        for _ in range(40):
            zk = zk + eta * fe.softmax_free_energy_update(zk, H, W, T)
            cur = fe.softmax_free_energy(zk, H, W, T)
            assert (cur <= prev + 1e-10).all()
            prev = cur


def test_step_above_two_can_diverge():
    """The threshold is sharp: far from the tokens the update is (1 − η)z + η h̄, and |1 − η| > 1 blows up."""
    _, z, H, W = _instance(0)
    zk = 10 * z[0]
    start = float(fe.softmax_free_energy(zk, H, W, 1.0))
    for _ in range(30):
        zk = zk + 2.5 * fe.softmax_free_energy_update(zk, H, W, 1.0)
    assert float(fe.softmax_free_energy(zk, H, W, 1.0)) > 100 * start


def test_temperature_is_absorbed_by_the_query_key_matrix():
    _, z, H, W = _instance(1)
    V = torch.randn(W.shape, generator=torch.Generator().manual_seed(5))
    a = fe.attention_step(z, H, W, V, 2.5)
    b = fe.attention_step(z, H, W / 2.5, V, 1.0)
    assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)


def test_zero_temperature_bounds():
    E = torch.tensor([0.3, -1.2, 2.0, -1.1])
    for T in (0.01, 0.5, 3.0):
        F = float(fe.helmholtz_free_energy(E, T))
        assert float(E.min()) - T * math.log(4) - 1e-12 <= F <= float(E.min()) + 1e-12


@pytest.mark.parametrize("bad_T", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_temperature_is_rejected(bad_T):
    E = torch.randn(4)
    with pytest.raises(ValueError, match="T"):
        fe.helmholtz_free_energy(E, bad_T)


def test_nan_and_shape_errors_name_the_argument():
    _, z, H, W = _instance(2)
    with pytest.raises(ValueError, match="z"):
        fe.softmax_free_energy(torch.full_like(z, float("nan")), H, W, 1.0)
    with pytest.raises(ValueError, match="H"):
        fe.softmax_free_energy(z, H[:, :-1], W, 1.0)
    with pytest.raises(ValueError, match="W"):
        fe.softmax_free_energy_update(z, H, W[:-1], 1.0)
