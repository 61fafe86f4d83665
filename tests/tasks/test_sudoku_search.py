"""Boards that need search (energylab.tasks.sudoku_search): unique, propagation-proof, graded, seeded, named sets."""
import dataclasses

import numpy as np
import pytest

from energylab import baselines as bl
from energylab.tasks import sudoku as S
from energylab.tasks.sudoku_search import generate_search, needs_search, search_difficulty
from energylab.tasks.sudoku_solver import geometry
from tests.probes import brute_count

UNIQUE_4X4_ONE_GRID = 41401  # unique puzzles among the 2^16 subsets of the grid below (measured)


@pytest.mark.parametrize("size,n", [(9, 40), (6, 24)])
def test_boards_need_search_are_unique_graded_and_seeded(size, n):
    p, s, d = generate_search(n, size, seed=3)
    assert p.shape == s.shape == (n, size, size) and d.shape == (n,)
    assert len({b.tobytes() for b in p}) == n  # distinct boards
    filled = bl.propagate_boards(p)
    assert ((filled == 0).reshape(n, -1).sum(1) > 0).all()  # propagation leaves blanks on every board
    assert all(needs_search(b) for b in p)
    for b, sol in zip(p, s):
        assert S.count_solutions(b) == 1 and np.array_equal(S.solve(b), sol)
    if size == 6:  # an independent count: backtracking without propagation
        assert all(brute_count(b.ravel().tolist(), 6) == 1 for b in p)
    assert d.min() >= 1 and np.array_equal(search_difficulty(p), d)
    again = generate_search(n, size, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(again, (p, s, d)))
    other = generate_search(n, size, seed=4)[0]
    assert not np.array_equal(other, p)
    g = (p > 0).reshape(n, -1).sum(1)
    assert g.min() >= (19 if size == 9 else 8) and g.max() <= (34 if size == 9 else 12)


def test_difficulty_counts_guesses_and_the_counter_changes_no_result():
    geo = geometry(9)
    p, s, d = generate_search(12, 9, seed=0)
    for b in p:
        flat = b.ravel().tolist()
        counted = [0]
        assert geo.solutions(flat, 2, guesses=counted) == geo.solutions(flat, 2)  # same search, same answers
        first = [0]
        geo.solutions(flat, 1, guesses=first)
        assert 1 <= first[0] <= counted[0]  # the first solution needs no more guesses than proving uniqueness
    assert search_difficulty(s[0]) == 0  # a complete grid: nothing to guess
    hard = np.array([int(ch) for ch in "800000000003600000070090200050007000000045700000100030001000068008500010"
                     "090000400"]).reshape(9, 9)  # Arto Inkala's "world's hardest", which singles cannot start
    assert needs_search(hard) and search_difficulty(hard) >= 10


def test_no_unique_4x4_puzzle_needs_search():
    """The module docstring's exhaustive count, on one of the 12 grids with first row 1 2 3 4: every subset of its
    cells that has a unique solution is finished by propagation (naked and hidden singles)."""
    geo = geometry(4)
    grid = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]
    unique = stuck = 0
    for mask in range(1 << 16):
        flat = [v if mask >> i & 1 else 0 for i, v in enumerate(grid)]
        if len(geo.solutions(flat, 2)) == 1:
            unique += 1
            stuck += needs_search(np.array(flat).reshape(4, 4))
    assert stuck == 0 and unique == UNIQUE_4X4_ONE_GRID
    with pytest.raises(ValueError, match="no unique 4x4 puzzle"):
        generate_search(3, 4)
    with pytest.raises(ValueError, match="search=True sets exist for 6x6 and 9x9"):
        S.SudokuSetConfig((4, 5), size=4, search=True)


def test_named_search_sets_defeat_propagation(tmp_path):
    assert S.NAMED_SETS["9x9-search"].search and S.NAMED_SETS["6x6-search"].size == 6
    for name in ("9x9-search", "6x6-search"):
        config = dataclasses.replace(S.NAMED_SETS[name], n_test=30)
        ds = S.sudoku_dataset(config, "test", cache_dir=tmp_path)
        assert len(ds) == 30
        scores = bl.sudoku_propagation(ds)
        assert scores["board"] == 0.0 and scores["decided"] == 0.0 and scores["cell"] < 1.0
        again = S.sudoku_dataset(config, "test", cache_dir=tmp_path)  # from the cache file
        assert np.array_equal(again.puzzles, ds.puzzles)
    files = sorted(f.name for f in tmp_path.iterdir())
    assert len(files) == 2 and all("-search-test-30-" in f for f in files)
    # the other sets keep their cache keys (a field added later is left out of the key at its default)
    assert S._cache_key(S.NAMED_SETS["rrn-17"], "test") == S._cache_key(
        S.SudokuSetConfig(givens=(17, 34), hard=True), "test")
