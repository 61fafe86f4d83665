"""Sudoku task: exact solver, certified generator, cached datasets, metric, public-file loaders, figures."""
import random
import warnings

import numpy as np
import pytest
import torch

from energylab.bench.sudoku import reference_count
from energylab.tasks import sudoku as S
from energylab.tasks.sudoku_generate import _walk_down, dig, random_grid
from energylab.viz.sudoku import board_figure, givens_figure

# Wikipedia's example puzzle and its published solution.
WIKI = "530070000600195000098000060800060003400803001700020006060000280000419005000080079"
WIKI_SOLUTION = "534678912672195348198342567859761423426853791713924856961537284287419635345286179"
# 17-clue puzzles (the minimum for a unique 9x9 Sudoku): one from Royle's collection, and the one
# Wikipedia shows as hard for brute force (its solution's first row is 987654321).
HARD17 = "000000010400000000020000000000050407008000300001090000300400200050100000000806000"
BRUTE17 = "..............3.85..1.2.......5.7.....4...1...9.......5......73..2.1........4...9"


def board(s: str) -> np.ndarray:
    return np.array([int(c) for c in s.replace(".", "0")]).reshape(9, 9)


def is_grid(g: np.ndarray) -> bool:
    """Every row, column and box holds 1..9 (written independently of the library's check)."""
    groups = [g[r] for r in range(9)] + [g[:, c] for c in range(9)]
    groups += [g[r:r + 3, c:c + 3].ravel() for r in (0, 3, 6) for c in (0, 3, 6)]
    return all(sorted(x.tolist()) == list(range(1, 10)) for x in groups)


def test_solve_known_puzzles():
    assert np.array_equal(S.solve(board(WIKI)), board(WIKI_SOLUTION))
    for p in (HARD17, BRUTE17):
        q = board(p)
        assert (q > 0).sum() == 17
        sol = S.solve(q)
        assert is_grid(sol) and np.array_equal(sol[q > 0], q[q > 0])
        assert S.count_solutions(q) == 1
    assert S.solve(board(BRUTE17))[0].tolist() == [9, 8, 7, 6, 5, 4, 3, 2, 1]


def test_count_solutions_zero_one_many():
    empty = np.zeros((9, 9), dtype=int)
    assert S.count_solutions(empty) == 2
    assert S.count_solutions(empty, limit=7) == 7
    assert S.count_solutions(board(WIKI)) == 1 and S.count_solutions(board(WIKI), limit=5) == 1
    assert S.count_solutions(board(WIKI_SOLUTION)) == 1
    dead = np.zeros((9, 9), dtype=int)  # no repeated given, yet cell (0, 8) has no digit left
    dead[0, :8] = np.arange(1, 9)
    dead[1, 8] = 9
    assert S.count_solutions(dead) == 0 and S.solve(dead) is None
    two = board(WIKI_SOLUTION)  # blank a deadly rectangle: two solutions
    r1, r2, c1, c2 = 3, 4, 5, 8  # rows of one band, columns of two stacks, digits a b / b a
    assert two[r1, c1] == two[r2, c2] and two[r1, c2] == two[r2, c1]
    two[[r1, r1, r2, r2], [c1, c2, c1, c2]] = 0
    assert S.count_solutions(two, limit=10) == 2


@pytest.mark.parametrize("bad, match", [
    (np.zeros((9, 8), dtype=int), "shape"),
    (np.zeros(81, dtype=int), "shape"),
    (np.full((9, 9), 10), "0..9"),
    (-np.ones((9, 9), dtype=int), "0..9"),
    (np.full((9, 9), 0.5), "whole numbers"),
])
def test_bad_boards(bad, match):
    for fn in (S.solve, S.count_solutions):
        with pytest.raises(ValueError, match=f"board.*{match}|{match}.*board"):
            fn(bad)


@pytest.mark.parametrize("cells, kind", [([(0, 0), (0, 7)], "row"), ([(0, 4), (8, 4)], "column"),
                                         ([(3, 3), (5, 5)], "box")])
