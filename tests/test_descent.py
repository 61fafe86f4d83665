"""Chapter 2's identities and claims (paper 000, Theorems 2-3, App. A.4, Algorithm 1), in float64."""
import math

import pytest
import torch

from energylab import catalog, descent
from energylab import sphere as sp
from energylab.experiments import alternating
from energylab.forms import free_energy as fe

pytestmark = pytest.mark.usefixtures("float64_default")  # identities in float64


def _free_instance(seed, n_tokens=7, dim=5):
    g = torch.Generator().manual_seed(seed)
    W = torch.eye(dim) + 0.3 * torch.randn(dim, dim, generator=g) / math.sqrt(dim)
    return g, torch.randn(3, dim, generator=g), torch.randn(n_tokens, dim, generator=g), W


def _multihead_dot_energy(z, H, W1, W2, T):
    """F̃* = −(1/H) Σ_h T log Σ_i exp(q_hᵀk_{i,h}/T), from the library's single-head dot-product energy."""
    q = torch.einsum("hca,...a->h...c", W1, z)  # (heads, ..., d_h)
    k = torch.einsum("hca,ia->hic", W2, H)  # (heads, N, d_h)
    eye = torch.eye(W1.shape[1])
    return sum(fe.dot_product_free_energy(q[h], k[h], eye, T) for h in range(W1.shape[0])) / W1.shape[0]


@pytest.mark.parametrize("seed", range(3))
def test_multihead_layer_is_one_step_on_the_average_dot_product_energy(seed):
    g = torch.Generator().manual_seed(seed)
    heads, dim, T, eta = 3, 9, 0.7, 0.4
    z, H, W1, W2 = descent.multihead_sphere_instance(11, dim, heads, rho=1.3, queries=2, generator=g)
    z = z + 0.5 * torch.randn(z.shape, generator=g)  # exact for any z, not only on the spheres
    W_QK = torch.einsum("hca,hcb->hab", W1, W2)  # W_{1,h}ᵀ W_{2,h}: (heads, d, d)
    layer = descent.multihead_attention(z, H, W_QK, eta / heads * W_QK, T)
    zr = z.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(_multihead_dot_energy(zr, H, W1, W2, T).sum(), zr)
    assert (layer - (z - eta * grad)).norm() / layer.norm() < 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_multihead_sphere_identities(seed):
    g = torch.Generator().manual_seed(seed)
    heads, dim, T, rho = 3, 9, 0.8, 1.3
    z, H, W1, W2 = descent.multihead_sphere_instance(7, dim, heads, rho=rho, queries=4, generator=g)
    assert torch.allclose(torch.einsum("hca,qa->qhc", W1, z).norm(dim=-1), torch.full((4, heads), rho))
    assert torch.allclose(torch.einsum("hca,ia->ihc", W2, H).norm(dim=-1), torch.full((7, heads), rho))
    gap = fe.multihead_free_energy(z, H, W1, W2, T) - _multihead_dot_energy(z, H, W1, W2, T)
    assert torch.allclose(gap, torch.full((4,), rho ** 2), rtol=1e-12)
    # −∇F* (elastic, Theorem 2) and −∇F̃* differ by z/H, a radial vector: their tangent parts agree
    exact = fe.multihead_free_energy_update(z, H, W1, W2, T)
    zr = z.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(_multihead_dot_energy(zr, H, W1, W2, T).sum(), zr)
    assert torch.allclose(exact - (-grad), -z / heads, atol=1e-12)
    diff = sp.tangent_projection(z, exact) - sp.tangent_projection(z, -grad)
    assert diff.norm() < 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_linear_attention_is_a_step_on_the_quadratic_sum_energy(seed):
    _, z, H, W = _free_instance(seed)
    T, eta = 0.6, 0.3
    zr = z.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(fe.linear_attention_energy(zr, H, W, T).sum(), zr)
    upd = fe.linear_attention_update(z, H, W, T)
    assert (upd + grad).norm() / grad.norm() < 1e-12
    # eq. (13): z + Σ_i (zᵀ W_QᵀW_K h_i) W_V h_i with W_QᵀW_K = W and W_V = ηT W
    scores = -fe.dot_product_potentials(z, H, W)  # (3, N)
    layer = z + scores @ (H @ (eta * T * W).T)
    assert (layer - (z + eta * upd)).norm() / layer.norm() < 1e-12
    assert catalog.verify("linear_attention", trials=3, generator=torch.Generator().manual_seed(seed)) < 1e-10


def _loop(name, z, H, W, T, eta, steps=30, sphere=False):
    upd = {"softmax": fe.softmax_free_energy_update, "dot": fe.dot_product_free_energy_update,
           "linear": fe.linear_attention_update}[name]
    en = {"softmax": fe.softmax_free_energy, "dot": fe.dot_product_free_energy,
          "linear": fe.linear_attention_energy}[name]
    return descent.descend(lambda x: upd(x, H, W, T), lambda x: en(x, H, W, T), z, eta, steps, sphere=sphere)


@pytest.mark.parametrize("seed", range(4))
def test_softmax_loop_descends_below_eta_two_and_overshoots_above(seed):
    _, z, H, W = _free_instance(seed)
    for eta in (0.3, 1.0, 1.9):
        assert _loop("softmax", 3 * z, H, W, 1.0, eta).increases() == 0
    assert _loop("softmax", 3 * z, H, W, 1.0, 2.5).increases() > 10


