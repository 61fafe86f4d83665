"""Bad input to the Sudoku tasks (issue 35): board sizes, impossible givens, wrong board shapes and values, missing
or corrupt public files, cache folders. (The looped harness's: tests/experiments/test_sudoku_harness_bad_input.py.)"""
import os

import numpy as np
import pytest
import torch

from energylab.tasks import sudoku as S
from energylab.tasks import sudoku_solver as SS

GRID = np.array([[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]])


# ----------------------------------------------------------------------------- set configs and the cache
@pytest.mark.parametrize("kwargs, error, expected", [
    ({"size": 5}, ValueError, r"^size must be one of \[4, 6, 9\] \(board sides with boxes\), got 5"),
    ({"size": 8}, ValueError, r"^size must be one of \[4, 6, 9\]"),
    ({"size": 4.0}, TypeError, r"^size must be an int, got 4.0"),
    ({"size": True}, TypeError, r"^size must be an int, got True"),
    ({"givens": "6-8"}, ValueError, r"^givens must be a pair \(lo, hi\) of ints, got '6-8'"),
    ({"givens": (6, 80)}, ValueError, r"^givens must satisfy 4 <= lo <= hi <= 15 for 4x4 boards"),
    ({"givens": (3, 5)}, ValueError, r"^givens must satisfy 4 <= lo"),
    ({"givens": (8, 6)}, ValueError, r"^givens must satisfy"),
    ({"givens": (6.5, 8)}, TypeError, r"^givens\[0\] must be an int"),
    ({"n_train": 0}, ValueError, r"^n_train must be an int >= 1, got 0"),
    ({"n_test": -1}, ValueError, r"^n_test must be an int >= 1, got -1"),
    ({"seed": -2}, ValueError, r"^seed must be an int >= 0, got -2"),
    ({"hard": True}, ValueError, r"^hard=True sets exist for 9x9 boards only, got size=4"),
    ({"hard": 1}, TypeError, r"^hard must be True or False"),
])
def test_set_configs_are_checked_when_made(kwargs, error, expected):
    with pytest.raises(error, match=expected):
        S.SudokuSetConfig(**{"givens": (6, 8), "size": 4, **kwargs})


def test_every_named_set_is_a_valid_config():
    assert all(isinstance(c, S.SudokuSetConfig) for c in S.NAMED_SETS.values())


def test_a_cache_dir_that_is_a_file_or_unwritable_is_named(tmp_path):
    config = S.SudokuSetConfig(givens=(6, 8), n_train=3, n_test=2, size=4)
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ValueError, match=f"^cache_dir='{afile}' is a file, not a folder"):
        S.sudoku_puzzles(config, cache_dir=afile)
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(ValueError, match=f"^cannot write the sudoku cache in '{locked}'"):
            S.sudoku_puzzles(config, cache_dir=locked)
    finally:
        os.chmod(locked, 0o700)


def test_cache_files_honour_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        S.sudoku_puzzles(S.SudokuSetConfig(givens=(6, 8), n_train=3, n_test=2, size=4), "test", cache_dir=tmp_path)
    finally:
        os.umask(old)
    (path,) = tmp_path.iterdir()
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)  # readable by others, as the umask allows


# ----------------------------------------------------------------------------- boards
@pytest.mark.parametrize("board, expected", [
    (np.zeros((5, 5), int), r"^board must be a 4x4, 6x6 or 9x9 array .*got shape \(5, 5\)"),
    (np.zeros((4, 5), int), r"^board must be a 4x4, 6x6 or 9x9 array .*got shape \(4, 5\)"),
    (np.zeros((2, 4, 4), int), r"got shape \(2, 4, 4\)"),
    ("0" * 16, r"got shape \(\)"),
    (np.zeros((4, 4), bool), r"^board must hold ints 0\.\.4, got dtype bool"),
    (np.full((4, 4), 0.5), r"^board must hold whole numbers 0\.\.4"),
    (np.full((4, 4), np.nan), r"^board must hold whole numbers 0\.\.4"),
    (np.pad(np.array([[7]]), ((0, 3), (0, 3))), r"^board values must lie in 0\.\.4 \(0 = blank\)"),
    (np.pad(np.array([[1, 1]]), ((0, 3), (0, 2))), r"^board has contradictory givens: digit 1 repeats in row 0"),
])
def test_solver_names_wrong_boards(board, expected):
    with pytest.raises(ValueError, match=expected):
        SS.solve(board)
    with pytest.raises(ValueError, match=expected):
        SS.count_solutions(board)


