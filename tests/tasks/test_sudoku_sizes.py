"""Sudoku boards of every box shape (4×4, 6×6, 9×9): generator, solver, datasets, accuracy, loaders, figures."""
import numpy as np
import pytest
import torch

from energylab.tasks import sudoku as S
from energylab.tasks.sudoku_generate import ID_GIVENS, OOD_GIVENS
from energylab.tasks.sudoku_hard import catalogue, catalogue_counts, generate_hard, transform
from energylab.viz.sudoku import board_figure, givens_figure
from tests.probes import brute_count
from tests.probes import sudoku_groups as groups


def is_grid(g: np.ndarray) -> bool:
    flat = g.ravel().tolist()
    return all(sorted(flat[i] for i in u) == list(range(1, len(g) + 1)) for u in groups(len(g)))


@pytest.mark.parametrize("size, givens, n", [(4, ID_GIVENS[4], 30), (4, OOD_GIVENS[4], 30), (6, ID_GIVENS[6], 12),
                                             (6, OOD_GIVENS[6], 8), (9, (36, 42), 4)])
def test_generated_puzzles_are_unique_by_an_independent_counter(size, givens, n):
    puzzles, solutions = S.generate(n, givens, seed=1, size=size)
    assert puzzles.shape == solutions.shape == (n, size, size)
    assert puzzles.dtype == solutions.dtype == np.int64
    lo, hi = givens
    counts = (puzzles > 0).reshape(n, -1).sum(1)
    assert counts.min() >= lo and counts.max() <= hi
    assert np.bincount(counts, minlength=hi + 1)[lo:].min() >= n // (hi - lo + 1)  # every count, equal quotas
    for p, s in zip(puzzles, solutions):
        assert is_grid(s) and np.array_equal(p[p > 0], s[p > 0])
        if size < 9:  # plain backtracking is too slow for sparse 9×9 boards; test_sudoku.py checks those
            assert brute_count(p.ravel().tolist(), size) == 1
        assert S.count_solutions(p) == 1 and np.array_equal(S.solve(p), s)


def test_minimal_small_puzzles_are_minimal():
    puzzles, _ = S.generate(20, OOD_GIVENS[4], seed=2, size=4)
    for p in puzzles[(puzzles > 0).reshape(20, -1).sum(1) == 4]:  # 4 givens: the fewest possible at 4×4
        flat = p.ravel().tolist()
        for c in (i for i, v in enumerate(flat) if v):
            assert brute_count(flat[:c] + [0] + flat[c + 1:], 4) >= 2


def test_seeds_reproducible_and_sizes_validated():
    for size in (4, 6):
        a, b, c = (S.generate(10, seed=s, size=size) for s in (5, 5, 6))
        assert all(np.array_equal(x, y) for x, y in zip(a, b)) and not np.array_equal(a[0], c[0])
        lo, hi = ID_GIVENS[size]
        assert set((a[0] > 0).reshape(10, -1).sum(1).tolist()) <= set(range(lo, hi + 1))  # default = ID range
    for kwargs, match in (({"size": 5}, "size"), ({"size": 4, "givens": (3, 5)}, "givens"),
                          ({"size": 6, "givens": (7, 9)}, "givens"), ({"size": 4, "givens": (6, 16)}, "givens")):
        with pytest.raises(ValueError, match=match):
            S.generate(2, **kwargs)


def test_solver_on_small_boards():
    assert S.count_solutions(np.zeros((4, 4), dtype=int), limit=1000) == 288  # all 4×4 grids
    sol = S.solve(np.zeros((6, 6), dtype=int))
    assert sol.shape == (6, 6) and is_grid(sol)
    bad = np.zeros((6, 6), dtype=int)
    bad[0, 0] = bad[1, 2] = 3  # same 2×3 box
    with pytest.raises(ValueError, match="repeats in box"):
        S.solve(bad)
    bad = np.zeros((6, 6), dtype=int)
    bad[0, 0] = bad[2, 1] = 3  # different boxes (2 rows per box), no shared row or column: fine
    assert S.count_solutions(bad) == 2
    with pytest.raises(ValueError, match="0..4"):
        S.solve(np.full((4, 4), 5))
    with pytest.raises(ValueError, match="shape"):
        S.count_solutions(np.zeros((4, 4), dtype=int), size=6)


@pytest.mark.parametrize("name", ["4x4-id", "4x4-ood", "6x6-id", "6x6-ood"])
def test_named_small_sets_cached(name, tmp_path):
    config = S.NAMED_SETS[name]
    small = S.SudokuSetConfig(config.givens, n_train=20, n_test=10, size=config.size)
    ds = S.sudoku_dataset(small, "test", cache_dir=tmp_path)
    n = config.size
    assert ds.size == n and ds.tokens.shape == ds.target.shape == ds.mask.shape == (10, n * n)
    assert ds.target.min() >= 0 and ds.target.max() == n - 1 and torch.equal(ds.mask, ds.tokens == 0)
    again = S.sudoku_dataset(small, "test", cache_dir=tmp_path)  # from the file
    assert torch.equal(again.tokens, ds.tokens) and len(list(tmp_path.iterdir())) == 1
    assert S.SPLITS[n][0 if name.endswith("id") else 1] == name