def test_contradictory_givens(cells, kind):
    b = np.zeros((9, 9), dtype=int)
    for rc in cells:
        b[rc] = 6
    with pytest.raises(ValueError, match=f"board has contradictory givens: digit 6 repeats in {kind}"):
        S.solve(b)
    with pytest.raises(ValueError, match="limit"):
        S.count_solutions(np.zeros((9, 9), dtype=int), limit=0)


def check_generated(puzzles, solutions, lo, hi):
    assert puzzles.shape == solutions.shape == (len(puzzles), 9, 9)
    for p, s in zip(puzzles, solutions):
        assert is_grid(s) and np.array_equal(S.solve(p), s)
        assert np.array_equal(p[p > 0], s[p > 0])
        assert lo <= (p > 0).sum() <= hi
        assert reference_count([int(v) for v in p.ravel()]) == 1  # an independent counter


def test_dig_prefixes_and_walk_stay_unique():
    rng = random.Random(11)
    grid = random_grid(rng)
    assert is_grid(np.array(grid).reshape(9, 9))
    removed = dig(grid, rng)
    for k in (81 - len(removed), 30, 45):  # any prefix of the removals is a unique puzzle
        puzzle = list(grid)
        for c in removed[: 81 - k]:
            puzzle[c] = 0
        assert sum(v > 0 for v in puzzle) == k and reference_count(puzzle) == 1
    minimal = [0 if i in removed else v for i, v in enumerate(grid)]
    for c in range(81):  # minimal: no given can go
        if minimal[c]:
            assert reference_count(minimal[:c] + [0] + minimal[c + 1:]) == 2
    walked = _walk_down(minimal, grid, rng, floor=17, steps=3)
    assert sum(v > 0 for v in walked) <= sum(v > 0 for v in minimal)
    assert reference_count(list(walked)) == 1
    assert all(w in (0, g) for w, g in zip(walked, grid))


def test_generate_satnet_range_unique_and_spread():
    puzzles, solutions = S.generate(24, (31, 42), seed=0)
    check_generated(puzzles, solutions, 31, 42)
    counts = np.bincount((puzzles > 0).reshape(24, 81).sum(1), minlength=43)[31:]
    assert counts.tolist() == [2] * 12  # every givens count equally often


def test_generate_hard_range():
    puzzles, solutions = S.generate(5, (22, 26), seed=1)
    check_generated(puzzles, solutions, 22, 26)
    assert sorted((puzzles > 0).reshape(5, 81).sum(1).tolist()) == [22, 23, 24, 25, 26]


