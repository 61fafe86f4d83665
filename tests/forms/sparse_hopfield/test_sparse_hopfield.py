"""Chapter 12's identities: the Hopfield–Fenchel–Young energies, their maps (the regularised argmax), the conjugates
Ω* whose gradient is the map, CCCP descent, the margins and the exact-retrieval measurement. Float64."""
import math

import pytest
import torch

from energylab import catalog
from energylab.experiments import sparse_retrieval as sr
from energylab.forms import hopfield as hf
from energylab.forms import sparse_hopfield as sh

pytestmark = pytest.mark.usefixtures("float64_default")

KINDS = [("sparsemax", None), ("entmax15", None), ("entmax", 1.3), ("entmax", 1.5), ("entmax", 2.0),
         ("normmax", 1.5), ("normmax", 2.0), ("normmax", 4.0)]


def _theta(seed, *shape, scale=1.5):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kind,alpha", KINDS)
def test_gradient_of_the_conjugate_is_the_map(kind, alpha):
    theta = _theta(0, 6, 9).requires_grad_(True)
    (g,) = torch.autograd.grad(sh.conjugate(theta, kind, alpha).sum(), theta)
    p = sh.regulariser(kind, alpha).prediction(theta.detach())
    assert (g - p).abs().max() < 1e-12
    assert (p >= 0).all() and (p.sum(-1) - 1).abs().max() < 1e-14


@pytest.mark.parametrize("kind,alpha", KINDS)
def test_the_map_is_the_argmax_over_the_simplex(kind, alpha):
    """Against brute force at N = 3 (a fine grid of the simplex) and the KKT conditions at N = 7."""
    reg = sh.regulariser(kind, alpha)
    n = 400
    a, b = torch.meshgrid(torch.arange(n + 1.0), torch.arange(n + 1.0), indexing="ij")
    keep = a + b <= n
    grid = torch.stack([a[keep], b[keep], n - a[keep] - b[keep]], -1) / n  # every p with entries in 1/n steps
    for seed in range(4):
        theta = _theta(seed, 3, scale=0.7)
        p = reg.prediction(theta)
        best = float(((grid * theta).sum(-1) - reg.omega(grid)).max())
        value = float((p * theta).sum() - reg.omega(p))
        assert value >= best - 1e-12 and value - best < 1e-3  # no grid point beats it; it is near the grid's best
        theta = _theta(10 + seed, 7)
        p = reg.prediction(theta).requires_grad_(True)
        (grad_omega,) = torch.autograd.grad(reg.omega(p), p)  # ∂Ω at p (at p_j = 0 as well)
        slack = theta - grad_omega
        on = p.detach() > 0
        tau = slack[on].mean()
        assert (slack[on] - tau).abs().max() < 1e-12 and (slack[~on] <= tau + 1e-12).all()


def test_maps_against_published_values_and_each_other():
    # the values printed in the README of the entmax package (4 decimals) for x = (-2, 0, 0.5)
    x = torch.tensor([-2.0, 0.0, 0.5])
    assert torch.allclose(sh.sparsemax(x), torch.tensor([0.0, 0.25, 0.75]), atol=1e-15)
    assert torch.allclose(sh.entmax15(x), torch.tensor([0.0, 0.3260, 0.6740]), atol=5e-5)
    assert torch.allclose(sh.normmax(x, 2), torch.tensor([0.0, 0.3110, 0.6890]), atol=5e-5)
    assert torch.allclose(sh.normmax(x, 1000), torch.tensor([0.0, 0.4997, 0.5003]), atol=5e-5)
    theta = _theta(3, 50, 20)
    assert (sh.entmax_bisect(theta, 1.5) - sh.entmax15(theta)).abs().max() < 1e-13
    assert (sh.entmax_bisect(theta, 2.0) - sh.sparsemax(theta)).abs().max() < 1e-13
    assert (sh.conjugate(theta, "softmax") - torch.logsumexp(theta, -1)).abs().max() < 1e-13


def test_maps_against_the_entmax_package():
    entmax = pytest.importorskip("entmax")  # an independent implementation, when installed
    theta = _theta(4, 40, 25)
    assert (sh.sparsemax(theta) - entmax.sparsemax(theta)).abs().max() < 1e-13
    assert (sh.entmax15(theta) - entmax.entmax15(theta)).abs().max() < 1e-13
    for a in (1.25, 1.5, 2.0):
        assert (sh.entmax_bisect(theta, a) - entmax.entmax_bisect(theta, a, n_iter=100)).abs().max() < 1e-12
        assert (sh.normmax(theta, a) - entmax.normmax_bisect(theta, a, n_iter=100)).abs().max() < 1e-12


