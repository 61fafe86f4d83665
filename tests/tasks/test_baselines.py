"""energylab.baselines: hand-computed values in float64 and exact counts."""
import numpy as np
import pytest
import torch

from energylab import baselines as bl
from energylab.tasks import images as im
from energylab.tasks.sudoku import SudokuDataset

SOLUTION = np.array([[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]])


def test_mean_and_class_mean_by_hand():
    train = torch.tensor([[[0.0, 1.0]], [[1.0, 1.0]], [[0.5, 0.0]]], dtype=torch.float64)  # (3, 1, 2)
    labels = torch.tensor([0, 0, 1])
    mean = bl.mean_image_prediction(train, 2)
    assert mean.shape == (2, 1, 2) and mean.dtype == torch.float64
    assert torch.equal(mean[1], torch.tensor([[0.5, 2.0 / 3.0]], dtype=torch.float64))
    cls = bl.class_mean_prediction(train, labels, torch.tensor([1, 0, 1]))
    assert torch.equal(cls, torch.tensor([[[0.5, 0.0]], [[0.5, 1.0]], [[0.5, 0.0]]], dtype=torch.float64))


def test_image_baselines_equal_the_mse_written_out():
    g = torch.Generator().manual_seed(3)
    train = torch.rand(7, 6, 6, generator=g, dtype=torch.float64)
    test = torch.rand(5, 6, 6, generator=g, dtype=torch.float64)
    tl, te = torch.tensor([0, 1, 2, 0, 1, 2, 2]), torch.tensor([2, 0, 1, 1, 0])
    target = im.patchify(test, 3)  # (5, 4, 9)
    mask = torch.tensor([[1, 0, 0, 1], [0, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 1], [0, 1, 1, 0]], dtype=torch.bool)
    out = bl.image_baselines(train, target, lambda x: im.patchify(x, 3), mask, tl, te)
    m = im.patchify(train.mean(0, keepdim=True), 3)[0]  # (4, 9)
    want = np.mean([((m[mask[b]] - target[b][mask[b]]) ** 2).mean().item() for b in range(5)])
    assert abs(out["mean_digit"] - want) < 1e-15
    c = torch.stack([train[tl == k].mean(0) for k in range(3)])
    cp = im.patchify(c[te], 3)
    want_c = np.mean([((cp[b][mask[b]] - target[b][mask[b]]) ** 2).mean().item() for b in range(5)])
    assert abs(out["class_mean"] - want_c) < 1e-15
    # the mean image is the best constant image under the all-pixel MSE: any other constant scores worse
    full = bl.image_baselines(train, im.patchify(train, 3), lambda x: im.patchify(x, 3))["mean_digit"]
    shifted = float(im.masked_mse(im.patchify(train.mean(0, keepdim=True) + 0.01, 3).expand(7, -1, -1),
                                  im.patchify(train, 3)).mean())
    assert abs(shifted - full - 1e-4) < 1e-12  # MSE(c) = MSE(mean) + |c - mean|^2 exactly


def test_shrink_is_the_per_pixel_least_squares_fit_in_closed_form():
    """float64: a_p minimises sum_n (m_p + a (x_np - m_p) - y_np)^2; check against numpy's lstsq per pixel."""
    g = torch.Generator().manual_seed(5)
    clean = torch.rand(40, 3, 4, generator=g, dtype=torch.float64)
    noisy = (clean + 0.3 * torch.randn(40, 3, 4, generator=g, dtype=torch.float64)).clamp(0, 1)
    a = bl.shrink_coefficients(clean, noisy)
    assert a.shape == (3, 4) and a.dtype == torch.float64
    m = clean.mean(0)
    for p in np.ndindex(3, 4):
        x, y = (noisy[(slice(None), *p)] - m[p]).numpy(), (clean[(slice(None), *p)] - m[p]).numpy()
        want = np.linalg.lstsq(x[:, None], y, rcond=None)[0][0]
        assert abs(a[p].item() - want) < 1e-13
        # the fit is a minimum: moving a either way raises the training error
        err = lambda c: ((c * x - y) ** 2).sum()  # noqa: E731
        assert err(a[p].item()) <= min(err(a[p].item() + 1e-3), err(a[p].item() - 1e-3))
    test = torch.rand(6, 3, 4, generator=g, dtype=torch.float64)
    pred = bl.shrink_prediction(clean, noisy, test)
    assert torch.allclose(pred, m + a * (test - m), atol=0, rtol=1e-15)


