"""Sudoku boards that need search: unique puzzles that constraint propagation alone leaves unfinished (issue 51).

Naked and hidden singles repeated until nothing changes (``Geometry.propagated``, the rule behind
``energylab.baselines.propagate_boards``) complete nearly every board of the generated sets, so a model that solves
them may have learnt propagation and nothing more. The boards here are the ones it leaves with blanks: each is
certified unique (the exact solver finds exactly one solution) and comes with a **difficulty**, the number of
guesses (values tried at a branching cell, :meth:`~energylab.tasks.sudoku_solver.Geometry.search`) that the exact
solver — propagation, then depth-first search on the cell with the fewest candidates, values in increasing order —
makes before it reaches the solution. Every board here has difficulty >= 1; a board propagation completes has 0.

Where the candidates come from, and how many survive (measured on one core, issue 51):

* **9×9**: boards of :func:`energylab.tasks.sudoku_hard.generate_hard` (17–34 givens). About 14% of them defeat
  propagation (272 of 2,000 at seed 1), almost all at 19–28 givens (20–22: half of the boards; 17 and 18: none,
  since the catalogue's few 17/18-clue seeds all fall to singles; 32–34: none). The survivors are symmetric views
  of the catalogue's puzzles with givens added back, so they share its seeds (see that module).
* **6×6**: minimal puzzles dug at random (``energylab.tasks.sudoku_generate``: a random grid, cells blanked while
  the puzzle stays unique); about 5% defeat propagation (142 of 3,000 digs at 9–12 givens).
* **4×4**: none exist. Every one of the 565,820 unique puzzles whose solution has first row 1 2 3 4 (all 12 such
  grids, all 2^16 subsets of givens; by relabelling the digits that covers all 13,579,680 unique 4×4 puzzles) is
  completed by naked and hidden singles (an exhaustive check, 31 s; ``tests/tasks/test_sudoku_search.py`` repeats
  it on one grid) — by naked singles alone, even (the same check with ``hidden=False``: 0 left open). So
  :func:`generate_search` refuses ``size=4``.

Difficulty of the named test sets (1,000 boards each, ``energylab.tasks.sudoku.NAMED_SETS``): ``"9x9-search"``
median 3 guesses, mean 5.4, 90th percentile 11, max 98 (1 guess: 22%, 2: 26%, more than 20: 3.5%);
``"6x6-search"`` median 2, mean 1.9, max 10 (1 guess: 46%). Propagation still decides about 31% (9×9) and 33%
(6×6) of their blanks, and no board. Rates: see :func:`generate_search`. Same seed, same boards.
"""
from __future__ import annotations

import random

import numpy as np

from energylab._checks import check_int
from energylab.tasks.sudoku_generate import dig, random_grid
from energylab.tasks.sudoku_hard import generate_hard
from energylab.tasks.sudoku_solver import MIN_GIVENS, SHAPES, geometry

SEARCH_SIZES = (6, 9)  # board sizes that have propagation-proof unique puzzles (4×4 has none: module docstring)
SEARCH_GIVENS = {6: (8, 12), 9: (17, 34)}  # the candidates' givens: minimal 6×6 digs, generate_hard's range


def needs_search(puzzle) -> bool:
    """True iff propagation alone (naked and hidden singles) leaves a blank in ``puzzle`` (an n×n board, 0 =
    blank, assumed valid), i.e. the exact solver must guess; a board whose givens contradict themselves is False."""
    p = np.asarray(puzzle)
    cand = geometry(p.shape[0]).propagated([int(v) for v in p.reshape(-1)])
    return cand is not None and any(m & (m - 1) for m in cand)


def search_difficulty(puzzles) -> np.ndarray:
    """The difficulty of each board: (n, s, s) (or one (s, s)) ints -> (n,) int64 (or an int).

    The number of guesses the exact solver makes before its first solution: propagation, then depth-first search
    on the cell with the fewest candidates, values in increasing order (``Geometry.solutions(flat, 1)`` with its
    guess counter). 0 when propagation completes the board; -1 for a board without solution.
    """
    p = np.asarray(puzzles)
    if p.ndim == 2:
        return int(search_difficulty(p[None])[0])
    if p.ndim != 3 or p.shape[1] != p.shape[2] or p.shape[1] not in SHAPES:
        raise ValueError(f"puzzles must have shape (n, s, s) with s in {sorted(SHAPES)}, got {p.shape}")
    geo = geometry(p.shape[1])
    out = np.zeros(len(p), dtype=np.int64)
    for b, flat in enumerate(p.reshape(len(p), -1).tolist()):
        guesses = [0]
        out[b] = guesses[0] if geo.solutions(flat, 1, guesses=guesses) else -1
    return out