@pytest.mark.parametrize("kind,alpha", [k for k in KINDS if k[0] != "entmax" or k[1] == 1.5])
def test_map_jacobian_matches_finite_differences(kind, alpha):
    theta = _theta(5, 8)
    f = sh.regulariser(kind, alpha).prediction
    J = torch.autograd.functional.jacobian(f, theta)
    h = 1e-6
    fd = torch.stack([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in torch.eye(8)], 1)
    assert (J - fd).abs().max() < 1e-7


@pytest.mark.parametrize("kind,alpha", KINDS + [("softmax", None)])
def test_cccp_update_never_raises_the_energy(kind, alpha):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(13, 6, generator=g)
    for beta in (0.2, 1.0, 5.0):
        xi = 2 * torch.randn(20, 6, generator=g)
        E = [sh.fy_hopfield_energy(xi, X, beta, kind, alpha)]
        for _ in range(15):
            xi = xi + sh.fy_hopfield_update(xi, X, beta, kind, alpha)
            E.append(sh.fy_hopfield_energy(xi, X, beta, kind, alpha))
        E = torch.stack(E)
        assert ((E[1:] - E[:-1]) <= 1e-12 * E[:-1].abs().clamp_min(1)).all()


def test_softmax_energy_is_chapter_three_energy():
    g = torch.Generator().manual_seed(2)
    X, xi = torch.randn(9, 5, generator=g), torch.randn(4, 5, generator=g)
    assert torch.allclose(sh.fy_hopfield_energy(xi, X, 2.5, "softmax"), hf.hopfield_energy(xi, X, 2.5), rtol=1e-13)
    assert torch.allclose(sh.fy_hopfield_update(xi, X, 2.5, "softmax"), hf.hopfield_update(xi, X, 2.5), rtol=1e-13)


@pytest.mark.parametrize("kind,alpha", KINDS)
def test_one_hot_exactly_at_the_margin(kind, alpha):
    m = sh.margin(kind, alpha)
    assert m == pytest.approx(1 / (alpha - 1) if kind == "entmax" else 2.0 if kind == "entmax15" else 1.0)
    f = sh.regulariser(kind, alpha).prediction
    base = torch.tensor([0.0, -0.3, -2.0, -5.0])
    for gap, one_hot in ((m * (1 + 1e-9), True), (m * (1 - 1e-6), False)):
        theta = base.clone()
        theta[0] = gap - 0.3  # the top score exceeds the second by gap
        p = f(theta)
        assert bool((p == torch.tensor([1.0, 0, 0, 0])).all()) == one_hot
    assert sh.margin("softmax") == math.inf


def test_exact_retrieval_measurement():
    r = sr.retrieval_grid(sr.RetrievalConfig(loads=(4, 64), betas=(1.0, 4.0, 32.0), queries=128))
    for row in r["rows"]:
        assert row["query_violations"] == 0 and row["ball_violations"] == 0  # both conditions as derived
        assert row["ball_cond"] <= row["query_cond"] and row["bitwise"] == row["exact"]
    for kind in ("sparsemax", "entmax15"):
        exact = sr.rate(r, kind)
        assert exact[:, -1].min() == 1.0 and exact[:, 0].max() < 0.5  # large β: every query; β = 1: few
    assert sr.rate(r, "softmax").max() == 0.0 and sr.rate(r, "softmax", "close")[0, -1] > 0.9
    assert sr.rate(r, "sparsemax")[1, 1] > sr.rate(r, "entmax15")[1, 1]  # margin 1 < margin 2


def test_capacity_protocol_matches_chapter_three_for_softmax():
    from energylab.experiments import hopfield_capacity as hc

    cfg = hc.CapacityConfig(dims=(6, 8))
    softmax = [r["capacity"] for r in sr.capacity_rows("softmax", cfg)]
    assert softmax == [r["capacity"] for r in hc.capacity(cfg)["rows"]]
    rows = sr.capacity_rows("sparsemax", hc.CapacityConfig(dims=(4,)), max_P=64)
    assert rows[0]["capacity"] > 0


def test_catalog_forms_verify():
    for name in ("sparsemax_retrieval", "entmax15_retrieval", "entmax_retrieval", "normmax_retrieval"):
        assert catalog.verify(name, trials=3, generator=torch.Generator().manual_seed(0)) < catalog.EXACT_TOL
        assert catalog.FORMS[name].chapter == "12_sparse_hopfield"