@pytest.mark.parametrize("seed", range(4))
def test_dot_product_loop_off_the_sphere_lowers_the_bound_but_raises_the_true_energy(seed):
    _, z, H, W = _free_instance(seed)
    run = _loop("dot", z[:1], H, W, 1.0, 1.0, steps=40)
    assert run.increases() == 0  # F̃* is concave: every gradient step lowers it, whatever η
    norms = run.states.norm(dim=-1).squeeze(-1)
    assert norms[-1] > 10 * norms[0]  # ... by running away from the sphere
    F = fe.softmax_free_energy(run.states, H, W, 1.0).squeeze(-1)
    assert F[-1] > F[0] + 10  # the elastic F* (the energy the layer was meant to lower) goes up
    # projected onto the sphere |z| = ρ, the sphere adds curvature ≤ max_i |W h_i| / ρ: η < 2ρ / max_i |W h_i|
    z0 = z[:1]
    bound = 2 * float(z0.norm()) / float((H @ W.T).norm(dim=-1).max())
    assert _loop("dot", z0, H, W, 0.5, descent.BELOW_BOUND * bound, steps=60, sphere=True).increases() == 0
    assert _loop("dot", z0, H, W, 0.5, descent.ABOVE_BOUND * bound, steps=60, sphere=True).increases() > 0


def _linear_bound(H, W, T):
    """2 / (T (λ_max − λ_min)) of M = Σ_i W h_i (W h_i)ᵀ: the curvature of the linear energy along the sphere."""
    WH = H @ W.T
    lam = torch.linalg.eigvalsh(WH.T @ WH)
    return 2.0 / (T * float(lam[-1] - lam[0]))


@pytest.mark.parametrize("seed", range(4))
def test_linear_loop_diverges_off_the_sphere_and_overshoots_on_it_above_the_bound(seed):
    _, z, H, W = _free_instance(seed)
    T = 0.5
    free = _loop("linear", z[:1], H, W, T, 0.1, steps=20)
    assert free.increases() == 0 and free.states[-1].norm() > 100 * free.states[0].norm()
    bound = _linear_bound(H, W, T)
    assert _loop("linear", z[:1], H, W, T, descent.BELOW_BOUND * bound, steps=60, sphere=True).increases() == 0
    assert _loop("linear", z[:1], H, W, T, descent.ABOVE_BOUND * bound, steps=60, sphere=True).increases() > 0


def test_descend_validates():
    with pytest.raises(ValueError, match="eta"):
        descent.descend(lambda x: x, lambda x: x.sum(), torch.zeros(3), -1.0, 3)
    with pytest.raises(ValueError, match="steps"):
        descent.descend(lambda x: x, lambda x: x.sum(), torch.zeros(3), 1.0, -2)
    with pytest.raises(TypeError, match="x0"):
        descent.descend(lambda x: x, lambda x: x.sum(), [0.0], 1.0, 2)
    with pytest.raises(ValueError, match="heads"):
        descent.multihead_sphere_instance(5, 7, 2)


def test_algorithm_one_small_rate_learns_large_rate_collapses():
    g = torch.Generator().manual_seed(0)
    H, y = alternating.cluster_task(300, generator=g)
    args = (H[:200], y[:200], H[200:], y[200:], 4)
    slow = alternating.alternating_optimisation(
        *args, alternating.AlternatingConfig(epochs=40, lr_W=0.05, lr_E=1.0, eta=1.0))
    assert slow.test_accuracy[-1] >= 0.95
    assert slow.cross_entropy[-1] < 0.3 * slow.cross_entropy[0]
    assert slow.free_energy[-1] < slow.free_energy[0]
    fast = alternating.alternating_optimisation(
        *args, alternating.AlternatingConfig(epochs=40, lr_W=0.5, lr_E=1.0, eta=1.0))
    floor = -1.0 * math.log(H.shape[1])  # −T log N: every mapped token on top of z
    assert abs(fast.free_energy[-1] - floor) < 1e-3
    assert fast.cross_entropy[-1] > math.log(4) - 0.05  # the readout is back at chance
    with pytest.raises(ValueError, match="w_objective"):
        alternating.alternating_optimisation(*args, alternating.AlternatingConfig(w_objective="x"))


def test_landscape_figure_has_two_composable_sliders():
    from energylab.viz import descent as descent_viz

    tokens = torch.tensor([[-1.0, 0.5], [1.0, 1.0], [0.3, -1.2]])
    grid = torch.linspace(-2.0, 2.0, 7)
    Z = torch.stack(torch.meshgrid(grid, grid, indexing="xy"), -1)

    def surface(T):
        return grid.numpy(), grid.numpy(), fe.softmax_free_energy(Z, tokens, torch.eye(2), T).numpy()

    def path(T, eta):
        r = descent.descend(lambda x: fe.softmax_free_energy_update(x, tokens, torch.eye(2), T),
                            lambda x: fe.softmax_free_energy(x, tokens, torch.eye(2), T),
                            torch.tensor([1.9, -1.9]), eta, 4)
        return torch.cat([r.states, r.energies[:, None]], -1).numpy()

    fig = descent_viz.landscape_figure(surface, path, tokens.numpy(), [0.2, 1.0, 3.0], [0.5, 1.0])
    assert len(fig.data) == 2 + 2 and [t.visible for t in fig.data[2:]] == [True, False]
    t_slider, e_slider = fig.layout.sliders
    assert len(t_slider.steps) == 3 and len(e_slider.steps) == 2
    assert list(t_slider.steps[0].args[2]) == [0, 1, 2, 3] and list(e_slider.steps[0].args[1]) == [2, 3]
    # the T slider swaps the surface: its first step carries F* at T = 0.2
    assert t_slider.steps[0].args[0]["z"][0][3][3] == round(float(surface(0.2)[2][3, 3]), 4)
