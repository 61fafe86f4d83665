"""What chapter 12 states about the metastable sets of sparse Hopfield updates
(:func:`energylab.experiments.sparse_retrieval.metastable_sets`), as named booleans: the chapter prints them,
``tests/experiments/test_metastable_sets.py`` asserts them and shows that they can fail."""
from __future__ import annotations

import torch

from energylab.experiments.sparse_retrieval import set_share
from energylab.forms import sparse_hopfield as sh

__all__ = ["metastable_claims"]


def metastable_claims(result: dict) -> dict[str, bool]:
    """Chapter 12's statements about :func:`metastable_sets` (the chapter prints them, its test asserts them)."""
    cfg, rows = result["config"], result["rows"]
    sets = {k: set_share(result, k) for k in ("sparsemax", "entmax15")}
    loads, betas = cfg["loads"], cfg["betas"]
    at = {(r["map"], r["P"], r["beta"]): r for r in rows}
    big, small_beta = max(loads), min(betas)
    single = [j for j in range(len(betas)) if all(float(sets[k][:, j].max()) == 0.0 for k in sets)]
    doubled = [(j, betas.index(2 * b)) for j, b in enumerate(betas) if 2 * b in betas]
    return {
        "at the smallest beta and the largest load every sparsemax query rests on a set of 2 or more patterns":
            float(sets["sparsemax"][loads.index(big), 0]) == 1.0,
        "there, some sets do not contain the pattern the query was drawn near":
            at[("sparsemax", big, small_beta)]["has_target"] < at[("sparsemax", big, small_beta)]["n"],
        "from some beta on, every query of both maps at every load rests on one pattern, its own":
            bool(single) and all(at[(k, P, betas[j])]["has_target"] == at[(k, P, betas[j])]["n"]
                                 for k in sets for P in loads for j in range(single[0], len(betas))),
        "the share in sets of 3/2-entmax at 2 beta equals sparsemax's at beta, in every cell":
            all(torch.equal(sets["entmax15"][:, j2], sets["sparsemax"][:, j]) for j, j2 in doubled),
        "every query that did not settle was at beta/m <= 4":
            all(r["converged"] == r["n"] for r in rows if r["beta"] / sh.margin(r["map"]) > 4),
    }