def test_cache_key_of_nine_by_nine_sets_unchanged():
    """The fields added for other sizes leave the keys (file names) of existing 9×9 caches as they were."""
    key = S._cache_key(S.NAMED_SETS["satnet-like"], "train")
    assert key == "a26e950761afb0d74ce1d806e6f910ddc87bf36c3d2f3f4884a3eb4342facc18"  # computed before the change
    assert S._cache_key(S.SudokuSetConfig((31, 42)), "train") == key
    # the size is part of the key (givens valid for both sizes: 6x6 boards hold at most 35)
    assert S._cache_key(S.SudokuSetConfig((20, 30), size=6), "train") != S._cache_key(S.SudokuSetConfig((20, 30)),
                                                                                        "train")


def test_accuracy_is_exact():
    n = 16_777_217  # 2**24 + 1: float32 cannot count this, float64 can
    target = torch.zeros(1, n, dtype=torch.long)
    pred = target.clone()
    pred[0, 0] = 1  # one wrong cell
    acc = S.sudoku_accuracy(pred, target)
    assert acc["cell"] == (n - 1) / n and acc["cell"] != 1.0 and acc["board"] == 0.0
    t4 = torch.tensor([[0, 1, 2, 3] * 4] * 3)
    p4 = t4.clone()
    p4[2, 5] = 0
    assert S.sudoku_accuracy(p4, t4) == {"cell": 47 / 48, "board": 2 / 3}
    assert S.sudoku_accuracy(torch.nn.functional.one_hot(p4, 4).float(), t4) == {"cell": 47 / 48, "board": 2 / 3}


def test_load_rrn_seeded_subset(tmp_path):
    puzzles, solutions = S.generate(12, (36, 42), seed=4)
    rows = ["".join(map(str, p.ravel())) + "," + "".join(map(str, s.ravel())) for p, s in zip(puzzles, solutions)]
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n")
    first = S.load_rrn(tmp_path, limit=5)
    assert np.array_equal(first.puzzles, puzzles[:5])
    a, b = S.load_rrn(tmp_path, limit=5, seed=0), S.load_rrn(tmp_path, limit=5, seed=0)
    c = S.load_rrn(tmp_path, limit=5, seed=1)
    assert np.array_equal(a.puzzles, b.puzzles) and not np.array_equal(a.puzzles, c.puzzles)
    index = [next(i for i in range(12) if np.array_equal(puzzles[i], p)) for p in a.puzzles]
    assert index == sorted(index) and len(set(index)) == 5 and index != list(range(5))
    assert len(S.load_rrn(tmp_path, limit=50, seed=0)) == 12
    with pytest.raises(ValueError, match="seed"):
        S.load_rrn(tmp_path, limit=5, seed=-1)


def test_figures_of_small_boards():
    puzzles, solutions = S.generate(2, seed=0, size=6)
    pred = solutions[0].copy()
    blank = np.argwhere(puzzles[0] == 0)[0]
    pred[tuple(blank)] = pred[tuple(blank)] % 6 + 1  # one mistake
    fig = board_figure(puzzles[0], pred, solutions[0])
    assert len(fig.data[1].text) == (puzzles[0] > 0).sum() and len(fig.data[3].text) == 1
    thick = [s for s in fig.layout.shapes if s.line.width > 1]
    assert len(thick) == 3 + 4  # vertical lines at 0, 3, 6 (boxes 3 wide), horizontal at 0, 2, 4, 6
    with pytest.raises(ValueError, match="prediction"):
        board_figure(puzzles[0], np.zeros((4, 4)))
    fig = givens_figure({"4x4": S.generate(4, seed=0, size=4)[0]})
    assert set(fig.data[0].x) <= {6, 7, 8}


def test_hard_catalogue_and_symmetries(tmp_path):
    counts = catalogue_counts()
    assert min(counts) == 17 and counts[17] >= 2 and max(counts) <= 21 and set(counts) == set(range(17, 22))
    hard17 = "000000010400000000020000000000050407008000300001090000300400200050100000000806000"  # Royle's, as in
    assert any("".join(map(str, p.ravel())) == hard17 for p in catalogue()[0])  # test_sudoku.py
    puzzles, solutions = catalogue()
    rng = np.random.default_rng(0)
    for p, s in zip(puzzles[:3], solutions[:3]):
        q, t = transform(p, s, rng)
        assert (q > 0).sum() == (p > 0).sum() and S.count_solutions(q) == 1 and np.array_equal(S.solve(q), t)
        assert sorted(np.bincount(q[q > 0], minlength=10)) == sorted(np.bincount(p[p > 0], minlength=10))
    hp, hs = generate_hard(36, (17, 34), seed=3)
    assert np.bincount((hp > 0).reshape(36, -1).sum(1), minlength=35)[17:].tolist() == [2] * 18
    assert all(np.array_equal(S.solve(p), s) and S.count_solutions(p) == 1 for p, s in zip(hp[:6], hs[:6]))
    again = generate_hard(36, (17, 34), seed=3)
    assert np.array_equal(again[0], hp)
    ds = S.SudokuDataset(hp, hs)  # valid grids agreeing with their givens
    assert len(ds) == 36
    named = S.sudoku_dataset(S.SudokuSetConfig((17, 34), n_train=4, n_test=18, hard=True), "test", cache_dir=tmp_path)
    assert sorted(named.givens().tolist()) == list(range(17, 35))
    assert S.NAMED_SETS["rrn-17"].hard and S.NAMED_SETS["rrn-17"].givens == (17, 34)
