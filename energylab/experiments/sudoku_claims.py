"""What chapter 9 states about the 9×9 run on one CPU core (``results/sudoku/medium-cpu-9x9.json``, profile
``medium-cpu-9x9`` of :mod:`energylab.experiments.sudoku`): the chapter and its test call these functions."""
from __future__ import annotations

from energylab.baselines import sudoku_baseline
from energylab.results import Results

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
