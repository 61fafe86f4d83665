"""9×9 boards with 17–21 givens, RRN's hard end, from a cached catalogue and the Sudoku symmetries.

RRN's boards (Palm et al. 2018) are Royle's 17-clue puzzles with 0–17 givens added back from the solution.
Random digging (``energylab.tasks.sudoku_generate``) rarely gets below 22 givens, so this module does what RRN
did, from a catalogue we can ship:

1. **The catalogue** (``sudoku_hard.txt`` next to this file, one ``givens puzzle solution`` line per board,
   each certified unique by our solver when written; ``catalogue_counts()`` gives the counts):
   * 21, 20, 19 givens: minimal puzzles found once by a longer search (1,091 random digs, each followed by a
     60-step ``_walk_down`` towards 17 givens, 15 min of one shared core: 725 boards with 21 givens (0.8/s),
     161 with 20 (0.18/s), 5 with 19 (one per 3 min), none with 18 or 17);
   * 17: the two public 17-clue puzzles of our tests (one from Royle's collection, Wikipedia's "hard for brute
     force" one) and 3 of their {-1, +1} neighbours (remove a clue, enumerate every solution, add back a clue
     that exactly one solution has: one clue moved, so close relatives);
   * 18: 2, and 19: 2 more, by {-2, +1} moves from the 19s and 20s (2 min; about one per minute).
2. **Symmetries** (:func:`transform`): digit relabelling, row permutations within bands, band permutations,
   column permutations within stacks, stack permutations and the transpose keep a puzzle unique and keep its
   number of givens; they map one puzzle to up to 9!·6⁸·2 ≈ 1.2·10¹² boards, all *equivalent* to it (the same
   reasoning solves them). So a set built this way has few distinct puzzles at its lowest counts.
3. **Adding givens back** from the solution (any superset of a unique puzzle's givens is unique), to reach
   every count from the seed's up to 34, as RRN did.

Distinct seeds (puzzles up to symmetry, before givens are added) behind a board with k givens: 5 for k = 17,
7 for 18, 14 for 19, 175 for 20, 900 from 21 on. So the 17–19 boards are many views of a handful of puzzles:
honest about RRN's range, far from its 49k distinct 17-clue puzzles.

Use it as an out-of-distribution **test** set: train and test sets built here share catalogue seeds, so do
not train on one and test on the other. Rate: thousands of boards per second at every count (numpy only).
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from energylab._checks import check_int
from energylab.tasks.sudoku_solver import check_pairs
from energylab.tasks.sudoku_symmetry import apply_symmetry, random_symmetry

CATALOGUE = Path(__file__).with_name("sudoku_hard.txt")


@functools.lru_cache(maxsize=1)
def catalogue() -> tuple[np.ndarray, np.ndarray]:
    """(puzzles, solutions) of the catalogue, (m, 9, 9) int64 each, sorted by givens count.

    A missing, truncated or damaged catalogue is a ValueError naming the file and the first bad line; every solution
    must be a valid grid agreeing with its puzzle."""
    try:
        text = CATALOGUE.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{CATALOGUE} is not a readable catalogue of hard puzzles ({type(err).__name__}: {err}); "
                         f"reinstall energylab to restore it") from None
    rows = []
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        r = line.split()
        if not (len(r) == 3 and r[0].isdecimal() and all(len(x) == 81 and x.isascii() and x.isdecimal()
                                                          for x in r[1:])):
            raise ValueError(f"{CATALOGUE}:{line_no}: the catalogue is corrupt: expected 'givens puzzle solution' "
                             f"with 81 digits each")
        rows.append(r)
    if not rows:
        raise ValueError(f"{CATALOGUE} is corrupt: it holds no puzzle")
    rows.sort(key=lambda r: int(r[0]))
    digits = [[np.frombuffer(r[k].encode(), dtype=np.uint8).astype(np.int64) - ord("0") for r in rows] for k in (1, 2)]
    puzzles, solutions = (np.stack(d).reshape(-1, 9, 9) for d in digits)  # (m, 81) -> (m, 9, 9)
    counts = (puzzles > 0).reshape(len(puzzles), 81).sum(1)
    agree = (puzzles[puzzles > 0] == solutions[puzzles > 0]).all()
    if not (np.array_equal(counts, [int(r[0]) for r in rows]) and agree):
        raise ValueError(f"{CATALOGUE} is corrupt: givens counts or solutions disagree with the puzzles")
    try:
        check_pairs(puzzles, solutions)
    except ValueError as err:
        raise ValueError(f"{CATALOGUE} is corrupt: {err}") from None
    return puzzles, solutions


def catalogue_counts() -> dict[int, int]:
    """Number of catalogue boards with each givens count."""
    counts = (catalogue()[0] > 0).reshape(-1, 81).sum(1)
    return {int(k): int((counts == k).sum()) for k in np.unique(counts)}


def transform(puzzle: np.ndarray, solution: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random Sudoku symmetry applied to a (9, 9) puzzle and its solution (the same one to both).

    Digits relabelled by a random permutation; rows permuted within each band and bands permuted; the same
    for columns and stacks; transposed with probability 1/2. Uniqueness and the givens count are preserved.
    """
    sym = random_symmetry(9, rng)  # energylab.tasks.sudoku_symmetry: the symmetries of every board size
    return apply_symmetry(puzzle, sym), apply_symmetry(solution, sym)


def generate_hard(n: int, givens: tuple[int, int] = (17, 34), seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unique 9×9 puzzles with givens spread over ``givens`` (equal quotas), built as RRN's were.

    Each board: a catalogue puzzle with at most the target count of givens (chosen uniformly among those),
    a random symmetry (:func:`transform`), then givens added back from the solution at random blank cells up to
    the target count. Returns (puzzles, solutions), int64 arrays of shape (n, 9, 9). Same seed, same output.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not isinstance(givens, (tuple, list)) or len(givens) != 2:
        raise ValueError(f"givens must be a pair (lo, hi) of ints, got {givens!r}")
    lo, hi = (check_int(f"givens[{i}]", g) for i, g in enumerate(givens))  # 17.5 was truncated to 17
    if not 17 <= lo <= hi <= 80:
        raise ValueError(f"givens must satisfy 17 <= lo <= hi <= 80, got {givens!r}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    rng = np.random.default_rng(seed)
    seeds_p, seeds_s = catalogue()
    seed_counts = (seeds_p > 0).reshape(-1, 81).sum(1)  # sorted ascending
    counts = np.arange(lo, hi + 1)
    targets = np.concatenate([np.repeat(counts, n // len(counts)),
                              rng.choice(counts, n % len(counts), replace=False)])
    rng.shuffle(targets)
    puzzles = np.zeros((n, 9, 9), dtype=np.int64)
    solutions = np.zeros((n, 9, 9), dtype=np.int64)
    for i, k in enumerate(targets):
        usable = int(np.searchsorted(seed_counts, k, side="right"))  # seeds with <= k givens
        j = int(rng.integers(usable))
        p, s = transform(seeds_p[j], seeds_s[j], rng)
        blanks = np.flatnonzero(p.ravel() == 0)
        add = rng.choice(blanks, int(k - seed_counts[j]), replace=False)
        p = p.ravel().copy()
        p[add] = s.ravel()[add]
        puzzles[i], solutions[i] = p.reshape(9, 9), s
    return puzzles, solutions