def test_shrink_limits_exact_input_and_no_information():
    g = torch.Generator().manual_seed(6)
    clean = torch.rand(20, 2, 2, generator=g, dtype=torch.float64)
    assert torch.allclose(bl.shrink_coefficients(clean, clean), torch.ones(2, 2, dtype=torch.float64), rtol=1e-14)
    test = torch.rand(3, 2, 2, generator=g, dtype=torch.float64)
    assert torch.allclose(bl.shrink_prediction(clean, clean, test), test, rtol=1e-14)  # a clean input is kept
    flat = clean.mean(0).expand(20, 2, 2)  # a corruption that leaves only the mean: a = 0, paint the mean
    assert torch.equal(bl.shrink_coefficients(clean, flat), torch.zeros(2, 2, dtype=torch.float64))
    assert torch.allclose(bl.shrink_prediction(clean, flat, test), clean.mean(0).expand(3, 2, 2), rtol=1e-15)
    # an uncorrelated corruption: a is small, and the shrink scores no worse than the mean on the training pairs
    other = torch.rand(20, 2, 2, generator=g, dtype=torch.float64)
    fit = bl.shrink_prediction(clean, other, other)
    assert ((fit - clean) ** 2).sum() <= ((clean.mean(0) - clean) ** 2).sum() + 1e-15


def test_image_baselines_shrink_equals_the_mse_written_out():
    g = torch.Generator().manual_seed(7)
    train = torch.rand(9, 4, 4, generator=g, dtype=torch.float64)
    train_noisy = (train + 0.2 * torch.randn(9, 4, 4, generator=g, dtype=torch.float64)).clamp(0, 1)
    test = torch.rand(3, 4, 4, generator=g, dtype=torch.float64)
    test_noisy = (test + 0.2 * torch.randn(3, 4, 4, generator=g, dtype=torch.float64)).clamp(0, 1)
    patch = lambda x: im.patchify(x, 2)  # noqa: E731
    out = bl.image_baselines(train, patch(test), patch, train_corrupted=train_noisy, corrupted=patch(test_noisy))
    m = train.mean(0)
    a = ((train_noisy - m) * (train - m)).sum(0) / ((train_noisy - m) ** 2).sum(0)
    want = float(((m + a * (test_noisy - m) - test) ** 2).mean())  # every image has as many pixels: mean of means
    assert abs(out["shrink"] - want) < 1e-15
    assert set(out) == {"mean_digit", "shrink"}
    with pytest.raises(ValueError, match="both train_corrupted and corrupted"):
        bl.image_baselines(train, patch(test), patch, train_corrupted=train_noisy)
    with pytest.raises(ValueError, match="shape of target"):
        bl.image_baselines(train, patch(test), patch, train_corrupted=train_noisy, corrupted=patch(test_noisy)[:2])


def test_constant_accuracy_counts():
    train = torch.tensor([3, 1, 3, 2, 1, 3])
    assert bl.constant_accuracy(train, torch.tensor([3, 3, 0, 1])) == 0.5
    assert bl.constant_accuracy(torch.tensor([2, 1, 1, 2]), torch.tensor([1, 2, 2])) == 1 / 3  # tie: smallest, 1
    rows = torch.tensor([[1, 2], [1, 2], [2, 1]])
    assert bl.constant_row_accuracy(rows, torch.tensor([[1, 2], [2, 1], [1, 1], [1, 2]])) == 0.5
    with pytest.raises(TypeError, match="train_targets"):
        bl.constant_accuracy(torch.tensor([0.5]), torch.tensor([1]))
    with pytest.raises(ValueError, match="train_rows"):
        bl.constant_row_accuracy(torch.tensor([1, 2]), torch.tensor([[1, 2]]))


