"""What chapter 3 states about its two Hopfield measurements, as named booleans: the storage capacity of random
patterns beside Theorem 3 (:mod:`energylab.experiments.hopfield_capacity`) and the regimes of the attention heads of
a trained looped Transformer (:mod:`energylab.experiments.hopfield_heads`). The chapter prints them, and
``tests/claims/test_hopfield_regimes.py`` asserts them on the same numbers."""
from __future__ import annotations

from energylab.experiments import hopfield_capacity as hc

__all__ = ["capacity_claims", "head_claims"]


def capacity_claims(result: dict, p: float = 0.01) -> dict[str, bool]:
    """What chapter 3 states about a capacity run, as named booleans (chapter and tests call this on one run)."""
    cfg, rows = result["config"], result["rows"]
    caps = [r["capacity"] for r in rows]
    big = [r for r in rows if r["capacity"] >= 8]
    thm = [hc.theorem3(r["d"], cfg["beta"], cfg["K"], p) for r in rows]
    return {
        "the capacity grows with d at every step": all(b > a for a, b in zip(caps, caps[1:])),
        "each step of two dimensions multiplies P* by at least 2 once P* >= 8 (linear growth: at most 1.5)":
            all(b["capacity"] >= 2 * a["capacity"] for a, b in zip(big, big[1:])),
        "the fitted growth per dimension is between 1.5 and 3": 1.5 <= hc.growth_per_dimension(result) <= 3.0,
        "at every d with P* >= 8, P* is more than 10 x the classical network's 0.138 d":
            all(r["capacity"] > 10 * 0.138 * r["d"] for r in big),
        "the measured growth per dimension is above Theorem 3's guaranteed c^(1/4) at every measured d":
            hc.growth_per_dimension(result) > max(t["c"] ** 0.25 for t in thm),
        f"Theorem 3's condition fails at every measured d (K = {cfg['K']:g}, beta = {cfg['beta']:g}, "
        f"failure probability {p:g})":
            not any(t["holds"] for t in thm),
    }


def head_claims(trained: list[dict], untrained: list[dict], board_accuracy: float) -> dict[str, bool]:
    """What chapter 3 states about the head tables (:func:`~energylab.experiments.hopfield_heads.head_table`) of the
    trained and the untrained model, as named booleans: the chapter and the tests call this on the same tables."""
    T = max(row["t"] for row in trained)
    first = {row["head"]: row for row in trained if row["t"] == 1}
    last = {row["head"]: row for row in trained if row["t"] == T}
    return {
        "the trained model solves at least 80% of the test boards": board_accuracy >= 0.8,
        "as initialised, every head averages globally (median r > N/2) at every iteration":
            all(row["regime"] == "global" for row in untrained),
        "as initialised, every head puts 45-55% of its weight on the cell's peers, as uniform weights do":
            all(0.45 < row["peer_weight"] < 0.55 for row in untrained),
        "trained, no head retrieves a single token (median r <= 2) at any iteration":
            not any(row["regime"] == "single" for row in trained),
        "trained, at t = 1 every head is metastable (2 < median r <= N/2)":
            all(row["regime"] == "metastable" for row in first.values()),
        "trained, at t = 1 the heads put more than 75% of their weight on the cell's peers (mean over heads)":
            sum(row["peer_weight"] for row in first.values()) / len(first) > 0.75,
        "trained, every head puts more weight on the peers than uniform weights (50%) at every iteration":
            all(row["peer_weight"] > 0.5 for row in trained),
        "trained, every head averages more tokens at t = T than at t = 1":
            all(last[h]["participation"] > first[h]["participation"] for h in first),
        "trained, every head puts less weight on the peers at t = T than at t = 1":
            all(last[h]["peer_weight"] < first[h]["peer_weight"] for h in first),
        "trained, every head's 90%-mass count k exceeds its participation ratio r (a tail that r discounts)":
            all(row["k90"] > row["participation"] for row in trained),
        "at t = T the paper's k puts at least half of the heads in class I; r calls at most one of them global":
            2 * sum(row["class"] == "I" for row in last.values()) >= len(last)
            and sum(row["regime"] == "global" for row in last.values()) <= 1,
    }