def test_impossible_givens_without_a_visible_clash_have_no_solution():
    """1 2 in row 0 and 3 in row 1 at column 2 leave cell (0, 2) no digit: no clash to see, no solution."""
    board = np.zeros((4, 4), int)
    board[0, :2] = [1, 2]
    board[1, 2] = 3
    board[2, 3] = 3
    assert SS.count_solutions(board) == 0 and SS.solve(board) is None


@pytest.mark.parametrize("puzzles, solutions, expected", [
    (np.zeros((1, 5, 5), int), np.zeros((1, 5, 5), int), r"shape \(n, s, s\) with s in \[4, 6, 9\]"),
    (GRID, GRID, r"shape \(n, s, s\)"),
    (GRID[None].astype(float), GRID[None].astype(float), r"must be integer arrays"),
    (GRID[None], GRID[None][:, ::-1], r"board 0 has givens that disagree with its solution"),
    (np.zeros((1, 4, 4), int), np.ones((1, 4, 4), int), r"board 0 is not a valid grid"),
    (np.full((1, 4, 4), 5), GRID[None], r"values must lie in 0\.\.4"),
])
def test_datasets_name_wrong_boards(puzzles, solutions, expected):
    with pytest.raises(ValueError, match=expected):
        S.SudokuDataset(puzzles, solutions)


def test_accuracy_names_wrong_predictions():
    target = torch.zeros(2, 16, dtype=torch.long)
    with pytest.raises(TypeError, match=r"^pred of shape \(B, N\) must hold integer class indices"):
        S.sudoku_accuracy(torch.zeros(2, 16), target)
    with pytest.raises(TypeError, match=r"^target must hold integer class indices"):
        S.sudoku_accuracy(target, target.float())
    with pytest.raises(ValueError, match=r"^target holds no board \(B = 0\)"):
        S.sudoku_accuracy(target[:0], target[:0])
    assert S.sudoku_accuracy(torch.randn(2, 16, 4), target)["cell"] >= 0  # logits are fine


# ----------------------------------------------------------------------------- public files
def test_missing_public_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"^SATNet file {tmp_path}/features.pt not found"):
        S.load_satnet(tmp_path)
    with pytest.raises(FileNotFoundError, match=f"^RRN file {tmp_path}/train.csv not found"):
        S.load_rrn(tmp_path)