def test_sudoku_candidates_and_baseline_by_hand():
    puzzle = SOLUTION.copy()
    puzzle[0, 0] = 0  # row, column and box all say 1: one candidate
    puzzle[3, 3] = puzzle[3, 2] = 0  # row 3 misses {1, 2}; column 2 has 1 at (1, 2) -> (3, 2) = 2, (3, 3) = 1
    puzzle[2, 0] = puzzle[2, 1] = puzzle[1, 0] = puzzle[1, 1] = 0  # box 2 and box 0 leave several open
    cand = bl.sudoku_candidates(puzzle[None])[0]
    assert cand[0, 0].tolist() == [True, False, False, False]
    assert cand[3, 2].tolist() == [False, True, False, False] and cand[3, 3].tolist() == [True, False, False, False]
    assert cand[0, 1].tolist() == [False, True, False, False]  # a given keeps its own digit
    assert cand[2, 0].tolist() == [True, True, False, False]  # row 2 leaves {1, 2}, column 0 too
    ds = SudokuDataset(puzzle[None], SOLUTION[None])
    out = bl.sudoku_baseline(ds)
    # 7 blanks; one elimination forces six: (0,0), (3,2), (3,3), (1,0) = 3, (1,1) = 4, (2,1) = 1 (its row holds
    # 3, 4 and its column 2, 3). Only (2,0) keeps {1, 2} open: the smallest, 1, is wrong (the solution has 2)
    assert cand[1, 0].tolist() == [False, False, True, False] and cand[2, 1].tolist() == [True, False, False, False]
    assert out == {"cell": 6 / 7, "board": 0.0}
    # a reference that votes for the truth at the ambiguous cells makes every blank right
    ref = SudokuDataset(SOLUTION[None], SOLUTION[None])
    assert bl.sudoku_baseline(ds, ref) == {"cell": 1.0, "board": 1.0}
    with pytest.raises(TypeError, match="dataset"):
        bl.sudoku_baseline(puzzle)


def test_bad_image_input_names_the_argument():
    with pytest.raises(ValueError, match="batch"):
        bl.mean_image_prediction(torch.zeros(2, 3), 0)
    with pytest.raises(ValueError, match="never occur"):
        bl.class_mean_prediction(torch.zeros(2, 3), torch.tensor([0, 0]), torch.tensor([1]))
    with pytest.raises(ValueError, match="one shape"):
        bl.shrink_coefficients(torch.zeros(4, 3), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="corrupted must be"):
        bl.shrink_prediction(torch.rand(4, 3), torch.rand(4, 3), torch.rand(2, 2))
    with pytest.raises(TypeError, match="corrupted"):
        bl.shrink_coefficients(torch.zeros(4, 3), torch.zeros(4, 3, dtype=torch.int64))


# ------------------------------------------------------- Sudoku: the three no-learning rungs (issue 49)

def _boards():
    from energylab.tasks.sudoku import SudokuDataset
    from energylab.tasks.sudoku_solver import solve

    # one board that naked singles alone finish, one classic 9x9 that propagation cannot finish (it needs search)
    easy = np.array([[5, 3, 0, 0, 7, 0, 0, 0, 0], [6, 0, 0, 1, 9, 5, 0, 0, 0], [0, 9, 8, 0, 0, 0, 0, 6, 0],
                     [8, 0, 0, 0, 6, 0, 0, 0, 3], [4, 0, 0, 8, 0, 3, 0, 0, 1], [7, 0, 0, 0, 2, 0, 0, 0, 6],
                     [0, 6, 0, 0, 0, 0, 2, 8, 0], [0, 0, 0, 4, 1, 9, 0, 0, 5], [0, 0, 0, 0, 8, 0, 0, 7, 9]])
    hard = np.array([[8, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 3, 6, 0, 0, 0, 0, 0], [0, 7, 0, 0, 9, 0, 2, 0, 0],
                     [0, 5, 0, 0, 0, 7, 0, 0, 0], [0, 0, 0, 0, 4, 5, 7, 0, 0], [0, 0, 0, 1, 0, 0, 0, 3, 0],
                     [0, 0, 1, 0, 0, 0, 0, 6, 8], [0, 0, 8, 5, 0, 0, 0, 1, 0], [0, 9, 0, 0, 0, 0, 4, 0, 0]])
    puzzles = np.stack([easy, hard])
    return SudokuDataset(puzzles, np.stack([solve(b) for b in puzzles]))


def test_propagation_solves_what_singles_finish_and_leaves_the_rest_open():
    data = _boards()
    filled = bl.propagate_boards(data.puzzles)
    assert np.array_equal(filled[0], data.solutions[0])  # the easy board: propagation alone completes it
    open_cells = filled[1] == 0
    assert open_cells.sum() == 60  # the hard board (Inkala's): no single anywhere, every blank stays open
    assert np.all((filled[1] == data.solutions[1]) | open_cells)  # and what it decides is right
    scores = bl.sudoku_propagation(data)
    assert scores["board"] == 0.5 and scores["decided"] == 0.5
    assert scores["cell"] == pytest.approx(51 / 111, abs=1e-12)  # the easy board's 51 blanks of 51 + 60