def test_generate_deterministic_and_validated():
    a = S.generate(6, (35, 40), seed=3)
    b = S.generate(6, (35, 40), seed=3)
    c = S.generate(6, (35, 40), seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    for kwargs, match in (({"n": 0}, "n must"), ({"givens": (16, 20)}, "givens"), ({"givens": (40, 30)}, "givens"),
                          ({"givens": 30}, "givens"), ({"seed": -1}, "seed")):
        with pytest.raises(ValueError, match=match):
            S.generate(**{"n": 2, **kwargs})
    with pytest.raises(RuntimeError, match="missing"):
        S.generate(1, (17, 17), seed=0, max_digs=2, walk_steps=0)


def test_cache_round_trip_and_corruption(tmp_path, monkeypatch):
    cfg = S.SudokuSetConfig(givens=(33, 38), n_train=12, n_test=6, seed=1)
    train = S.sudoku_puzzles(cfg, "train", cache_dir=tmp_path)
    test = S.sudoku_puzzles(cfg, "test", cache_dir=tmp_path)
    assert train[0].shape == (12, 9, 9) and test[0].shape == (6, 9, 9)
    assert not np.array_equal(train[0][:6], test[0])
    files = sorted(tmp_path.iterdir())
    assert len(files) == 2 and all(f.suffix == ".npz" for f in files)  # no temporary files left behind

    def no_generate(*args, **kwargs):
        raise AssertionError("should have loaded from cache")

    monkeypatch.setattr(S, "generate", no_generate)
    again = S.sudoku_puzzles(cfg, "train", cache_dir=tmp_path)
    assert all(np.array_equal(x, y) for x, y in zip(train, again))
    monkeypatch.undo()

    path = next(f for f in files if "-train-" in f.name)
    path.write_bytes(path.read_bytes()[:200])  # truncated file
    with pytest.warns(RuntimeWarning, match="corrupt"):
        rebuilt = S.sudoku_puzzles(cfg, "train", cache_dir=tmp_path)
    assert all(np.array_equal(x, y) for x, y in zip(train, rebuilt))

    with np.load(path) as f:  # a readable file whose boards were altered: the checksum catches it
        p, s, meta = f["puzzles"].copy(), f["solutions"], f["meta"]
    p[0, 0, 0] = (p[0, 0, 0] % 9) + 1
    np.savez_compressed(path, puzzles=p, solutions=s, meta=meta)
    with pytest.warns(RuntimeWarning, match="checksum"):
        rebuilt = S.sudoku_puzzles(cfg, "train", cache_dir=tmp_path)
    assert all(np.array_equal(x, y) for x, y in zip(train, rebuilt))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        S.sudoku_puzzles(cfg, "train", cache_dir=tmp_path)  # the rebuilt file is trusted again
    with pytest.raises(ValueError, match="config"):
        S.sudoku_puzzles("no-such-set", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="split"):
        S.sudoku_puzzles(cfg, "valid", cache_dir=tmp_path)


def test_dataset_format():
    puzzles, solutions = S.generate(7, (31, 42), seed=5)
    ds = S.SudokuDataset(puzzles, solutions)
    tokens, target, mask = ds[3]
    assert tokens.shape == target.shape == mask.shape == (81,)
    assert tokens.dtype == target.dtype == torch.int64 and mask.dtype == torch.bool
    assert 0 <= ds.tokens.min() and ds.tokens.max() <= 9 and 0 <= ds.target.min() and ds.target.max() <= 8
    assert torch.equal(mask, tokens == 0)
    given = tokens > 0
    assert torch.equal(target[given] + 1, tokens[given])
    assert torch.equal(target + 1, torch.as_tensor(solutions[3].ravel()))
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=5)))
    assert [tuple(t.shape) for t in batch] == [(5, 81)] * 3
    assert ds.givens().tolist() == (puzzles > 0).reshape(7, 81).sum(1).tolist()
    bad = solutions.copy()
    bad[0, 0, [0, 1]] = bad[0, 0, [1, 0]]  # swap two cells: columns now repeat
    with pytest.raises(ValueError, match="not a valid grid"):
        S.SudokuDataset(np.zeros_like(bad), bad)
    wrong_given = puzzles.copy()
    wrong_given[1][solutions[1] == 1] = 2
    with pytest.raises(ValueError, match="disagree"):
        S.SudokuDataset(wrong_given, solutions)


def test_accuracy_on_hand_made_boards():
    target = torch.arange(162).reshape(2, 81) % 9
    mask = torch.zeros(2, 81, dtype=torch.bool)
    mask[0, :10] = True  # board 0: 10 blanks
    mask[1, 40:45] = True  # board 1: 5 blanks
    assert S.sudoku_accuracy(target.clone(), target, mask) == {"cell": 1.0, "board": 1.0}
    pred = target.clone()
    pred[0, 3] = (pred[0, 3] + 1) % 9  # one wrong blank on board 0
    pred[1, 0] = (pred[1, 0] + 1) % 9  # a wrong given on board 1: not counted under the mask
    masked = S.sudoku_accuracy(pred, target, mask)
    assert masked["cell"] == pytest.approx(14 / 15) and masked["board"] == 0.5
    acc = S.sudoku_accuracy(pred, target)  # no mask: every cell counts
    assert acc["cell"] == pytest.approx(160 / 162) and acc["board"] == 0.0
    logits = torch.nn.functional.one_hot(pred, 9).double()  # (2, 81, 9)
    assert S.sudoku_accuracy(logits, target, mask) == masked
    with pytest.raises(ValueError, match="pred"):
        S.sudoku_accuracy(pred[:, :80], target)
    with pytest.raises(ValueError, match="mask"):
        S.sudoku_accuracy(pred, target, mask.long())


