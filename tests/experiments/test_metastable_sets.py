"""Chapter 12's metastable sets (energylab.experiments.sparse_retrieval.metastable_sets): the fixed points it
reports are fixed points, the support sizes are counted right, and the chapter's claims hold on its grid and can
fail."""
import copy

import torch

from energylab.claims.sparse_retrieval import metastable_claims
from energylab.experiments import sparse_retrieval as sr
from energylab.forms import sparse_hopfield as sh


def test_a_two_pattern_set_is_a_fixed_point_the_function_reports():
    # two patterns at 60 degrees and a query between them: at beta = 1 sparsemax gives both weight 1/2 at the
    # midpoint (their scores are equal there), a set of two; at beta = 64 the query's side wins outright
    X = torch.tensor([[1.0, 0.0], [0.5, 3**0.5 / 2]], dtype=torch.float64)
    mid = X.mean(0, keepdim=True)
    w = sh.regulariser("sparsemax").prediction(1.0 * mid @ X.T)
    assert torch.equal(w, torch.tensor([[0.5, 0.5]], dtype=torch.float64))
    assert torch.allclose(w @ X, mid, atol=0, rtol=1e-15)  # a fixed point resting on both patterns


def test_support_sizes_and_claims_on_a_smaller_grid():
    # the chapter's grid (and its printed claims) is checked by nbval on every run; here a quarter of its queries
    result = sr.metastable_sets(sr.RetrievalConfig(loads=(4, 16, 256), queries=128))
    for row in result["rows"]:
        assert sum(row["sizes"]) == row["n"] and 0 <= row["converged"] <= row["n"]
    claims = metastable_claims(result)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    assert float(sr.set_share(result, "sparsemax")[-1, 0]) == 1.0  # P = 256, beta = 1: every query in a set
    # had sparsemax rested on single patterns at beta = 1, or entmax's table not been sparsemax's shifted, the
    # claims would say so
    broken = copy.deepcopy(result)
    for row in broken["rows"]:
        if row["map"] == "sparsemax" and row["beta"] == 1.0:
            row["sizes"] = [row["n"]] + [0] * (len(row["sizes"]) - 1)
    failed = [k for k, v in metastable_claims(broken).items() if not v]
    assert any("every sparsemax query rests on a set" in k for k in failed)
    assert any("3/2-entmax at 2 beta" in k for k in failed)
