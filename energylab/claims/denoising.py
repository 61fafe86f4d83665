"""What chapter 12 states about a run of in-context denoising (:mod:`energylab.experiments.denoising`), as named
booleans, each comparison by more than two standard errors (:func:`below`): the chapter prints them,
``tests/claims/test_denoising_claims.py`` asserts them on the committed runs and shows that they can fail."""
from __future__ import annotations

from energylab.engine.results import Results
from energylab.experiments.denoising import summary

__all__ = ["below", "claims", "context_claims", "IDENTITY_RATIO"]


def below(results: Results, context: int, a: str, b: str) -> bool:
    """Estimator ``a``'s error is below ``b``'s by more than two standard errors of the difference (paired when
    ``b`` is a reference, else from both standard errors)."""
    ra, rb = summary(results, context, a), summary(results, context, b)
    if f"minus {b}" in ra:
        return ra[f"minus {b}"] + 2 * ra[f"minus {b} se"] < 0
    return ra["mse"] + 2 * (ra["se"] ** 2 + rb["se"] ** 2) ** 0.5 < rb["mse"]


IDENTITY_RATIO = {"W_KQ": 0.15, "W_PV": 0.1}  # a trained map counts as a scaled identity below these off/diag ratios


def claims(results: Results, context: int) -> dict[str, bool]:
    """Chapter 12's statements about one context length L of a run (each with the margins of :func:`below`)."""
    kinds = results.config["kinds"]
    steps = [f"one step ({m})" for m in ("sparsemax", "1.5-entmax")]
    bayes = summary(results, context, "bayes")["mse"]
    step = summary(results, context, "one step (softmax)")
    weights = [w for w in results.tables["weights"] if w["context"] == context]
    return {
        "one softmax step at β = 1/σ² (no learning) is within 10% of the Bayes-optimal error":
            step["minus bayes"] + 2 * step["minus bayes se"] < 0.1 * bayes,
        "it beats exact retrieval of the nearest context token":
            below(results, context, "one step (softmax)", "nearest token"),
        "it beats one step of the sparse maps at the same β": all(below(results, context, "one step (softmax)", s)
                                                                  for s in steps),
        "every trained layer beats the nearest token, the noisy query and the prior mean (zero)":
            all(below(results, context, f"trained ({k})", b) for k in kinds
                for b in ("nearest token", "noisy query", "zero")),
        "no trained layer beats the two-parameter fit of a scaled-identity step":
            not any(below(results, context, f"trained ({k})", "fitted one step (softmax)") for k in kinds),
        "every trained layer is close to scaled identities (off-diagonal RMS under 15% of the diagonal for W_KQ, "
        "10% for W_PV)":
            all(w[f"{m} off-diagonal rms"] < IDENTITY_RATIO[m] * abs(w[f"{m} diagonal"]) for w in weights
                for m in IDENTITY_RATIO),
    }


def context_claims(results: Results) -> dict[str, bool]:
    """Chapter 12's statements about a run over several context lengths (the medium profile): how the distance to
    the Bayes-optimal error changes from the shortest to the longest context (two standard errors apart)."""
    contexts, kinds = sorted(results.config["contexts"]), results.config["kinds"]
    short, long = contexts[0], contexts[-1]

    def shrinks(estimator: str) -> bool:
        a, b = summary(results, long, estimator), summary(results, short, estimator)
        return a["minus bayes"] + 2 * (a["minus bayes se"] ** 2 + b["minus bayes se"] ** 2) ** 0.5 < b["minus bayes"]

    return {
        f"one softmax step's excess over the Bayes-optimal error shrinks from L = {short} to L = {long}":
            shrinks("one step (softmax)"),
        f"so does every trained layer's, from L = {short} to L = {long}": all(shrinks(f"trained ({k})") for k in kinds),
        "at every L, one softmax step beats exact retrieval of the nearest token":
            all(below(results, L, "one step (softmax)", "nearest token") for L in contexts),
        "at no L does a trained layer beat the two-parameter fit":
            not any(below(results, L, f"trained ({k})", "fitted one step (softmax)") for L in contexts for k in kinds),
    }
