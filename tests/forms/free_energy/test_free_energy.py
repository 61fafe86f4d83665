"""Free energies of paper 000: Lemma 1, Theorem 1, the sphere identity, operators = autograd, bad input."""
import math

import pytest
import torch

from energylab import catalog
from energylab.forms import free_energy as fe

N, D = 7, 5  # distinct primes so a transposition cannot pass


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _free_instance(seed, batch=(3,)):
    g = _gen(seed)
    z = torch.randn(*batch, D, generator=g, dtype=torch.float64)
    H = torch.randn(N, D, generator=g, dtype=torch.float64)
    W = torch.randn(D, D, generator=g, dtype=torch.float64) / math.sqrt(D)
    return z, H, W


def _rel(a, b):
    return float((a - b).norm() / b.norm())


def test_potential_shapes_and_hand_value():
    z = torch.tensor([1.0, 2.0], dtype=torch.float64)
    H = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    W = torch.tensor([[2.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    # W h = (2,0), (0,1), (2,1); z − W h = (−1,2), (1,1), (−1,1)
    assert fe.elastic_potentials(z, H, W).tolist() == [2.5, 1.0, 1.0]
    assert fe.dot_product_potentials(z, H, W).tolist() == [-2.0, -2.0, -4.0]
    zb, Hb, Wb = _free_instance(0, batch=(2, 3))
    assert fe.elastic_potentials(zb, Hb, Wb).shape == (2, 3, N)
    assert fe.softmax_free_energy(zb, Hb, Wb, 0.7).shape == (2, 3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lemma1_boltzmann_minimises_free_energy(seed):
    g = _gen(seed)
    E = torch.randn(4, N, generator=g, dtype=torch.float64)
    T = 0.3 + seed * 0.4
    p_star = fe.boltzmann_weights(E, T)
    F_star = fe.helmholtz_free_energy(E, T)
    # F(Boltzmann) == F* exactly (eq. 2 = eq. 3)
    assert torch.allclose(fe.free_energy_of_weights(p_star, E, T), F_star, rtol=1e-12, atol=0)
    # any other distribution has a larger free energy
    for _ in range(20):
        q = torch.softmax(torch.randn(4, N, generator=g, dtype=torch.float64) * 2, -1)
        assert (fe.free_energy_of_weights(q, E, T) > F_star).all()
    # degenerate distributions (0 log 0 = 0) too, and F* <= min_i E_i
    onehot = torch.nn.functional.one_hot(E.argmin(-1), N).to(E.dtype)
    assert torch.equal(fe.free_energy_of_weights(onehot, E, T), E.min(-1).values)
    assert (F_star < E.min(-1).values).all()


def test_helmholtz_is_stable_for_large_energies():
    E = torch.tensor([1000.0, 1001.0, 5000.0], dtype=torch.float64)
    F = fe.helmholtz_free_energy(E, 1.0)
    assert math.isfinite(float(F))
    assert abs(float(F) - (1000.0 - math.log(1 + math.exp(-1)))) < 1e-10


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "energy,update",
    [(fe.softmax_free_energy, fe.softmax_free_energy_update),
     (fe.dot_product_free_energy, fe.dot_product_free_energy_update)],
)
def test_operator_is_minus_gradient(seed, energy, update):
    z, H, W = _free_instance(seed)
    T = 0.4 + 0.3 * seed
    zg = z.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(energy(zg, H, W, T).sum(), zg)
    assert _rel(update(z, H, W, T), -grad) < 1e-10


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sphere_identity_and_theorem1(seed):
    z, params = fe.sample_sphere_tokens(N, D, generator=_gen(seed), rho=1.7)
    H, W, T = params["H"], params["W"], params["T"]
    rho = 1.7
    assert torch.allclose(z.norm(dim=-1), torch.full((3,), rho, dtype=torch.float64), atol=1e-13)
    assert torch.allclose((H @ W.T).norm(dim=-1), torch.full((N,), rho, dtype=torch.float64), atol=1e-13)
    # F* = F̃* + ρ² on the sphere
    F = fe.softmax_free_energy(z, H, W, T)
    F_tilde = fe.dot_product_free_energy(z, H, W, T)
    assert _rel(F, F_tilde + rho**2) < 1e-12
    # Theorem 1: one gradient step of rate η on F̃* (and on F*, up to the radial term) is attention
    eta = 0.37
    step = z + eta * fe.dot_product_free_energy_update(z, H, W, T)
    attn = fe.attention_step(z, H, W_QK=W, W_V=eta * W, T=T)
    assert _rel(step, attn) < 1e-12
    # the paper's W_V = ηT W is off by the factor T (unless T = 1)
    wrong = fe.attention_step(z, H, W_QK=W, W_V=eta * T * W, T=T)
    assert _rel(step, wrong) > 1e-3
    # the gradients of F* and F̃* differ only by z (the gradient of the constant-on-sphere ½‖z‖²)
    diff = fe.softmax_free_energy_update(z, H, W, T) - fe.dot_product_free_energy_update(z, H, W, T)
    assert _rel(diff, -z) < 1e-12


@pytest.mark.parametrize("seed", [0, 1])
def test_lemma2_hessian(seed):
    z, H, W = _free_instance(seed, batch=())
    T = 0.6
    hess = torch.autograd.functional.hessian(lambda y: fe.softmax_free_energy(y, H, W, T), z)
    p = fe.boltzmann_weights(fe.elastic_potentials(z, H, W), T)
    WH = H @ W.T
    h_bar = p @ WH
    d = WH - h_bar  # d_i = W h_i − h̄
    eq9 = torch.eye(D, dtype=torch.float64) - torch.einsum("i,ia,ib->ab", p, d, d) / T
    r = z - WH  # r_i = z − W h_i; eq. 7 with ∇F* = z − h̄
    grad = z - h_bar
    eq7 = torch.eye(D, dtype=torch.float64) - (torch.einsum("i,ia,ib->ab", p, r, r) - torch.outer(grad, grad)) / T
    assert _rel(eq9, hess) < 1e-10
    assert _rel(eq7, hess) < 1e-10
    # F̃*: Hessian = −(1/T) Cov_p(W h) ⪯ 0 (concave)
    hess_t = torch.autograd.functional.hessian(lambda y: fe.dot_product_free_energy(y, H, W, T), z)
    p_t = torch.softmax(WH @ z / T, -1)
    d_t = WH - p_t @ WH
    assert _rel(-torch.einsum("i,ia,ib->ab", p_t, d_t, d_t) / T, hess_t) < 1e-10
    assert torch.linalg.eigvalsh(hess_t).max() < 1e-12


def test_bad_input_names_the_argument():
    z, H, W = _free_instance(0)
    with pytest.raises(ValueError, match="T"):
        fe.softmax_free_energy(z, H, W, 0.0)
    with pytest.raises(ValueError, match="T"):
        fe.dot_product_free_energy_update(z, H, W, -1.0)
    with pytest.raises(ValueError, match="H"):
        fe.elastic_potentials(z, H[:, :3], W)
    with pytest.raises(ValueError, match="W"):
        fe.dot_product_potentials(z, H, W[:3])
    bad = z.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="z"):
        fe.softmax_free_energy(bad, H, W, 1.0)
    badH = H.clone()
    badH[1, 1] = float("inf")
    with pytest.raises(ValueError, match="H"):
        fe.softmax_free_energy_update(z, badH, W, 1.0)
    with pytest.raises(ValueError, match="p"):
        fe.free_energy_of_weights(torch.ones(3), torch.ones(4), 1.0)
    with pytest.raises(TypeError, match="z"):
        fe.elastic_potentials([1.0] * D, H, W)


def test_linear_attention_is_a_gradient_step_with_eta_T():
    z, p = catalog.FORMS["linear_attention"].sample(7, 5, generator=_gen(1))
    H, W, T = p["H"], p["W"], p["T"]
    eta = 0.3
    step = z + eta * fe.linear_attention_update(z, H, W, T)
    scores = z @ W @ H.T  # zᵀ W_QᵀW_K h_i with W_QᵀW_K = W
    linear_attention = z + scores @ (H @ (eta * T * W).T)  # eq. 13 with W_V = ηT W
    assert _rel(step, linear_attention) < 1e-13


def test_softmax_free_energy_is_convex_from_t_equal_rho_squared_and_not_below():
    """Chapter 1 (Lemma 2 with its condition): the Hessian of F* is I - Cov_p(W h)/T, at least (1 - rho^2/T) I when
    every ||W h_i|| <= rho, so F* is convex for T >= rho^2; below, an instance with an indefinite Hessian exists."""
    import torch

    from energylab.forms.free_energy import softmax_free_energy

    g = torch.Generator().manual_seed(0)
    d, n, rho = 3, 6, 2.0
    H = torch.randn(n, d, generator=g, dtype=torch.float64)
    H = rho * H / H.norm(dim=1, keepdim=True)  # W = I: every W h_i on the sphere of radius rho
    W = torch.eye(d, dtype=torch.float64)
    lowest = {}
    for T in (rho ** 2, 2 * rho ** 2, 0.25 * rho ** 2):
        worst = float("inf")
        for _ in range(20):
            z = torch.randn(d, generator=g, dtype=torch.float64)
            z = z / z.norm() * rho * torch.rand(1, generator=g, dtype=torch.float64)  # inside the ball
            hess = torch.autograd.functional.hessian(lambda v: softmax_free_energy(v, H, W, T), z)
            worst = min(worst, float(torch.linalg.eigvalsh(hess).min()))
        lowest[T] = worst
        if T >= rho ** 2:
            assert worst >= 1 - rho ** 2 / T - 1e-12, (T, worst)
    assert lowest[0.25 * rho ** 2] < -0.1  # not convex below rho^2
