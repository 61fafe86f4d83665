"""Claims corrected after the referee's report (issue 38), computed live: each test fails on the old claim.

- Chapter 6: with several heads E_β increases along USA but NOT along SA (the one-head proof's step "the
  velocity is a positive multiple of the gradient" fails).
- Chapter 2: on the sphere ‖z‖ = ρ the elastic F* follows the dot-product F̃* only when every ‖W h_i‖ is the same.
- Chapter 2: Algorithm 1 at its own rate η_W = 1 oscillates with period 2 (not a slow degradation).
"""
import json
import math
import pathlib
import re

import numpy as np
import pytest
import torch

from energylab import descent, flows
from energylab.experiments import alternating
from energylab.flows import FlowConfig, preset_weights, simulate
from energylab.forms import free_energy
from energylab.forms.sphere import energy_rate
from energylab.sphere import random_tokens


# ----------------------------------------------------------------------------- chapter 6: several heads
def test_energy_rate_is_the_chain_rule():
    """energy_rate(x, v) = d/ds E_β(x + s v) at s = 0, central difference in float64, any direction v."""
    w = preset_weights("symmetric", 6, heads=3, seed=2)
    x = random_tokens(3, 7, 6, seed=1)
    v = torch.randn(x.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    eps = 1e-6
    fd = (flows.energy(x + eps * v, 1.3, w) - flows.energy(x - eps * v, 1.3, w)) / (2 * eps)
    got = energy_rate(x, v, 1.3, w.Q, w.K)
    assert torch.allclose(got, fd, rtol=1e-7, atol=0), (got, fd)


def _rates(w, beta, normalized, batch=2000, n=5, d=3, seed=0):
    x = random_tokens(batch, n, d, seed=seed)
    return energy_rate(x, flows.velocity(x, w, beta, normalized=normalized), beta, w.Q, w.K)


@pytest.mark.parametrize("name", ["identity", "symmetric"])
def test_usa_with_several_heads_climbs_the_energy(name):
    """USA = n · tangent gradient of E_β for any number of heads with V_h = Q_hᵀK_h: the rate is ≥ 0 everywhere."""
    w = preset_weights(name, 3, heads=3, seed=0)
    assert float(_rates(w, 4.0, normalized=False).min()) >= 0


@pytest.mark.parametrize("name", ["identity", "symmetric"])
def test_sa_with_one_head_climbs_the_energy(name):
    """The one-head proof: SA's velocity is (n²/Z_i) times the tangent gradient, so the rate is ≥ 0."""
    w = preset_weights(name, 3, heads=1, seed=0)
    assert float(_rates(w, 4.0, normalized=True).min()) >= -1e-12


def test_sa_with_several_heads_can_lower_the_energy():
    """Chapter 6's old claim 'the same argument works with several heads' is false for SA: with three identity heads
    at β = 4 the rate is negative at a sizeable share of random states (asserted: over 5% of 2,000), and along the
    chapter's n = 48 run E_β falls on many saved steps (asserted: over 10% of 600). The measured shares are the ones
    section 6.2 prints; they are not repeated here, where nothing would keep them current."""
    w = preset_weights("identity", 3, heads=3)
    assert float((_rates(w, 4.0, normalized=True) < 0).double().mean()) > 0.05
    traj = simulate(random_tokens(1, 48, 3, seed=0), w, FlowConfig(beta=4.0, step=0.01, steps=6000, method="rk4",
                                                                    save_every=10))
    E = flows.energy(traj.x, 4.0, w)[:, 0]
    assert float((E[1:] - E[:-1] < -1e-12).double().mean()) > 0.1


# ----------------------------------------------------------------------------- chapter 2: elastic F* on the sphere
def _projected_dot_loop(H, W, z0, eta, T=0.5, K=30):
    """The chapter's projected dot-product loop; returns F̃* and the elastic F* along it, (K + 1,) each."""
    run = descent.descend(lambda x: free_energy.dot_product_free_energy_update(x, H, W, T),
                          lambda x: free_energy.dot_product_free_energy(x, H, W, T), z0, eta, K, sphere=True)
    elastic = free_energy.softmax_free_energy(run.states, H, W, T).reshape(-1)
    return run.energies.reshape(-1), elastic


def _instance(equal_norms, rho=1.5, N=7, d=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    H = torch.randn(N, d, generator=g, dtype=torch.float64)
    W = torch.eye(d, dtype=torch.float64) + 0.3 * torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    if equal_norms:  # rescale the tokens so that every ‖W h_i‖ = ρ
        H = H * (rho / (H @ W.T).norm(dim=-1, keepdim=True))
    z0 = rho * torch.nn.functional.normalize(torch.randn(1, d, generator=g, dtype=torch.float64), dim=-1)
    return H, W, z0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_elastic_free_energy_follows_only_with_equal_key_norms(seed):
    """Old claim: 'on the sphere F* = F̃* + ρ², so the elastic F* follows'. True when every ‖W h_i‖ = ρ = ‖z‖ (the
    gap F* − F̃* is the constant ρ² along the loop); false in general: with unequal key norms the gap moves and
    the elastic F* rises on some steps below the step bound while F̃* falls on every one."""
    rho = 1.5
    H, W, z0 = _instance(True, rho=rho, seed=seed)
    eta = 0.9 * 2 * rho / float((H @ W.T).norm(dim=-1).max())
    dot, elastic = _projected_dot_loop(H, W, z0, eta)
    assert torch.allclose(elastic - dot, torch.full_like(dot, rho**2), atol=1e-12)
    assert bool((elastic[1:] - elastic[:-1] < 1e-12).all())

    H, W, z0 = _instance(False, rho=rho, seed=seed)
    eta = 0.9 * 2 * rho / float((H @ W.T).norm(dim=-1).max())
    dot, elastic = _projected_dot_loop(H, W, z0, eta)
    assert bool((dot[1:] - dot[:-1] < 1e-12).all())  # F̃* falls at every step below the bound
    gap = elastic - dot
    assert float(gap.max() - gap.min()) > 0.1  # not a constant: the elastic F* does not follow
    assert int((elastic[1:] - elastic[:-1] > 1e-9).sum()) >= 1


# ----------------------------------------------------------------------------- chapter 2: η_W = 1 oscillates
def period_two_ratio(values, start=10):
    """Mean |a_k − a_{k−1}| over mean |a_k − a_{k−2}| from epoch ``start`` on: ≫ 1 for a period-2 oscillation."""
    a = np.asarray(values)[start:]
    return float(np.abs(np.diff(a)).mean() / np.abs(a[2:] - a[:-2]).mean())


@pytest.mark.parametrize("seed", [1, 3, 4])
def test_algorithm_one_at_its_own_rate_oscillates_with_period_two(seed):
    """At η_W = η = 1 the test accuracy alternates between two phases, one of them below chance 1/4 on some epochs:
    neighbouring epochs differ far more than epochs two apart (period_two_ratio above 4 on each of these seeds)."""
    gen = torch.Generator().manual_seed(seed)
    H, y = alternating.cluster_task(600, generator=gen)
    cfg = alternating.AlternatingConfig(epochs=60, eta=1.0, lr_W=1.0, lr_E=1.0, T=1.0, w_objective="energy")
    h = alternating.alternating_optimisation(H[:400], y[:400], H[400:], y[400:], 4, cfg)
    assert period_two_ratio(h.test_accuracy) > 4
    assert min(h.test_accuracy[10:]) < 0.25 < max(h.test_accuracy[10:])


# ----------------------------------------------------------------------------- book/intro.md's chapter table
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _experiments_in_notebook(path: pathlib.Path) -> set[str]:
    """The registered experiments a chapter runs or reads: by name in a call, or imported as a module."""
    from energylab.experiments import EXPERIMENTS

    nb = json.loads(path.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    named = re.findall(r"(?:get_config|get_experiment|run_experiment|load_committed)\(\s*\"(\w+)\"", code)
    imported = re.findall(r"from energylab\.experiments import ([\w, ]+)", code)
    names = set(named) | {m.strip() for group in imported for m in group.split(",")}
    return names & set(EXPERIMENTS)


def test_intro_table_matches_the_notebooks():
    """Each row of the introduction's chapter table names exactly the experiments its notebook runs or reads, and a
    chapter that trains nothing runs no training experiment."""
    rows = [line for line in (ROOT / "book" / "intro.md").read_text().splitlines()
            if re.match(r"\| \[\d+\]\(\.\./notebooks/", line)]
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(rows) == len(notebooks)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        path = ROOT / "notebooks" / re.search(r"\.\./notebooks/(\S+\.ipynb)", cells[0]).group(1)
        listed = set(re.findall(r"`(\w+)`", cells[4]))
        assert listed == _experiments_in_notebook(path), (path.name, listed)
        if cells[3].startswith("nothing"):
            assert listed <= {"hopfield"}, path.name  # hopfield stores and retrieves; it takes no gradient step


# ----------------------------------------------------------------------------- the Atlas's chapter links
def test_every_form_links_to_a_chapter_that_names_it():
    """The Atlas links each form to the chapter that derives it: that chapter names the form (not only: the file
    exists). linear_attention and multihead_free_energy were linked to chapter 1, which never mentions them."""
    from energylab import atlas, catalog

    for name in catalog.FORMS:
        path = ROOT / "notebooks" / f"{atlas.chapter_of(name)}.ipynb"
        text = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
        assert name in text, (name, path.name)
    chapter_two = "02_attention_as_descent"
    assert atlas.chapter_of("linear_attention") == atlas.chapter_of("multihead_free_energy") == chapter_two
