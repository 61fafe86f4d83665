"""The 9×9 runs at d = 256 on one GPU (results/sudoku/gpu-9x9-aug.json and gpu-9x9-aug-lr.json, 2026-11-28):
every statement chapters 8 and 9 make of them, through the chapters' own functions
(energylab.claims.sudoku), and that those statements can fail."""
import copy

import pytest

from energylab.baselines import sudoku_propagation_guess
from energylab.claims import sudoku as sudoku_claims
from energylab.engine.committed import load_committed
from energylab.experiments import sudoku
from energylab.tasks import sudoku_harness as harness


@pytest.fixture(scope="module")
def files():
    runs, prov = load_committed("sudoku", "gpu-9x9-aug")
    lr_runs, lr_prov = load_committed("sudoku", "gpu-9x9-aug-lr")
    return runs, prov, lr_runs, lr_prov


@pytest.fixture(scope="module")
def baselines():
    return sudoku_claims.nine_by_nine_baselines(load_committed("sudoku", "medium-cpu-9x9")[0])


def test_the_files_are_the_medium_profile_with_augmentation_on_a_gpu(files):
    runs, prov, lr_runs, lr_prov = files
    want = sudoku.PROFILES["medium"]
    for res, p in ((runs, prov), (lr_runs, lr_prov)):
        for name in ("size", "train_set", "n_train", "n_test", "dim", "heads", "iterations", "batch_size", "amp"):
            assert res.config[name] == getattr(want, name), name
        assert res.config["augment"] is True and res.config["weight_decay"] == 0.1 and res.config["ema"] == 0.999
        assert res.config["test_sets"][-1] == "9x9-search"
        assert "H100" in p["machine"]["gpu"] and p["dirty"] is False
    # the same boards as the CPU run whose baselines the chapters print beside these
    cpu = load_committed("sudoku", "medium-cpu-9x9")[0].config
    assert all(runs.config[k] == cpu[k] for k in ("train_set", "n_train", "n_test", "data_seed", "size"))
    assert runs.config["runs"] == ["transformer:3e-3", "hyperset:1e-3"] and runs.config["steps"] == 3188
    assert len(lr_runs.config["runs"]) == 4 and lr_runs.config["steps"] == 2648


def test_chapter_9s_claims_hold_and_can_fail(files, baselines):
    runs = files[0]
    guess = sudoku_propagation_guess(harness.load_set("9x9-search", "test", 1000, 9))["cell"]
    claims = sudoku_claims.gpu_search_claims(runs, baselines, guess)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    assert round(runs.final["transformer-3e-3/9x9-search/board@T64"], 3) == 0.059  # the number chapter 9 prints
    # a model that solved no board needing search, or one that lagged propagation in distribution, would fail them
    worse = copy.deepcopy(runs)
    for t in (8, 16, 32, 64):
        worse.final[f"transformer-3e-3/9x9-search/board@T{t}"] = 0.004
    worse.final["transformer-3e-3/satnet-like/board@T64"] = 0.9
    failed = [k for k, v in sudoku_claims.gpu_search_claims(worse, baselines, guess).items() if not v]
    assert len(failed) == 2 and any("level with propagation" in k for k in failed)


def test_chapter_8s_claims_hold_and_can_fail(files):
    runs, _, lr_runs, _ = files
    claims = sudoku_claims.gpu_league_claims(lr_runs, runs)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    assert sudoku_claims.plateau_step(runs.histories["hyperset-1e-3/seed0"]) == 900
    closer = copy.deepcopy(runs)
    closer.final["hyperset-1e-3/satnet-like/board@T16"] = 0.5
    closer.final["hyperset-1e-3/satnet-like/board@T32"] = 0.6
    failed = [k for k, v in sudoku_claims.gpu_league_claims(lr_runs, closer).items() if not v]
    assert len(failed) == 2


def test_chapter_9s_voting_claims_on_the_boards_that_need_search_hold_and_can_fail():
    """results/sudoku/voting-9x9-search.json and depth-9x9-search.json: the committed weights' votes and one long
    run on the same 500 boards; the weights are the ones the GPU run left (their evaluation here matches)."""
    voting, vprov = load_committed("sudoku", "voting-9x9-search")
    depth, dprov = load_committed("sudoku", "depth-9x9-search")
    assert voting.config["boards"] == depth.config["boards"] == 500
    assert vprov["dirty"] is False and dprov["dirty"] is False
    claims = sudoku_claims.search_voting_claims(voting, depth)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    # had the votes found what the long run finds, the first claim would fail
    better = copy.deepcopy(voting)
    for row in better.tables["voting"]:
        if row["method"] == "confidence":
            row["board"] = 0.2
    assert not sudoku_claims.search_voting_claims(better, depth)[
        "one run of the same work solves more boards than any vote, by more than three standard errors"]


def test_chapter_9s_claims_on_votes_at_larger_noise_hold_and_can_fail():
    """results/sudoku/voting-9x9-search-noise.json: 4 runs of 4T at σ = 0.3 and 1.0 on 250 boards that need search."""
    noise, prov = load_committed("sudoku", "voting-9x9-search-noise")
    assert noise.config["sigmas"] == [0.3, 1.0] and noise.config["boards"] == 250 and prov["dirty"] is False
    claims = sudoku_claims.noise_voting_claims(noise)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}
    # had larger noise made the runs search (the oracle 5 points above one run), the second claim would fail
    searching = copy.deepcopy(noise)
    for row in searching.tables["voting"]:
        if row["method"] == "any" and row["sigma"] == 1.0:
            row["board"] += 0.05
    failed = [k for k, v in sudoku_claims.noise_voting_claims(searching).items() if not v]
    assert "even at the largest noise the oracle (any of the 4 runs right) adds at most 2 points to one run of 4T" \
        in failed
    losing = copy.deepcopy(noise)  # a vote below the one run it starts from would fail the third
    for row in losing.tables["voting"]:
        if row["method"] == "confidence" and row["sigma"] == 0.3:
            row["board"] -= 0.01
    assert [k for k, v in sudoku_claims.noise_voting_claims(losing).items() if not v] == [
        "the votes do not lose boards either: confidence and the oracle never below one run of 4T"]


def test_the_committed_weights_are_the_gpu_runs_model():
    """The Transformer's weights beside the GPU run reproduce its evaluation on the CPU: the same SATNet-like
    boards solved at T on the first 100 test boards as the GPU measured on all 1,000, within sampling error."""
    from energylab.experiments import sudoku_voting
    from energylab.tasks.sudoku import SudokuDataset

    runs, _ = load_committed("sudoku", "gpu-9x9-aug")
    data = harness.load_set("satnet-like", "test", 1000, 9)
    model = sudoku_voting.gpu_transformer()
    got = harness.test_time(model, SudokuDataset(data.puzzles[:100], data.solutions[:100]), (16,))[16]["board"]
    want = runs.final["transformer-3e-3/satnet-like/board@T16"]
    assert abs(got - want) < 3 * sudoku_claims.board_se(want, 100)
    assert sum(p.numel() for p in model.parameters()) == runs.extra["layers"]["transformer-3e-3"]["parameters"]
