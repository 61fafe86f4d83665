"""Chapter 9, the 9×9 run on one CPU core (issue 27, item 3): every statement of the chapter about
results/sudoku/medium-cpu-9x9.json, through the chapter's own functions (energylab.claims.sudoku)."""
import pytest

from energylab.claims import sudoku as sudoku_claims
from energylab.engine.committed import load_committed
from energylab.experiments import sudoku


@pytest.fixture(scope="module")
def run():
    return load_committed("sudoku", "medium-cpu-9x9")


def test_the_file_is_the_profile_run_once_from_a_clean_commit(run):
    results, provenance = run
    want = sudoku.PROFILES["medium-cpu-9x9"]
    for name in ("size", "train_set", "n_train", "n_test", "dim", "heads", "iterations", "epochs", "batch_size",
                 "lr", "layer"):
        assert results.config[name] == getattr(want, name), name
    assert tuple(results.config["test_sets"]) == ("satnet-like", "rrn-like", "rrn-17")
    assert provenance["dirty"] is False and provenance["machine"]["torch_threads"] == 1
    assert 50 * 60 < provenance["seconds"] < 70 * 60  # "about an hour of one core"
    assert results.extra["steps"] == 8992


def test_every_claim_of_the_chapter_holds(run):
    results, _ = run
    baselines = sudoku_claims.nine_by_nine_baselines(results)
    assert all(b[r]["board"] < 0.01 for b in baselines.values() for r in ("blind", "one elimination"))  # none
    assert all(b["propagation"]["board"] > 0.5 for b in baselines.values())  # propagation solves most of each set
    claims = sudoku_claims.nine_by_nine_claims(results, baselines)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}


def test_the_numbers_the_chapter_prints(run):
    results, _ = run
    f = results.final
    got = [round(100 * f[k], 1) for k in ("satnet-like/board@T16", "satnet-like/board@T32", "rrn-like/board@T16",
                                          "rrn-17/board@T16", "rrn-like/board@T64", "rrn-17/board@T64")]
    assert got == [29.3, 35.7, 3.2, 6.4, 5.4, 10.0]
    assert f["satnet-like/board@T64"] < f["satnet-like/board@T32"]  # 4T gives back part of 2T's gain
    assert round(f["satnet-like/cell@T16"], 2) == 0.86  # test cells
    assert results.histories["seed0"].curves["cell"][-1] > 0.98  # training cells at the end: it fits them


def test_the_augmented_run_and_what_the_chapter_says_of_it(run):
    """results/sudoku/aug-cpu-9x9.json (and its model on the search boards): the profile, run once from a clean
    commit, and every claim chapter 9 makes of it."""
    from energylab.baselines import sudoku_propagation_guess
    from energylab.tasks.sudoku_harness import load_set

    augmented, provenance = load_committed("sudoku", "aug-cpu-9x9")
    search, search_provenance = load_committed("sudoku", "aug-cpu-9x9-search")
    want = sudoku.PROFILES["aug-cpu-9x9"]
    for name in ("size", "train_set", "n_train", "n_test", "dim", "iterations", "epochs", "batch_size", "lr",
                 "weight_decay", "augment", "ema", "layer"):
        assert augmented.config[name] == getattr(want, name), name
    assert provenance["dirty"] is False and provenance["numerics"] == "pinned"
    assert search_provenance["dirty"] is False and search.config["test_sets"] == ["9x9-search"]
    assert augmented.extra["steps"] == 5620
    guess = sudoku_propagation_guess(load_set("9x9-search", "test", 1000, 9))["cell"]
    claims = sudoku_claims.augmentation_claims(augmented, run[0], sudoku_claims.nine_by_nine_baselines(run[0]),
                                               search, guess)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    assert round(augmented.final["satnet-like/board@T16"], 3) == 0.005  # the number the chapter prints
