"""What chapter 9 states about the 9×9 run on one CPU core (``results/sudoku/medium-cpu-9x9.json``, profile
``medium-cpu-9x9`` of :mod:`energylab.experiments.sudoku`): the chapter and its test call these functions."""
from __future__ import annotations

from energylab.baselines import sudoku_baseline
from energylab.results import Results
from energylab.verdicts import compare, scaling

__all__ = ["PAPER_TRANSFORMER", "nine_by_nine_baselines", "nine_by_nine_claims"]

# AKOrN's paper (Miyato et al. 2025, Table 1 as chapter 9 quotes it): the looped Transformer at d = 512, trained on
# SATNet's boards, board accuracy in % on SATNet's test boards (ID) and on RRN's (OOD)
PAPER_TRANSFORMER = {"id": 98.6, "ood": 5.2}


def nine_by_nine_baselines(results: Results) -> dict[str, dict[str, float]]:
    """The input-blind baseline (one elimination and a per-cell vote, :func:`sudoku_baseline`) on each test set of
    the run, with the run's own training boards as the reference."""
    from energylab.experiments.sudoku import load_set  # the harness (it imports this package's modules)

    cfg = results.config
    train = load_set(cfg["train_set"], "train", cfg["n_train"], cfg["size"], cfg["data_seed"])
    return {name: sudoku_baseline(load_set(name, "test", cfg["n_test"], cfg["size"], cfg["data_seed"]), train)
            for name in cfg["test_sets"]}


def nine_by_nine_claims(results: Results, baselines: dict[str, dict[str, float]], margin: float = 0.1) -> dict:
    """The chapter's statements about the run, as named booleans. ``margin``: how far above the input-blind
    baseline a board accuracy must be to count as solving boards (10 points; one seed, 1,000 boards a set, so one
    accuracy has a standard error of at most 1.6 points)."""
    cfg, f = results.config, results.final
    T, (id_set, *ood_sets) = cfg["iterations"], cfg["test_sets"]

    def board(name, t):
        return f[f"{name}/board@T{t}"]

    return {
        "it learns: SATNet-like boards solved at T, well above the input-blind baseline":
            board(id_set, T) > baselines[id_set]["board"] + margin,
        "in distribution, running 2T iterations solves more boards than T": board(id_set, 2 * T) > board(id_set, T),
        "out of distribution (RRN-like, RRN-17) it solves fewer boards than in distribution, at every test T":
            all(board(o, t) < board(id_set, t) for o in ood_sets for t in cfg["test_iterations"]),
        "out of distribution, running 4T iterations solves more boards than T, on both sets":
            all(board(o, 4 * T) > board(o, T) for o in ood_sets),
        "far below the paper's Transformer in distribution (98.6%)":
            100 * board(id_set, T) < PAPER_TRANSFORMER["id"] - 20,
    }


def seed_values(results: Results, layer: str, test_set: str, iterations: int, key: str = "board",
                table: str = "test_time") -> list[float]:
    """One value per seed of ``layer`` on ``test_set`` at T = ``iterations`` from a league's ``table`` rows
    (``"test_time_clamped"``: Hyper-SET with the step sizes of t > T frozen at T's)."""
    return [r[key] for r in results.tables[table]
            if r["layer"] == layer and r["set"] == test_set and r["iterations"] == iterations]


def league_verdicts(results: Results) -> dict[str, str]:
    """The league's answers to the papers' Sudoku claims, each from the per-seed numbers (:func:`compare`,
    :func:`scaling`): Hyper-SET against the Transformer at T and 2T (paper 004), AKOrN against ItrSA (paper 003 /
    AKOrN), and test-time scaling of each layer from T to 2T and to 4T, on every test set."""
    cfg = results.config
    T, sets = cfg["iterations"], cfg["test_sets"]
    out = {}
    pairs = [(a, b) for a, b in (("hyperset", "transformer"), ("akorn", "itrsa")) if {a, b} <= set(cfg["layers"])]
    for s in sets:
        for k, t in (("T", T), ("2T", 2 * T)):
            for a, b in pairs:
                out[f"{a} vs {b}, {s} @{k}"] = compare(seed_values(results, a, s, t), seed_values(results, b, s, t))
        for layer in cfg["layers"]:
            for k, t in (("2T", 2 * T), ("4T", 4 * T)):
                out[f"{layer}, {s}, T -> {k}"] = scaling(seed_values(results, layer, s, T),
                                                         seed_values(results, layer, s, t))
    return out
