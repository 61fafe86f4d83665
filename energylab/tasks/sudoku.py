"""Sudoku as a learning task: named datasets (cached), a torch Dataset, accuracy, public-file loaders.

Format (the one SATNet-style and Hyper-SET-style training uses): a board is N = 81 tokens in
row-major order, token 0 = blank and 1..9 = a given digit; the target is the solution as a class
index ``digit - 1`` in 0..8; the loss mask is True on blanks only (givens are copied, not learnt).
A board counts as solved only if every cell is right; cell accuracy is reported too.

Datasets (see ``shared/papers/NOTES.md``, "Public numbers on Sudoku data"):

* ``"satnet-like"``: 31–42 givens, the range of SATNet's 10k boards (Wang et al. 2019);
* ``"rrn-like"``: 22–34 givens. RRN's boards (Palm et al. 2018) have 17–34 givens: Royle's
  17-clue puzzles plus 0–17 givens added back from the solution. Our generator digs holes at random,
  which makes boards with 22–26 givens at 20–30 per second, exactly 21 at 1–2/s and 20 at 0.3/s
  on one core, so the default stops at 22: harder boards than SATNet's, easier than RRN's low end.
  Going lower needs seeds the generator cannot make quickly (a catalogue of 17-clue puzzles, as RRN
  used, with digit/row/column symmetries) or a much longer search; ``generate`` accepts lower
  ranges and says when it gives up.

Generated sets are cached as ``.npz`` files keyed by (config, split, format version), written
atomically (temporary file + ``os.replace``), and verified on load (checksum, shapes, every
solution a valid grid agreeing with its givens); a file that fails is rebuilt, never trusted.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from energylab.tasks.sudoku_generate import generate
from energylab.tasks.sudoku_solver import as_board, count_solutions, solve

CACHE_VERSION = 1  # bump when the generator or the file layout changes: old caches are then ignored


@dataclass(frozen=True)
class SudokuSetConfig:
    """A generated train/test pair of Sudoku sets."""

    givens: tuple[int, int]  # inclusive range of givens per puzzle, each count equally often
    n_train: int = 9000  # the papers train on 9k boards (SATNet 9k/1k; Hyper-SET's 9k RRN subset)
    n_test: int = 1000  # and test on 1k
    seed: int = 0  # train uses generate(seed=2*seed), test 2*seed+1: disjoint random streams


NAMED_SETS = {
    "satnet-like": SudokuSetConfig(givens=(31, 42)),  # SATNet's range: in-distribution
    "rrn-like": SudokuSetConfig(givens=(22, 34)),  # RRN's upper range; 17–21 not reachable quickly
}


class SudokuDataset(Dataset):
    """Boards as (tokens, target, mask) triples of shape (81,) each.

    tokens: int64 in 0..9 (0 = blank); target: int64 class index ``solution - 1`` in 0..8;
    mask: bool, True on blanks (where the loss and the accuracy are taken).
    ``puzzles`` and ``solutions`` keep the (n, 9, 9) int arrays for solvers and figures.
    """

    def __init__(self, puzzles, solutions):
        puzzles, solutions = _check_pairs(puzzles, solutions)
        self.puzzles, self.solutions = puzzles, solutions
        n = len(puzzles)
        self.tokens = torch.from_numpy(puzzles.reshape(n, 81).astype(np.int64))  # (n, 9, 9) -> (n, 81)
        self.target = torch.from_numpy(solutions.reshape(n, 81).astype(np.int64) - 1)  # (n, 81) in 0..8
        self.mask = self.tokens == 0  # (n, 81) True on blanks

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i):
        return self.tokens[i], self.target[i], self.mask[i]

    def givens(self) -> np.ndarray:
        """Number of givens of each board, shape (n,)."""
        return (self.puzzles > 0).reshape(len(self), 81).sum(1)


def _check_pairs(puzzles, solutions, name: str = "puzzles") -> tuple[np.ndarray, np.ndarray]:
    """Validate (n, 9, 9) puzzles and solutions: solutions are valid grids that agree with the givens."""
    p, s = np.asarray(puzzles), np.asarray(solutions)
    if p.ndim != 3 or p.shape[1:] != (9, 9) or p.shape != s.shape:
        raise ValueError(f"{name} and solutions must both have shape (n, 9, 9), got {p.shape} and {s.shape}")
    if p.dtype.kind not in "iu" or s.dtype.kind not in "iu":
        raise ValueError(f"{name} and solutions must be integer arrays, got {p.dtype} and {s.dtype}")
    if p.min(initial=0) < 0 or p.max(initial=0) > 9:
        raise ValueError(f"{name} values must lie in 0..9")
    digits = np.arange(1, 10)
    boxes = s.reshape(-1, 3, 3, 3, 3).transpose(0, 1, 3, 2, 4).reshape(-1, 9, 9)  # (n, box, cell in box)
    for what, groups in (("row", s), ("column", s.transpose(0, 2, 1)), ("box", boxes)):
        bad = ~(np.sort(groups, axis=2) == digits).all(axis=(1, 2))
        if bad.any():
            raise ValueError(f"solutions: board {int(np.argmax(bad))} is not a valid grid (a {what} repeats a digit)")
    clash = ((p > 0) & (p != s)).any(axis=(1, 2))
    if clash.any():
        raise ValueError(f"{name}: board {int(np.argmax(clash))} has givens that disagree with its solution")
    return p.astype(np.int64), s.astype(np.int64)


def sudoku_accuracy(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """Cell and board accuracy.

    pred: (B, 81) class indices in 0..8 or (B, 81, 9) logits; target: (B, 81) in 0..8; mask: (B, 81)
    bool, True where a cell counts (the blanks). Cell accuracy = right cells / counted cells; a board
    is right iff all its counted cells are (givens are copied from the input, so with the blank mask
    this is "all 81 cells right"). Without a mask every cell counts.
    """
    if not isinstance(pred, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise TypeError("pred and target must be torch tensors")
    if pred.dim() == 3:
        pred = pred.argmax(-1)  # (B, 81, 9) -> (B, 81)
    if pred.shape != target.shape or target.dim() != 2:
        raise ValueError(f"pred must have shape (B, 81) or (B, 81, 9) matching target (B, 81); "
                         f"got {tuple(pred.shape)} and {tuple(target.shape)}")
    if mask is None:
        mask = torch.ones_like(target, dtype=torch.bool)
    elif mask.shape != target.shape or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor of shape {tuple(target.shape)}, "
                         f"got {mask.dtype} of shape {tuple(mask.shape)}")
    right = (pred == target) | ~mask  # (B, 81): uncounted cells never spoil a board
    counted = mask.sum().clamp(min=1)
    return {"cell": float(((pred == target) & mask).sum() / counted), "board": float(right.all(1).float().mean())}


# --- generated sets, cached ----------------------------------------------------------------------
def default_cache_dir() -> Path:
    """``$ENERGYLAB_CACHE/sudoku`` if set, else ``~/.cache/energylab/sudoku``."""
    root = os.environ.get("ENERGYLAB_CACHE") or Path.home() / ".cache" / "energylab"
    return Path(root) / "sudoku"


def _cache_key(config: SudokuSetConfig, split: str) -> str:
    spec = {"config": asdict(config), "split": split, "version": CACHE_VERSION}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _checksum(puzzles: np.ndarray, solutions: np.ndarray) -> str:
    return hashlib.sha256(puzzles.astype(np.int8).tobytes() + solutions.astype(np.int8).tobytes()).hexdigest()


def _load_verified(path: Path, key: str, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The arrays stored at ``path`` if they pass every check, else None (with a warning if the file exists)."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            puzzles, solutions = f["puzzles"], f["solutions"]
            meta = json.loads(str(f["meta"]))
        ok = (meta.get("key") == key and puzzles.shape == (n, 9, 9)
              and meta.get("checksum") == _checksum(puzzles, solutions))
        if ok:
            return _check_pairs(puzzles, solutions)
        problem = "key, shape or checksum mismatch"
    except Exception as err:  # a truncated or garbled file can fail in many ways
        problem = f"{type(err).__name__}: {err}"
    warnings.warn(f"sudoku cache {path} is corrupt ({problem}); rebuilding it", RuntimeWarning, stacklevel=3)
    return None


def _save_atomic(path: Path, puzzles: np.ndarray, solutions: np.ndarray, key: str) -> None:
    """Write next to ``path`` then rename, so a crash never leaves a half-written cache file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = json.dumps({"key": key, "checksum": _checksum(puzzles, solutions)})
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, puzzles=puzzles.astype(np.int8), solutions=solutions.astype(np.int8),
                                meta=np.array(meta))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sudoku_puzzles(config: SudokuSetConfig | str, split: str = "train", cache_dir: str | Path | None = None,
                   progress: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(puzzles, solutions), each (n, 9, 9) int64, for one split of a generated set; cached on disk.

    ``config`` is a ``SudokuSetConfig`` or a name in ``NAMED_SETS``; ``cache_dir=None`` uses
    ``default_cache_dir()``. The first call generates and writes the file; later calls load it.
    """
    if isinstance(config, str):
        if config not in NAMED_SETS:
            raise ValueError(f"config must be a SudokuSetConfig or one of {sorted(NAMED_SETS)}, got {config!r}")
        config = NAMED_SETS[config]
    if not isinstance(config, SudokuSetConfig):
        raise TypeError(f"config must be a SudokuSetConfig or a name, got {type(config).__name__}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    n = config.n_train if split == "train" else config.n_test
    key = _cache_key(config, split)
    lo, hi = config.givens
    path = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = path / f"sudoku-{lo}-{hi}-{split}-{n}-{key[:16]}.npz"
    cached = _load_verified(path, key, n)
    if cached is not None:
        return cached
    puzzles, solutions = generate(n, config.givens, seed=2 * config.seed + (split == "test"), progress=progress)
    _save_atomic(path, puzzles, solutions, key)
    return puzzles, solutions


def sudoku_dataset(config: SudokuSetConfig | str = "satnet-like", split: str = "train",
                   cache_dir: str | Path | None = None, progress: bool | None = None) -> SudokuDataset:
    """The torch Dataset for one split of a generated set (see ``sudoku_puzzles``)."""
    return SudokuDataset(*sudoku_puzzles(config, split, cache_dir, progress))


# --- public files -----------------------------------------------------------------------------
def load_satnet(directory: str | Path, split: str = "train", n_train: int = 9000) -> SudokuDataset:
    """SATNet's Sudoku files (Wang et al. 2019): ``features.pt`` and ``labels.pt`` in ``directory``.

    Assumed layout (SATNet's released ``sudoku.zip``): float tensors of shape (n, 9, 9, 9), the
    last axis one-hot over digits 1..9; ``features`` is all-zero on blanks, ``labels`` one-hot
    everywhere. SATNet trains on the first 9,000 boards and tests on the rest: ``split`` is
    "train", "test" (cut at ``n_train``) or "all".
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    directory = Path(directory)
    arrays = []
    for fname in ("features.pt", "labels.pt"):
        t = torch.load(directory / fname, map_location="cpu", weights_only=True)
        if not isinstance(t, torch.Tensor) or t.dim() != 4 or tuple(t.shape[1:]) != (9, 9, 9):
            raise ValueError(f"{directory / fname}: expected a tensor of shape (n, 9, 9, 9), got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        ones = t.sum(-1)  # (n, 9, 9): 1 where a digit is set, 0 on blanks
        if not (((ones == 0) | (ones == 1)).all() and ((t == 0) | (t == 1)).all()):
            raise ValueError(f"{directory / fname}: expected a one-hot last axis (or all zeros for a blank)")
        arrays.append(((t.argmax(-1) + 1) * (ones > 0)).numpy().astype(np.int64))  # (n, 9, 9) digits, 0 = blank
    puzzles, solutions = arrays
    if (solutions == 0).any():
        raise ValueError(f"{directory / 'labels.pt'}: every cell of a solution must be set")
    if split == "all":
        return SudokuDataset(puzzles, solutions)
    cut = slice(0, n_train) if split == "train" else slice(n_train, None)
    return SudokuDataset(puzzles[cut], solutions[cut])


def load_rrn(directory: str | Path, split: str = "train", limit: int | None = None) -> SudokuDataset:
    """RRN's Sudoku files (Palm et al. 2018): ``{train,valid,test}.csv`` in ``directory``.

    Each row is ``puzzle,solution``: 81 characters each, row-major, '0' (or '.') for a blank; a
    header row, if any, is skipped. ``limit`` keeps the first rows only (Hyper-SET trains on a 9k
    subset of the training file and tests on 1k).
    """
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    path = Path(directory) / f"{split}.csv"
    puzzles, solutions = [], []
    with open(path) as f:
        for line_no, line in enumerate(f, 1):
            if limit is not None and len(puzzles) >= limit:
                break
            fields = line.strip().split(",")
            if not line.strip() or (line_no == 1 and not fields[0].replace(".", "0").isdigit()):
                continue  # blank line or header
            if len(fields) != 2 or any(len(x) != 81 for x in fields):
                raise ValueError(f"{path}:{line_no}: expected 'puzzle,solution' with 81 digits each")
            q, a = (x.replace(".", "0") for x in fields)
            if not (q.isascii() and q.isdigit() and a.isascii() and a.isdigit()):
                raise ValueError(f"{path}:{line_no}: expected digits 0-9 or '.'")
            puzzles.append(q)
            solutions.append(a)
    if not puzzles:
        raise ValueError(f"{path}: no boards found")
    shape = (len(puzzles), 9, 9)  # (n * 81,) characters -> (n, 9, 9) digits

    def digits(rows):
        return (np.frombuffer("".join(rows).encode(), dtype=np.uint8) - ord("0")).astype(np.int64).reshape(shape)

    return SudokuDataset(digits(puzzles), digits(solutions))


__all__ = ["SudokuSetConfig", "NAMED_SETS", "SudokuDataset", "sudoku_accuracy", "sudoku_puzzles", "sudoku_dataset",
           "load_satnet", "load_rrn", "default_cache_dir", "solve", "count_solutions", "generate", "as_board"]