def test_corrupt_satnet_files_are_named(tmp_path):
    (tmp_path / "features.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match=f"^{tmp_path}/features.pt is not a readable SATNet file"):
        S.load_satnet(tmp_path)
    torch.save(torch.zeros(2, 9, 9, 9), tmp_path / "features.pt")
    torch.save(torch.zeros(3, 9, 9, 9), tmp_path / "labels.pt")
    with pytest.raises(ValueError, match="labels.pt: every cell of a solution must be set"):
        S.load_satnet(tmp_path, "all")
    with pytest.raises(ValueError, match=r"^n_train must be an int >= 0, got -1"):
        S.load_satnet(tmp_path, "train", n_train=-1)


def test_corrupt_rrn_files_are_named(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b"\xff\xfe" * 50)
    with pytest.raises(ValueError, match=f"^{path} is not a readable RRN file \\(UnicodeDecodeError"):
        S.load_rrn(tmp_path)
    path.write_text("0" * 81 + "," + "1" * 81 + "\n")
    with pytest.raises(ValueError, match=f"^{path}: solutions: board 0 is not a valid grid"):
        S.load_rrn(tmp_path)
    path.write_text("0" * 80 + "," + "1" * 81 + "\n")
    with pytest.raises(ValueError, match=f"^{path}:1: expected 'puzzle,solution' with 81 digits each"):
        S.load_rrn(tmp_path)
    with pytest.raises(ValueError, match=r"^limit must be an int >= 1, got 0"):
        S.load_rrn(tmp_path, limit=0)


# ----------------------------------------------------------------------------- issue 47: damaged files, empty sets
def _satnet_files(folder, n=2):
    from energylab.tasks.sudoku_generate import generate

    puzzles, solutions = generate(n, (30, 32), seed=0)
    for name, boards in (("features.pt", puzzles), ("labels.pt", solutions)):
        torch.save(torch.nn.functional.one_hot(torch.tensor(boards), 10)[..., 1:].float(), folder / name)


def test_a_satnet_split_without_boards_is_refused(tmp_path):
    """Before: split='test' with the default n_train=9000 on a file of 2 boards, or n_train=0, gave an empty dataset
    without a word (and every accuracy over it NaN)."""
    _satnet_files(tmp_path)
    with pytest.raises(ValueError, match=rf"^{tmp_path}: split='test' holds no board: the files hold 2 boards and "
                                         r"n_train=9000 \(train: the first n_train, test: the rest; pass an n_train in "
                                         r"1\.\.1 or split='all'\)"):
        S.load_satnet(tmp_path, "test")
    with pytest.raises(ValueError, match=r"split='train' holds no board: the files hold 2 boards and n_train=0"):
        S.load_satnet(tmp_path, "train", n_train=0)
    assert len(S.load_satnet(tmp_path, "all")) == 2 and len(S.load_satnet(tmp_path, "test", n_train=1)) == 1
    torch.save(torch.zeros(0, 9, 9, 9), tmp_path / "features.pt")
    torch.save(torch.zeros(0, 9, 9, 9), tmp_path / "labels.pt")
    with pytest.raises(ValueError, match=rf"^{tmp_path}: features.pt and labels.pt hold no board"):
        S.load_satnet(tmp_path, "all")


def test_a_dataset_of_no_boards_is_refused():
    with pytest.raises(ValueError, match=r"^puzzles and solutions hold no board \(n = 0\)"):
        S.SudokuDataset(np.zeros((0, 4, 4), int), np.zeros((0, 4, 4), int))


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_a_damaged_cache_file_is_rebuilt_and_closed(tmp_path, damage):
    """A damaged cache is rebuilt with a warning naming it (never used), and the damaged file is closed: np.load left
    a truncated archive open (a ResourceWarning, and on some systems a file that cannot be replaced)."""
    import gc
    import warnings

    config = S.SudokuSetConfig(givens=(6, 8), n_train=3, n_test=2, size=4)
    good = S.sudoku_puzzles(config, "test", cache_dir=tmp_path)
    (path,) = tmp_path.iterdir()
    data = path.read_bytes()
    path.write_bytes({"empty": b"", "truncated": data[:len(data) // 2], "garbage": b"x" * 100}[damage])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = S.sudoku_puzzles(config, "test", cache_dir=tmp_path)
        gc.collect()
    messages = [str(w.message) for w in caught]
    assert any(m.startswith(f"sudoku cache {path} is corrupt") and m.endswith("rebuilding it") for m in messages)
    assert not [m for m in messages if "unclosed file" in m], messages
    assert all(np.array_equal(a, b) for a, b in zip(good, again)) and path.read_bytes() == data


def test_a_damaged_hard_catalogue_is_named(tmp_path, monkeypatch):
    """Before: an empty, truncated or garbled catalogue raised raw numpy/int()/IndexError errors, a missing one a
    bare FileNotFoundError."""
    from energylab.tasks import sudoku_hard as SH

    text = SH.CATALOGUE.read_text()
    first = next(line for line in text.splitlines() if line and not line.startswith("#"))
    cases = {"empty": ("", r" is corrupt: it holds no puzzle"),
             "truncated": (text[:len(text) // 2], r":\d+: the catalogue is corrupt: expected 'givens puzzle "
                                                   r"solution' with 81 digits each"),
             "count": ("x" + first[2:] + "\n", r":1: the catalogue is corrupt"),
             "grid": (first[:3] + "0" * 81 + " " + "1" * 81 + "\n", r" is corrupt: givens counts or solutions"),
             "binary": (None, r" is not a readable catalogue of hard puzzles \(UnicodeDecodeError"),
             "missing": (False, r" is not a readable catalogue of hard puzzles \(FileNotFoundError")}
    try:
        for name, (content, expected) in cases.items():
            path = tmp_path / f"{name}.txt"
            if content is None:
                path.write_bytes(b"\xff\xfe" * 10)
            elif content is not False:
                path.write_text(content)
            monkeypatch.setattr(SH, "CATALOGUE", path)
            SH.catalogue.cache_clear()
            with pytest.raises(ValueError, match=f"^{path}{expected}"):
                SH.catalogue()
    finally:
        monkeypatch.undo()
        SH.catalogue.cache_clear()
    assert sum(SH.catalogue_counts().values()) == len(SH.catalogue()[0]) > 0


def test_generate_hard_refuses_fractional_givens():
    """Before: givens=(17.5, 20) was truncated to 17 without a word."""
    from energylab.tasks.sudoku_hard import generate_hard

    with pytest.raises(TypeError, match=r"^givens\[0\] must be an int, got 17.5"):
        generate_hard(2, (17.5, 20))
    with pytest.raises(ValueError, match=r"^givens must be a pair \(lo, hi\) of ints, got 17"):
        generate_hard(2, 17)
