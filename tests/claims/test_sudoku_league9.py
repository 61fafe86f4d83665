"""The four looped layers at 9×9 on one CPU core with augmentation (results/sudoku/aug-league-9x9.json and
aug-league-9x9-search.json, 2026-11-28): every statement chapter 8 makes of them, through the chapter's own function
(energylab.claims.sudoku.cpu_league_claims), and that those statements can fail."""
import copy

import pytest

from energylab.claims import sudoku as sudoku_claims
from energylab.engine.committed import load_committed
from energylab.experiments import sudoku


@pytest.fixture(scope="module")
def files():
    league, prov = load_committed("sudoku", "aug-league-9x9")
    search, sprov = load_committed("sudoku", "aug-league-9x9-search")
    return league, prov, search, sprov, sudoku_claims.run_rungs(league.config)


def test_the_files_are_the_league_and_its_scores(files):
    league, prov, search, sprov, _ = files
    assert league.config["layers"] == search.config["layers"] == ["transformer", "itrsa", "akorn", "hyperset"]
    assert league.config["size"] == 9 and league.config["augment"] and league.config["seeds"] == [0]
    assert search.config["test_sets"] == ["9x9-search"] and search.config["n_test"] == 1000
    assert prov["numerics"] == sprov["numerics"] == "pinned"
    assert not prov["dirty"] and not sprov["dirty"]
    # the league's Transformer is chapter 9's augmented run (the same checkpoint, the same scores)
    alone, _ = load_committed("sudoku", "aug-cpu-9x9")
    assert all(league.final[f"transformer/{k}"] == v for k, v in alone.final.items() if "@T" in k)


def test_chapter_8s_claims_hold(files):
    league, _, search, _, base = files
    claims = sudoku_claims.cpu_league_claims(league, search, base)
    assert all(claims.values()), {k: v for k, v in claims.items() if not v}


def test_the_claims_can_fail(files):
    league, _, search, _, base = files

    def failed(lg=league, sr=search):
        return [k for k, v in sudoku_claims.cpu_league_claims(lg, sr, base).items() if not v]

    ahead = copy.deepcopy(league)  # Hyper-SET ahead of the Transformer in cells, as paper 004 reports
    ahead.final["hyperset/rrn-17/cell@T16"] = 0.6
    assert failed(lg=ahead) == ["paper 004's order is reversed in cells: Hyper-SET below the Transformer at T on "
                                "every set"]
    found = copy.deepcopy(search)  # one board that needs search solved
    found.final["akorn/9x9-search/board@T64"] = 0.001
    assert failed(sr=found) == ["no layer solves a board that needs search, at any test T"]
    steady = copy.deepcopy(league)  # AKOrN right at an odd iteration: no period-2 orbit
    steady.extra["layers"]["akorn"]["test_time"]["rrn-17"]["cell"][16] = 0.4  # iteration 17
    assert failed(lg=steady) == ["AKOrN's period-2 orbit: at most 2% of cells right at every odd test iteration, "
                                 "at least 20% at every even one, on every set"]
    learns = copy.deepcopy(league)  # ItrSA 3 points above the blind vote
    learns.final["itrsa/satnet-like/cell@T16"] = base["satnet-like"]["blind"]["cell"] + 0.03
    assert failed(lg=learns) == ["ItrSA does not learn: its cells at T stay within 2 points of the input-blind vote "
                                 "on every set"]


def test_the_work_per_board_the_table_shows(files):
    league, *_ = files
    cfg, T = league.config, league.config["iterations"]
    work = {layer: sudoku.board_work(cfg, layer, T) for layer in cfg["layers"]}
    assert work["itrsa"] == work["akorn"] < work["transformer"] / 2 < work["hyperset"]
