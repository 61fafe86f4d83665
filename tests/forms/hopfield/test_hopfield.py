"""Chapter 3's identities and claims: the modern Hopfield energy, its CCCP update, one-step retrieval, and the
quick-scale experiment on real digits (Ramsauer et al. 2021). Identities in float64."""
import math

import pytest
import torch

from energylab import catalog
from energylab.experiments import hopfield as hp
from energylab.forms import free_energy as fe
from energylab.forms import hopfield as hf
from tests.probes import F64, gen, rel

pytestmark = pytest.mark.usefixtures("float64_default")  # identities in float64


def _patterns(seed, P=13, d=11, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return g, scale * torch.randn(P, d, generator=g)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("beta", [0.1, 1.0, 8.0])
def test_update_decreases_the_energy_monotonically(seed, beta):
    g, X = _patterns(seed)
    xi = 3 * torch.randn(5, X.shape[1], generator=g)
    r = hp.retrieve(xi, X, beta, steps=25)
    states, E = r.states, r.energies
    assert ((E[1:] - E[:-1]) <= 1e-12 * E[:-1].abs().clamp_min(1)).all() and r.increases() == 0
    # the CCCP step is a gradient step of rate 1: ξ + (−∇E) = X softmax(β Xᵀξ)
    assert torch.allclose(states[1], torch.softmax(beta * xi @ X.T, -1) @ X, rtol=1e-12, atol=1e-13)


def test_update_is_minus_the_gradient():
    assert catalog.verify("hopfield_retrieval", trials=5, generator=torch.Generator().manual_seed(0)) < 1e-10


@pytest.mark.parametrize("seed", range(3))
def test_hopfield_energy_is_chapter_one_free_energy(seed):
    g, X = _patterns(seed)
    beta = 2.5
    xi = torch.randn(4, X.shape[1], generator=g)
    eye = torch.eye(X.shape[1])
    lhs = hf.hopfield_energy(xi, X, beta)
    rhs = fe.dot_product_free_energy(xi, X, eye, 1 / beta) + 0.5 * xi.pow(2).sum(-1)
    assert torch.allclose(lhs, rhs, rtol=1e-12)
    # equal-norm patterns: the elastic F* with W = I, T = 1/β, shifted by ½M²; the update is its η = 1 step
    Xs = 1.7 * X / X.norm(dim=-1, keepdim=True)
    F = fe.softmax_free_energy(xi, Xs, eye, 1 / beta)
    assert torch.allclose(hf.hopfield_energy(xi, Xs, beta) + 0.5 * 1.7 ** 2, F, rtol=1e-12)
    step = xi + fe.softmax_free_energy_update(xi, Xs, eye, 1 / beta)
    assert torch.allclose(xi + hf.hopfield_update(xi, Xs, beta), step, rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_one_step_bound_holds_and_separated_patterns_are_retrieved_in_one_step(seed):
    g = torch.Generator().manual_seed(seed)
    P, d = 31, 97
    X = torch.randint(0, 2, (P, d), generator=g).double().mul(2).sub(1) / math.sqrt(d)  # ±1/√d: unit norm
    target = torch.arange(P)
    flip = torch.rand(P, d, generator=g) < 0.15  # 15% of the signs flipped
    xi = torch.where(flip, -X, X)
    for beta in (1.0, 10.0, 60.0):
        bound = hp.one_step_bound(xi, X, target, beta)
        err = (xi + hf.hopfield_update(xi, X, beta) - X).norm(dim=-1)
        assert (err <= bound * (1 + 1e-12)).all()
    err = (xi + hf.hopfield_update(xi, X, 60.0) - X).norm(dim=-1)
    assert (hp.one_step_bound(xi, X, target, 60.0) < 1e-3).all() and err.max() < 1e-3


def test_self_attention_has_no_such_energy():
    g, X = _patterns(1, P=6, d=4)
    totals = []
    for _ in range(15):
        totals.append(float(hf.hopfield_energy(X, X, 1.0).sum()))
        X = X + hf.hopfield_update(X, X, 1.0)  # every token queries all tokens: self-attention
    assert sum(b > a + 1e-9 for a, b in zip(totals, totals[1:])) > 0


@pytest.fixture(scope="module")
def quick():
    from energylab import experiments

    return hp.run(experiments.get_config("hopfield", n_patterns=(10, 100), betas=(2.0, 16.0, 512.0), n_queries=40,
                                         example_patterns=100, n_examples=2))


def test_experiment_claims_at_quick_scale(quick):
    r = quick
    accuracy, participation = hp.grid(r, "accuracy"), hp.grid(r, "participation")
    assert r.final["energy_increases"] == 0  # CCCP: never up
    assert r.final["violations"] == 0  # every query meeting the one-step condition was retrieved in one step
    assert (accuracy[:, 0] == 0).all()  # low β: no memory is retrieved...
    assert (participation[:, 0] > 0.9 * torch.tensor([10.0, 100.0])).all()  # ... the state averages them all
    assert (accuracy[:, -1] >= 0.85).all()  # high β retrieves
    assert (participation[:, -1] < 1.05).all()
    assert (hp.grid(r, "predicted") <= hp.grid(r, "one_step_accuracy") + 1e-12).all()
    assert hp.grid(r, "own_class_weight")[1, 1] > 0.5  # intermediate β, P = 100: the weight sits on the own class
    assert len(r.extra["examples"]["retrieved"]) == 3
    assert torch.tensor(r.extra["examples"]["original"]).shape == (2, 28, 28)
    assert [(row["P"], row["beta"]) for row in r.tables["grid"]][:4] == [(10, 2.0), (10, 16.0), (10, 512.0), (100, 2.0)]
    with pytest.raises(ValueError, match="metric"):
        hp.grid(r, "recall")


def test_experiment_runs_from_the_command_line(tmp_path):
    from energylab.__main__ import main
    from energylab.engine.results import Results

    out = str(tmp_path / "hop")
    assert main(["run", "hopfield", "--device", "cpu", "--out", out, "--set", "n_patterns=(10,)",
                 "--set", "betas=(8.0,)", "--set", "n_queries=8", "--set", "example_patterns=10"]) == 0
    res = Results.load(out)
    assert res.experiment == "hopfield" and len(res.tables["grid"]) == 1 and res.final["energy_increases"] == 0


def test_experiment_validates():
    from energylab import experiments

    with pytest.raises(ValueError, match="profile"):
        experiments.get_config("hopfield", "huge")
    with pytest.raises(ValueError, match="corruption"):
        hp.corrupt(torch.zeros(2, 28, 28), hp.Config(corruption="blur"), torch.Generator())
    with pytest.raises(ValueError, match="n_patterns"):
        hp.run(hp.Config(n_patterns=(10**6,)))


def test_figures(quick):
    from energylab.viz import hopfield as hopfield_viz

    r = quick
    P, betas = r.config["n_patterns"], r.config["betas"]
    accuracy, predicted = hp.grid(r, "accuracy"), hp.grid(r, "predicted")
    fig = hopfield_viz.retrieval_figure(P, betas, accuracy, predicted)
    assert len(fig.data) == 2 * len(betas) and len(fig.layout.sliders[0].steps) == 1 + len(betas)
    assert list(fig.data[-2].y) == [round(float(v), 4) for v in accuracy[:, -1]]
    fig = hopfield_viz.metastable_figure(P, betas, hp.grid(r, "participation"), hp.grid(r, "own_class_weight"))
    assert len(fig.data) == 2


def test_hopfield_retrieves_a_pattern_in_one_step():
    g = gen(4)
    X = torch.randn(6, 32, generator=g, dtype=F64)
    xi = X[2] + 0.3 * torch.randn(32, generator=g, dtype=F64)
    retrieved = xi + hf.hopfield_update(xi, X, beta=4.0)
    assert rel(retrieved, X[2]) < 1e-6
    assert float(hf.hopfield_energy(retrieved, X, 4.0)) < float(hf.hopfield_energy(xi, X, 4.0))