def test_load_satnet_files(tmp_path):
    puzzles, solutions = S.generate(5, (31, 42), seed=2)
    p, s = torch.as_tensor(puzzles), torch.as_tensor(solutions)
    features = torch.nn.functional.one_hot(p, 10)[..., 1:].float()  # (n, 9, 9, 9), blanks all zero
    labels = torch.nn.functional.one_hot(s, 10)[..., 1:].float()
    torch.save(features, tmp_path / "features.pt")
    torch.save(labels, tmp_path / "labels.pt")
    ds = S.load_satnet(tmp_path, split="all")
    assert np.array_equal(ds.puzzles, puzzles) and np.array_equal(ds.solutions, solutions)
    train, test = S.load_satnet(tmp_path, "train", n_train=3), S.load_satnet(tmp_path, "test", n_train=3)
    assert len(train) == 3 and len(test) == 2 and np.array_equal(test.puzzles, puzzles[3:])
    torch.save(features[..., :8], tmp_path / "features.pt")
    with pytest.raises(ValueError, match="shape"):
        S.load_satnet(tmp_path)
    torch.save(features * 2, tmp_path / "features.pt")
    with pytest.raises(ValueError, match="one-hot"):
        S.load_satnet(tmp_path)


def test_load_rrn_files(tmp_path):
    puzzles, solutions = S.generate(4, (24, 30), seed=3)
    rows = ["quizzes,solutions"]
    for k, (p, s) in enumerate(zip(puzzles, solutions)):
        q = "".join(map(str, p.ravel()))
        rows.append((q.replace("0", ".") if k % 2 else q) + "," + "".join(map(str, s.ravel())))
    (tmp_path / "test.csv").write_text("\n".join(rows) + "\n")
    ds = S.load_rrn(tmp_path, "test")
    assert np.array_equal(ds.puzzles, puzzles) and np.array_equal(ds.solutions, solutions)
    assert len(S.load_rrn(tmp_path, "test", limit=2)) == 2
    (tmp_path / "valid.csv").write_text(rows[1][:-1] + "\n")
    with pytest.raises(ValueError, match="valid.csv:1"):
        S.load_rrn(tmp_path, "valid")
    with pytest.raises(ValueError, match="split"):
        S.load_rrn(tmp_path, "dev")


def test_board_figures():
    sol = board(WIKI_SOLUTION)
    puzzle = board(WIKI)
    pred = sol.copy()
    pred[0, 2] = 5 if sol[0, 2] != 5 else 6  # (0, 2) is blank in the puzzle: one mistake
    fig = board_figure(puzzle, torch.as_tensor(pred.ravel()), sol)
    traces = {t.name: t for t in fig.data[1:]}  # data[0]: the cell shading
    assert len(traces["given"].text) == 30 and len(traces["mistake"].text) == 1
    assert len(traces["predicted"].text) == 81 - 30 - 1
    assert fig.layout.title.text == "1 mistake on 51 blanks"
    assert np.array(fig.data[0].z)[::-1][0, 2] == 2 and np.array(fig.data[0].z)[::-1][0, 0] == 1
    bare = board_figure(puzzle)
    assert [t.name for t in bare.data[1:]] == ["given"]
    with pytest.raises(ValueError, match="prediction"):
        board_figure(puzzle, np.zeros((8, 9)))
    fig = givens_figure({"a": np.stack([puzzle, sol])})
    assert list(fig.data[0].x) == [30, 81] and list(fig.data[0].y) == [0.5, 0.5]