def _candidates(size: int, givens: tuple[int, int], rng: np.random.Generator, batch: int):
    """Yield (puzzle, solution) flat lists, ``batch`` at a time: generate_hard boards (9×9) or minimal digs (6×6)."""
    if size == 9:
        while True:
            puzzles, solutions = generate_hard(batch, givens, seed=int(rng.integers(2 ** 62)))
            yield from zip(puzzles.reshape(batch, -1).tolist(), solutions.reshape(batch, -1).tolist())
    py = random.Random(int(rng.integers(2 ** 62)))
    while True:
        grid = random_grid(py, size)
        puzzle = list(grid)
        for c in dig(grid, py, floor=givens[0], size=size):
            puzzle[c] = 0
        yield puzzle, grid


def generate_search(n: int, size: int = 9, seed: int = 0, givens: tuple[int, int] | None = None,
                    progress: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` distinct unique puzzles of ``size`` (6 or 9) that propagation cannot finish, with their difficulty.

    Returns ``(puzzles, solutions, difficulty)``: (n, size, size) int64 twice (0 = blank) and (n,) int64 (see
    :func:`search_difficulty`, always >= 1 here). Candidates (module docstring) with a givens count outside
    ``givens`` (default ``SEARCH_GIVENS[size]``), a repeat of an earlier board, or that propagation completes are
    dropped; the rest are certified unique by counting solutions up to two. Same seed, same output.

    Measured on one core shared with a training job (issue 51): 9×9 150–270 boards/s (1,000 in 3.7–6.8 s), 6×6
    65–110 boards/s (1,000 in 9 s; one minimal dig in 20 survives). ``size=4`` is a ValueError: no unique 4×4 puzzle defeats propagation (module docstring).
    """
    n = check_int("n", n, minimum=1)
    if isinstance(size, bool) or size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    if size not in SEARCH_SIZES:
        raise ValueError("size=4: no unique 4x4 puzzle defeats naked and hidden singles (all 13,579,680 checked, "
                         "see energylab.tasks.sudoku_search), so there is no 4x4 board that needs search")
    seed = check_int("seed", seed, minimum=0)
    givens = SEARCH_GIVENS[size] if givens is None else givens
    if not isinstance(givens, (tuple, list)) or len(givens) != 2:
        raise ValueError(f"givens must be a pair (lo, hi) of ints, got {givens!r}")
    lo, hi = (check_int(f"givens[{i}]", g) for i, g in enumerate(givens))
    least = 17 if size == 9 else MIN_GIVENS[size]
    if not least <= lo <= hi <= size * size - 1:
        raise ValueError(f"givens must satisfy {least} <= lo <= hi <= {size * size - 1}, got {tuple(givens)}")
    from tqdm.auto import tqdm  # local import: only generation needs a progress bar

    geo = geometry(size)
    rng = np.random.default_rng(seed)
    seen: set[bytes] = set()
    puzzles, solutions, difficulty = [], [], []
    bar = tqdm(total=n, desc=f"sudoku {size}x{size} needing search", disable=not (n >= 2000 if progress is None
                                                                                    else progress))
    for puzzle, solution in _candidates(size, (lo, hi), rng, batch=256):
        if len(puzzles) == n:
            break
        k = sum(1 for v in puzzle if v)
        cand = geo.propagated(puzzle)
        if not lo <= k <= hi or cand is None or not any(m & (m - 1) for m in cand):
            continue
        key = bytes(puzzle)
        if key in seen:
            continue
        seen.add(key)
        guesses = [0]
        first = geo.solutions(puzzle, 1, guesses=guesses)
        if len(geo.solutions(puzzle, 2)) != 1 or geo.to_digits(first[0]) != solution:
            continue  # not unique (never seen: both sources certify uniqueness; kept as the certificate)
        puzzles.append(puzzle)
        solutions.append(solution)
        difficulty.append(guesses[0])
        bar.update(1)
    bar.close()
    shape = (n, size, size)
    return (np.array(puzzles, dtype=np.int64).reshape(shape), np.array(solutions, dtype=np.int64).reshape(shape),
            np.array(difficulty, dtype=np.int64))


__all__ = ["SEARCH_SIZES", "SEARCH_GIVENS", "needs_search", "search_difficulty", "generate_search"]
