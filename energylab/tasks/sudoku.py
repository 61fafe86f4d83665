"""Sudoku as a learning task: named datasets (cached), a torch Dataset, accuracy, public-file loaders.

Format (the one SATNet-style and Hyper-SET-style training uses): a board of size n (4, 6 or 9) is N = n²
tokens in row-major order, token 0 = blank and 1..n = a given digit; the target is the solution as a class
index ``digit - 1`` in 0..n-1; the loss mask is True on blanks only (givens are copied, not learnt).
A board counts as solved only if every cell is right; cell accuracy is reported too.

Datasets (the givens ranges of SATNet, Wang et al. 2019, and RRN, Palm et al. 2018), an in-distribution (ID) and a
harder out-of-distribution (OOD) range of givens per size, as papers 003/004 train on SATNet's range and test
on RRN's:

* 9×9 ``"satnet-like"`` (ID): 31–42 givens, the range of SATNet's 10k boards (Wang et al. 2019);
* 9×9 ``"rrn-like"`` (OOD): 22–34 givens. RRN's boards (Palm et al. 2018) have 17–34 givens: Royle's
  17-clue puzzles plus 0–17 givens added back from the solution. Our generator digs holes at random,
  which makes boards with 22–26 givens at 20–30 per second, exactly 21 at 1–2/s and 20 at 0.3/s
  on one core, so this set stops at 22: harder boards than SATNet's, easier than RRN's low end.
  ``"rrn-17"`` (17–34) is built as RRN's was, from a catalogue of hard puzzles (17–21 givens) under the
  Sudoku symmetries with givens added back: see :mod:`energylab.tasks.sudoku_hard`.
* ``"9x9-search"`` and ``"6x6-search"``: only boards that propagation (naked and hidden singles) leaves unfinished,
  each unique (:mod:`energylab.tasks.sudoku_search`; 9×9 from ``rrn-17``'s generator, 6×6 minimal digs). No
  unique 4×4 puzzle needs search, so there is no 4×4 one.
* 6×6 (2×3 boxes) ``"6x6-id"``: 14–19 givens (39–53% of the cells, SATNet's share); ``"6x6-ood"``: 9–12.
  Minimal 6×6 puzzles dug at random have 8–12 givens (8: 0.6%, 9: 18%, 10: 54%, 11: 25%, 12: 3%), so
  9 is the lowest count the generator reaches at a good rate (about 900–1,000 boards/s at 9–12 on one core,
  6,000/s at 14–19; 4×4: 16,000/s at 6–8, 7,000/s at 4–5).
* 4×4 (2×2 boxes) ``"4x4-id"``: 6–8 givens (38–50%); ``"4x4-ood"``: 4–5, the fewest possible (minimal 4×4
  puzzles dug at random have 4 givens 66% of the time, 5 33%, 6 0.4%).

Generated sets are cached as ``.npz`` files keyed by (config, split, format version), written
atomically (temporary file + ``os.replace``), and verified on load (checksum, shapes, every
solution a valid grid agreeing with its givens); a file that fails is rebuilt, never trusted.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from energylab._checks import check_bool, check_int
from energylab.engine.runs import atomic_write
from energylab.tasks.sudoku_generate import ID_GIVENS, OOD_GIVENS, generate
from energylab.tasks.sudoku_solver import MIN_GIVENS, SHAPES, as_board, check_pairs, count_solutions, solve

CACHE_VERSION = 1  # bump when the generator or the file layout changes: old caches are then ignored


@dataclass(frozen=True)
class SudokuSetConfig:
    """A generated train/test pair of Sudoku sets."""

    givens: tuple[int, int]  # inclusive range of givens per puzzle, each count equally often
    n_train: int = 9000  # the papers train on 9k boards (SATNet 9k/1k; Hyper-SET's 9k RRN subset)
    n_test: int = 1000  # and test on 1k
    seed: int = 0  # train uses generate(seed=2*seed), test 2*seed+1: disjoint random streams
    size: int = 9  # board side: 4 (2×2 boxes), 6 (2×3 boxes) or 9 (3×3 boxes)
    hard: bool = False  # built from the catalogue of hard puzzles by symmetry (energylab.tasks.sudoku_hard)
    search: bool = False  # only boards propagation cannot finish (energylab.tasks.sudoku_search): sizes 6 and 9

    def __post_init__(self):
        size = check_int("size", self.size)
        if size not in SHAPES:
            raise ValueError(f"size must be one of {sorted(SHAPES)} (board sides with boxes), got {size}")
        if check_bool("hard", self.hard) and size != 9:
            raise ValueError(f"hard=True sets exist for 9x9 boards only, got size={size}")
        if check_bool("search", self.search) and size == 4:
            raise ValueError("search=True sets exist for 6x6 and 9x9 boards only: no unique 4x4 puzzle needs search")
        if not isinstance(self.givens, (tuple, list)) or len(self.givens) != 2:
            raise ValueError(f"givens must be a pair (lo, hi) of ints, got {self.givens!r}")
        lo, hi = (check_int(f"givens[{i}]", g) for i, g in enumerate(self.givens))
        least = 17 if self.hard or (self.search and size == 9) else MIN_GIVENS[size]
        if not least <= lo <= hi <= size * size - 1:
            raise ValueError(f"givens must satisfy {least} <= lo <= hi <= {size * size - 1} for {size}x{size} "
                             f"boards (fewer than {least} givens has no unique puzzle), got {tuple(self.givens)}")
        check_int("n_train", self.n_train, minimum=1)
        check_int("n_test", self.n_test, minimum=1)
        check_int("seed", self.seed, minimum=0)


NAMED_SETS = {
    "satnet-like": SudokuSetConfig(givens=ID_GIVENS[9]),  # SATNet's range: in-distribution
    "rrn-like": SudokuSetConfig(givens=OOD_GIVENS[9]),  # RRN's upper range, generated directly
    "rrn-17": SudokuSetConfig(givens=(17, 34), hard=True),  # RRN's whole range, by symmetry of a catalogue
    "6x6-id": SudokuSetConfig(givens=ID_GIVENS[6], size=6),
    "6x6-ood": SudokuSetConfig(givens=OOD_GIVENS[6], size=6),
    "4x4-id": SudokuSetConfig(givens=ID_GIVENS[4], size=4),
    "4x4-ood": SudokuSetConfig(givens=OOD_GIVENS[4], size=4),
    "9x9-search": SudokuSetConfig(givens=(17, 34), search=True),  # propagation-proof: needs search
    "6x6-search": SudokuSetConfig(givens=(8, 12), size=6, search=True),
}
SPLITS = {9: ("satnet-like", "rrn-like"), 6: ("6x6-id", "6x6-ood"), 4: ("4x4-id", "4x4-ood")}  # size -> (ID, OOD)


class SudokuDataset(Dataset):
    """Boards as (tokens, target, mask) triples of shape (N,) each, N = size² (81 at 9×9).

    tokens: int64 in 0..size (0 = blank); target: int64 class index ``solution - 1`` in 0..size-1;
    mask: bool, True on blanks (where the loss and the accuracy are taken).
    ``puzzles`` and ``solutions`` keep the (n, size, size) int arrays for solvers and figures; ``size`` is
    taken from their shape.
    """

    def __init__(self, puzzles, solutions):
        puzzles, solutions = check_pairs(puzzles, solutions)
        self.puzzles, self.solutions = puzzles, solutions
        n, self.size = len(puzzles), puzzles.shape[1]
        cells = self.size ** 2
        self.tokens = torch.from_numpy(puzzles.reshape(n, cells).astype(np.int64))  # (n, s, s) -> (n, N)
        self.target = torch.from_numpy(solutions.reshape(n, cells).astype(np.int64) - 1)  # (n, N) in 0..s-1
        self.mask = self.tokens == 0  # (n, N) True on blanks

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i):
        return self.tokens[i], self.target[i], self.mask[i]

    def givens(self) -> np.ndarray:
        """Number of givens of each board, shape (n,)."""
        return (self.puzzles > 0).reshape(len(self), -1).sum(1)


def sudoku_accuracy(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    """Cell and board accuracy.

    pred: (B, N) class indices or (B, N, size) logits; target: (B, N) class indices; mask: (B, N)
    bool, True where a cell counts (the blanks). N = size² (81 at 9×9). Cell accuracy = right cells / counted
    cells; a board is right iff all its counted cells are (givens are copied from the input, so with the
    blank mask this is "all N cells right"). Without a mask every cell counts. Exact: integer counts divided
    in float64 (Python floats).
    """
    if not isinstance(pred, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise TypeError("pred and target must be torch tensors")
    if target.is_floating_point() or target.dtype == torch.bool:
        raise TypeError(f"target must hold integer class indices, got dtype {target.dtype}")
    if pred.dim() == 3:
        if pred.is_floating_point() and not bool(torch.isfinite(pred).all()):
            raise ValueError("pred: the logits hold NaN or inf (their argmax would be an arbitrary digit)")
        pred = pred.argmax(-1)  # (B, 81, 9) -> (B, 81)
    elif pred.is_floating_point() or pred.dtype == torch.bool:
        raise TypeError(f"pred of shape (B, N) must hold integer class indices (or pass (B, N, size) logits), "
                        f"got dtype {pred.dtype}")
    if pred.shape != target.shape or target.dim() != 2:
        raise ValueError(f"pred must have shape (B, N) or (B, N, size) matching target (B, N); "
                         f"got {tuple(pred.shape)} and {tuple(target.shape)}")
    if mask is None:
        mask = torch.ones_like(target, dtype=torch.bool)
    elif mask.shape != target.shape or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor of shape {tuple(target.shape)}, "
                         f"got {mask.dtype} of shape {tuple(mask.shape)}")
    if len(target) == 0:
        raise ValueError("target holds no board (B = 0): an accuracy over no boards is undefined")
    right, counted, solved = sudoku_counts(pred, target, mask)
    return {"cell": right / max(counted, 1), "board": solved / max(len(target), 1)}


def sudoku_counts(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> tuple[int, int, int]:
    """(right cells, counted cells, solved boards) of the digits ``pred`` (B, N) against ``target`` (B, N) on the
    cells ``mask`` (B, N bool) marks: the one definition of a Sudoku score, behind :func:`sudoku_accuracy` and the
    models' evaluation (:func:`energylab.tasks.sudoku_harness.test_time` sums them over chunks). A board is solved
    iff all its counted cells are right: uncounted cells never spoil it."""
    ok = pred == target
    return int((ok & mask).sum()), int(mask.sum()), int((ok | ~mask).all(1).sum())


# --- generated sets, cached ----------------------------------------------------------------------
def default_cache_dir() -> Path:
    """``$ENERGYLAB_CACHE/sudoku`` if set, else ``~/.cache/energylab/sudoku``."""
    root = os.environ.get("ENERGYLAB_CACHE") or Path.home() / ".cache" / "energylab"
    return Path(root) / "sudoku"


def _cache_key(config: SudokuSetConfig, split: str) -> str:
    spec = {"config": asdict(config), "split": split, "version": CACHE_VERSION}
    # fields added later: 9×9 keys stay what they were
    for name, default in (("size", 9), ("hard", False), ("search", False)):
        if spec["config"][name] == default:
            del spec["config"][name]
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _checksum(puzzles: np.ndarray, solutions: np.ndarray) -> str:
    return hashlib.sha256(puzzles.astype(np.int8).tobytes() + solutions.astype(np.int8).tobytes()).hexdigest()


def _load_verified(path: Path, key: str, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The arrays stored at ``path`` if they pass every check, else None (with a warning if the file exists)."""
    if not path.exists():
        return None
    try:
        with open(path, "rb") as raw, np.load(raw, allow_pickle=False) as f:  # closed even when np.load fails
            puzzles, solutions = f["puzzles"], f["solutions"]
            meta = json.loads(str(f["meta"]))
        ok = (meta.get("key") == key and puzzles.shape[:1] == (n,)
              and meta.get("checksum") == _checksum(puzzles, solutions))
        if ok:
            return check_pairs(puzzles, solutions)
        problem = "key, shape or checksum mismatch"
    except Exception as err:  # a truncated or garbled file can fail in many ways
        problem = f"{type(err).__name__}: {err}"
    warnings.warn(f"sudoku cache {path} is corrupt ({problem}); rebuilding it", RuntimeWarning, stacklevel=3)
    return None