def test_propagation_then_a_guess_is_the_mean_of_sampled_guesses():
    data = _boards()
    exact = bl.sudoku_propagation_guess(data)
    filled = bl.propagate_boards(data.puzzles)
    cands = bl.sudoku_candidates(filled)
    rng = np.random.default_rng(0)
    blanks = data.puzzles == 0
    cells, boards = [], []
    for _ in range(400):  # sample the guesses: each undecided cell a uniform draw among its candidates
        guess = filled.copy()
        for b, r, c in zip(*np.nonzero(filled == 0)):
            guess[b, r, c] = 1 + rng.choice(np.flatnonzero(cands[b, r, c]))
        right = (guess == data.solutions) & blanks
        cells.append(right.sum() / blanks.sum())
        boards.append(np.mean([right[k][blanks[k]].all() for k in range(len(data))]))
    assert exact["cell"] == pytest.approx(np.mean(cells), abs=0.01)  # 400 draws: standard error about 0.002
    assert exact["board"] == pytest.approx(np.mean(boards), abs=1e-9)  # the hard board is never guessed whole
    assert exact["board"] == 0.5 and exact["cell"] > bl.sudoku_propagation(data)["cell"] + 0.05


def test_the_blind_vote_solves_nothing_and_the_rungs_are_ordered_on_generated_boards(tmp_path):
    from energylab.tasks import sudoku as tasks

    cfg = tasks.SudokuSetConfig(givens=(12, 16), size=6, n_train=60, n_test=60)
    train, test = tasks.sudoku_dataset(cfg, "train", cache_dir=tmp_path), tasks.sudoku_dataset(cfg, "test",
                                                                                             cache_dir=tmp_path)
    blind, one, prop = bl.sudoku_blind_vote(test, train), bl.sudoku_baseline(test, train), bl.sudoku_propagation(test)
    assert blind["board"] == 0.0
    assert blind["cell"] < one["cell"] < prop["cell"] and one["board"] <= prop["board"]
    assert prop["board"] > 0.9  # generated 6x6 boards rarely need search


def test_propagation_refuses_bad_boards():
    with pytest.raises(ValueError, match="shape"):
        bl.propagate_boards(np.zeros((2, 5, 5), dtype=int))
    with pytest.raises(ValueError, match="0..4"):
        bl.propagate_boards(np.full((1, 4, 4), 7))
    with pytest.raises(TypeError, match="SudokuDataset"):
        bl.sudoku_propagation(np.zeros((1, 4, 4)))
    with pytest.raises(TypeError, match="SudokuDataset"):
        bl.sudoku_propagation_guess(np.zeros((1, 4, 4)))


@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("size,name", [(4, "4x4-ood"), (6, "6x6-ood"), (9, "rrn-17"), (6, "6x6-search")])
def test_the_pages_propagation_is_the_librarys(size, name, tmp_path):
    """The in-page solver's no-learning column (book/assets/js/sudoku_solver.js, ``propagate``) decides exactly the
    cells ``propagate_boards`` decides, on boards it solves and on boards that need search."""
    import json
    import pathlib
    import subprocess

    from energylab.tasks.sudoku_harness import load_set

    root = pathlib.Path(__file__).resolve().parents[2]
    data = load_set(name, "test", 40, size)
    boards = data.puzzles.reshape(len(data), -1).tolist()
    request = tmp_path / "boards.json"
    request.write_text(json.dumps({"boards": boards, "size": size}))
    script = """
const fs = require("fs"), vm = require("vm");
const ctx = {window: {}, performance, console, document: {readyState: "loading", querySelectorAll: () => []}};
ctx.window.addEventListener = () => {};
vm.createContext(ctx);
vm.runInContext(fs.readFileSync(process.argv[1], "utf8"), ctx);
const r = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
process.stdout.write(JSON.stringify(r.boards.map((b) => ctx.window.SudokuSolver.propagate(b, r.size))));
"""
    out = subprocess.run(["node", "-e", script, str(root / "book" / "assets" / "js" / "sudoku_solver.js"),
                          str(request)], capture_output=True, text=True, check=True).stdout
    page = np.array(json.loads(out)).reshape(len(data), size, size)
    assert np.array_equal(page, bl.propagate_boards(data.puzzles))
    solved = (page > 0).all(axis=(1, 2)).mean()
    assert (solved == 0) if name.endswith("search") else (solved > 0.5)