def _save_atomic(path: Path, puzzles: np.ndarray, solutions: np.ndarray, key: str) -> None:
    """Write next to ``path`` then rename (:func:`energylab.engine.results.atomic_write`), so a crash never leaves a
    half-written cache file; the file gets the mode the umask gives (a shared cache stays readable to others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = json.dumps({"key": key, "checksum": _checksum(puzzles, solutions)})
    atomic_write(str(path), lambda f: np.savez_compressed(f, puzzles=puzzles.astype(np.int8),
                                                          solutions=solutions.astype(np.int8), meta=np.array(meta)),
                 binary=True)


def sudoku_puzzles(config: SudokuSetConfig | str, split: str = "train", cache_dir: str | Path | None = None,
                   progress: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(puzzles, solutions), each (n, size, size) int64, for one split of a generated set; cached on disk.

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
    if path.exists() and not path.is_dir():
        raise ValueError(f"cache_dir={str(path)!r} is a file, not a folder")
    prefix = "sudoku" if config.size == 9 else f"sudoku{config.size}"
    kind = ("-hard" if config.hard else "") + ("-search" if config.search else "")
    path = path / f"{prefix}-{lo}-{hi}{kind}-{split}-{n}-{key[:16]}.npz"
    cached = _load_verified(path, key, n)
    if cached is not None:
        return cached
    seed = 2 * config.seed + (split == "test")
    if config.search:
        from energylab.tasks.sudoku_search import generate_search

        puzzles, solutions, _ = generate_search(n, config.size, seed=seed, givens=config.givens, progress=progress)
    elif config.hard:
        from energylab.tasks.sudoku_hard import generate_hard

        if config.size != 9:
            raise ValueError("hard=True sets exist for 9x9 boards only")
        puzzles, solutions = generate_hard(n, config.givens, seed=seed)
    else:
        puzzles, solutions = generate(n, config.givens, seed=seed, progress=progress, size=config.size)
    try:
        _save_atomic(path, puzzles, solutions, key)
    except OSError as err:
        raise ValueError(f"cannot write the sudoku cache in {str(path.parent)!r} ({err}); pass a writable "
                         f"cache_dir or set ENERGYLAB_CACHE") from None
    return puzzles, solutions


def sudoku_dataset(config: SudokuSetConfig | str = "satnet-like", split: str = "train",
                   cache_dir: str | Path | None = None, progress: bool | None = None) -> SudokuDataset:
    """The torch Dataset for one split of a generated set (see ``sudoku_puzzles``)."""
    return SudokuDataset(*sudoku_puzzles(config, split, cache_dir, progress))


# --- public files -----------------------------------------------------------------------------
def _read_public(path: Path, source: str, read):
    """``read(binary file)`` of a public data file; a missing file is a FileNotFoundError and an unreadable one a
    ValueError, both naming the file."""
    if not path.is_file():
        raise FileNotFoundError(f"{source} file {path} not found: download the public data and pass its folder")
    try:
        with open(path, "rb") as f:
            return read(f)
    except Exception as err:  # noqa: BLE001 - a truncated archive or a binary file fails in many ways
        first = str(err).splitlines()[0] if str(err) else ""
        raise ValueError(f"{path} is not a readable {source} file ({type(err).__name__}: {first[:200]})") from None


def load_satnet(directory: str | Path, split: str = "train", n_train: int = 9000) -> SudokuDataset:
    """SATNet's Sudoku files (Wang et al. 2019): ``features.pt`` and ``labels.pt`` in ``directory``.

    Assumed layout (SATNet's released ``sudoku.zip``): float tensors of shape (n, 9, 9, 9), the
    last axis one-hot over digits 1..9; ``features`` is all-zero on blanks, ``labels`` one-hot
    everywhere. SATNet trains on the first 9,000 boards and tests on the rest: ``split`` is
    "train", "test" (cut at ``n_train``) or "all".
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    n_train = check_int("n_train", n_train, minimum=0)
    if not isinstance(directory, (str, Path)):
        raise TypeError(f"directory must be a path (str or pathlib.Path), got {type(directory).__name__}")
    directory = Path(directory)
    arrays = []
    for fname in ("features.pt", "labels.pt"):
        t = _read_public(directory / fname, "SATNet", lambda f: torch.load(f, map_location="cpu", weights_only=True))
        if not isinstance(t, torch.Tensor) or t.dim() != 4 or tuple(t.shape[1:]) != (9, 9, 9):
            raise ValueError(f"{directory / fname}: expected a tensor of shape (n, 9, 9, 9), got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        if t.layout != torch.strided or t.is_complex() or t.is_quantized:  # were raw argmax / sparse-kernel errors
            raise ValueError(f"{directory / fname}: expected a dense real tensor, got layout {t.layout} and dtype "
                             f"{t.dtype}")
        if t.dtype == torch.bool:  # a one-hot of booleans reads as one of 0/1 (argmax has no bool kernel)
            t = t.to(torch.uint8)
        ones = t.sum(-1)  # (n, 9, 9): 1 where a digit is set, 0 on blanks
        if not (((ones == 0) | (ones == 1)).all() and ((t == 0) | (t == 1)).all()):
            raise ValueError(f"{directory / fname}: expected a one-hot last axis (or all zeros for a blank)")
        arrays.append(((t.argmax(-1) + 1) * (ones > 0)).numpy().astype(np.int64))  # (n, 9, 9) digits, 0 = blank
    puzzles, solutions = arrays
    if (solutions == 0).any():
        raise ValueError(f"{directory / 'labels.pt'}: every cell of a solution must be set")
    if puzzles.shape != solutions.shape:
        raise ValueError(f"{directory}: features.pt holds {len(puzzles)} boards, labels.pt {len(solutions)}")
    cut = slice(None) if split == "all" else slice(0, n_train) if split == "train" else slice(n_train, None)
    if len(puzzles) == 0:
        raise ValueError(f"{directory}: features.pt and labels.pt hold no board")
    if len(puzzles[cut]) == 0:
        raise ValueError(f"{directory}: split={split!r} holds no board: the files hold {len(puzzles)} boards and "
                         f"n_train={n_train} (train: the first n_train, test: the rest; pass an n_train in 1.."
                         f"{max(len(puzzles) - 1, 0)} or split='all')")
    return _dataset_of(directory, puzzles[cut], solutions[cut])


def _dataset_of(source: Path, puzzles, solutions) -> SudokuDataset:
    """:class:`SudokuDataset` of boards read from ``source``; a ValueError about them names the file or folder."""
    try:
        return SudokuDataset(puzzles, solutions)
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None


def load_rrn(directory: str | Path, split: str = "train", limit: int | None = None,
             seed: int | None = None) -> SudokuDataset:
    """RRN's Sudoku files (Palm et al. 2018): ``{train,valid,test}.csv`` in ``directory``.

    Each row is ``puzzle,solution``: 81 characters each, row-major, '0' (or '.') for a blank; a
    header row, if any, is skipped. ``limit=k`` keeps k boards: with ``seed=None`` the first k rows;
    with a seed a random sample of k rows (``numpy.random.default_rng(seed)``, without replacement, kept in
    file order), as Hyper-SET's code takes its 9k training / 1k test subsets at random. The book and
    ``energylab.experiments.sudoku`` use the seeded sample (seed 0) when the files are present (the first k
    rows are a fair subset only if the file is shuffled, which we cannot check here).
    """
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    if seed is not None:  # a NumPy int was refused, True taken as seed 1
        seed = check_int("seed", seed, minimum=0)
    if limit is not None:
        limit = check_int("limit", limit, minimum=1)
    first = None if seed is not None else limit  # a random sample needs every row first
    path = Path(directory) / f"{split}.csv"
    # utf-8-sig: a byte-order mark made the first board read as a header and dropped without a word
    lines = _read_public(path, "RRN", lambda f: f.read().decode("utf-8-sig").splitlines())
    puzzles, solutions = [], []
    for line_no, line in enumerate(lines, 1):
        if first is not None and len(puzzles) >= first:
            break
        fields = line.strip().split(",")
        header = line_no == 1 and not fields[0].replace(".", "0").isdigit() and len(fields[0]) != 81
        if not line.strip() or header:
            continue  # blank line or header (a first board of 81 characters with a bad one is an error, not skipped)
        if len(fields) != 2 or any(len(x) != 81 for x in fields):
            raise ValueError(f"{path}:{line_no}: expected 'puzzle,solution' with 81 digits each")
        q, a = (x.replace(".", "0") for x in fields)
        if not (q.isascii() and q.isdigit() and a.isascii() and a.isdigit()):
            raise ValueError(f"{path}:{line_no}: expected digits 0-9 or '.'")
        puzzles.append(q)
        solutions.append(a)
    if not puzzles:
        raise ValueError(f"{path}: no boards found")
    if seed is not None and limit is not None and limit < len(puzzles):
        keep = np.sort(np.random.default_rng(seed).choice(len(puzzles), size=limit, replace=False))
        puzzles, solutions = [puzzles[i] for i in keep], [solutions[i] for i in keep]
    shape = (len(puzzles), 9, 9)  # (n * 81,) characters -> (n, 9, 9) digits

    def digits(rows):
        return (np.frombuffer("".join(rows).encode(), dtype=np.uint8) - ord("0")).astype(np.int64).reshape(shape)

    return _dataset_of(path, digits(puzzles), digits(solutions))


__all__ = ["SudokuSetConfig", "NAMED_SETS", "SPLITS", "SudokuDataset", "sudoku_accuracy", "sudoku_counts",
           "sudoku_puzzles", "sudoku_dataset", "load_satnet", "load_rrn", "default_cache_dir", "solve",
           "count_solutions", "generate", "as_board"]
