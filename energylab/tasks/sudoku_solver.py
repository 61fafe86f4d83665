"""An exact Sudoku solver in pure Python for 4×4, 6×6 and 9×9 boards: bitmask candidates, singles, MRV search.

A board of size n (``SHAPES``: 4 with 2×2 boxes, 6 with 2×3 boxes — two rows by three columns — and 9 with 3×3
boxes) is an n×n grid of ints, 0 = blank, 1..n = a digit. The solver keeps one n-bit candidate mask per cell
(bit d-1 set <=> digit d still possible) and alternates two propagation rules with search:

* naked single: a cell with one candidate removes it from its peers;
* hidden single: a digit with one possible cell in a unit (row, column, box) is placed there;
* branching on the cell with the fewest candidates (minimum remaining values), depth first.

``count_solutions(board, limit)`` stops at ``limit`` solutions, so uniqueness costs at most two. The board
geometry and the search live in :class:`Geometry` (one per size, ``geometry(size)``); the generator built on
it is ``energylab.tasks.sudoku_generate``.
"""
from __future__ import annotations

import functools
import random
from operator import itemgetter

import numpy as np

SHAPES = {4: (2, 2), 6: (2, 3), 9: (3, 3)}  # size n -> (rows, columns) of a box
MIN_GIVENS = {4: 4, 6: 8, 9: 17}  # fewest givens of any unique puzzle (known results; 9×9: McGuire et al. 2012)


class Geometry:
    """Tables for one board size (cells 0..n²-1 in row-major order) and the propagation/search on masks."""

    def __init__(self, size: int):
        if size not in SHAPES:
            raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
        n, (br, bc) = size, SHAPES[size]
        self.size, self.box_shape, self.cells = n, (br, bc), n * n
        self.row = tuple(i // n for i in range(n * n))
        self.col = tuple(i % n for i in range(n * n))
        self.box = tuple((i // n) // br * (n // bc) + (i % n) // bc for i in range(n * n))
        self.units = tuple(
            [tuple(range(n * r, n * r + n)) for r in range(n)]
            + [tuple(range(c, n * n, n)) for c in range(n)]
            + [tuple(i for i in range(n * n) if self.box[i] == b) for b in range(n)])
        self.cell_units = tuple((self.units[self.row[i]], self.units[n + self.col[i]], self.units[2 * n + self.box[i]])
                                for i in range(n * n))
        self.peers = tuple(tuple(sorted({j for u in self.cell_units[i] for j in u} - {i})) for i in range(n * n))
        self.all = (1 << n) - 1  # every candidate
        masks = range(1 << n)
        self.pop = tuple(bin(m).count("1") for m in masks)
        self.bits = tuple(tuple(1 << k for k in range(n) if m >> k & 1) for m in masks)
        self.digit = {1 << k: k + 1 for k in range(n)}  # single-bit mask -> digit
        # hidden singles count candidates per digit in parallel: mask bit k -> nibble k of a 4n-bit int
        self.spread = tuple(sum(1 << 4 * k for k in range(n) if m >> k & 1) for m in masks)
        self.single_spread = tuple(s if p == 1 else 0 for s, p in zip(self.spread, self.pop))  # placed digits only
        self.nib = self.spread[self.all]  # bit 0 of every nibble
        self.unit_get = tuple(itemgetter(*u) for u in self.units)
        # 3 nibbles (bits 0, 4, 8 of a 9-bit chunk) -> 3 bits; ``chunks`` = shifts of the chunks covering n nibbles
        self.pack = tuple(sum(1 << (k // 4) for k in range(0, 9, 4) if m >> k & 1) for m in range(512))
        self.chunks = tuple(range(0, n, 3))
        # boxes random_grid fills with independent random permutations before completing the grid: at 9×9 the
        # diagonal ones (any fill completes); at 4×4 two diagonal boxes can clash (12 ↔ 34 in the same rows
        # and columns), so smaller boards fix the first box only (every fill of one box completes, by relabelling)
        self.free_boxes = (0, 4, 8) if n == 9 else (0,)

    def unit_masks(self, flat) -> tuple[list[int], list[int], list[int]]:
        """Digits present among the givens of each row, column and box (n-bit masks) of a flat board."""
        n = self.size
        rows, cols, boxes = [0] * n, [0] * n, [0] * n
        for i, v in enumerate(flat):
            if v:
                b = 1 << (v - 1)
                rows[self.row[i]] |= b
                cols[self.col[i]] |= b
                boxes[self.box[i]] |= b
        return rows, cols, boxes

    def masks(self, flat, units: tuple | None = None) -> list[int]:
        """Candidate masks of a valid flat board: givens single bits, blanks what their peers allow.

        ``units`` = ``unit_masks(flat)`` when the caller already keeps them.
        """
        rows, cols, boxes = units or self.unit_masks(flat)
        row, col, box, full = self.row, self.col, self.box, self.all
        return [1 << (v - 1) if v else full & ~(rows[row[i]] | cols[col[i]] | boxes[box[i]])
                for i, v in enumerate(flat)]

    def propagate(self, cand: list[int], stack: list[int], hidden: bool = True) -> bool:
        """Apply naked and hidden singles in place until nothing changes; False on a contradiction.

        ``stack`` holds cells that became single and whose digit must still leave their peers.
        ``hidden=False`` applies naked singles only (cheaper per call, more branching).
        """
        peers, units, getters, pop = self.peers, self.units, self.unit_get, self.pop.__getitem__
        spread, single, nib, cells = self.spread.__getitem__, self.single_spread.__getitem__, self.nib, self.cells
        pack, chunks = self.pack, self.chunks
        while True:
            while stack:
                i = stack.pop()
                b = cand[i]
                for p in peers[i]:
                    m = cand[p]
                    if m & b:
                        m ^= b
                        if not m:
                            return False
                        cand[p] = m
                        if not m & (m - 1):
                            stack.append(p)
            if not hidden or sum(map(pop, cand)) == cells:
                return True  # naked singles only, or every cell is decided
            for u, get in zip(units, getters):  # hidden singles: digits seen exactly once in the unit
                masks = get(cand)
                t = sum(map(spread, masks))  # nibble k counts the cells that still allow digit k+1
                if (t | t >> 1 | t >> 2 | t >> 3) & nib != nib:
                    return False  # some digit has no place left in this unit
                once = t & ~(t >> 1 | t >> 2 | t >> 3) & nib
                if once & ~sum(map(single, masks)):  # a digit with one place that is not placed yet
                    only = sum(pack[once >> 4 * j & 0x1FF] << j for j in chunks)
                    for i, m in zip(u, masks):
                        x = m & only
                        if x and x != m:
                            if x & (x - 1):
                                return False  # two digits both need this cell
                            cand[i] = x
                            stack.append(i)
            if not stack:
                return True

    def search(self, cand: list[int], limit: int, found: list, rng: random.Random | None = None,
               prefer: list[int] | None = None, hidden: bool = True, guesses: list[int] | None = None) -> None:
        """Depth-first search from a propagated state; appends complete masks to ``found`` up to ``limit``.

        Values are tried in bit order, shuffled by ``rng``, or with the bit ``prefer[cell]`` first. ``guesses``, a
        one-item list, counts the branches: ``guesses[0]`` grows by one for every value tried at a branching cell
        (a guess), whether its propagation then fails or not.
        """
        best, fewest, pop = -1, self.size + 1, self.pop
        for i, m in enumerate(cand):
            c = pop[m]
            if 1 < c < fewest:
                best, fewest = i, c
                if c == 2:
                    break
        if best < 0:
            found.append(cand)
            return
        m = cand[best]
        options = list(self.bits[m])
        if rng is not None:
            rng.shuffle(options)
        elif prefer is not None and m & prefer[best]:
            options.remove(prefer[best])
            options.insert(0, prefer[best])
        for b in options:
            if guesses is not None:
                guesses[0] += 1
            child = cand.copy()
            child[best] = b
            if self.propagate(child, [best], hidden):
                self.search(child, limit, found, rng, prefer, hidden, guesses)
                if len(found) >= limit:
                    return

    def propagated(self, flat, hidden: bool = True) -> list[int] | None:
        """The candidate masks of a valid flat board after propagation alone (naked and, with ``hidden``, hidden
        singles until nothing changes; no search), or None if the givens lead to a contradiction."""
        cand = self.masks(flat)
        if all(cand) and self.propagate(cand, [i for i, m in enumerate(cand) if not m & (m - 1)], hidden):
            return cand
        return None

    def solutions(self, flat, limit: int, rng: random.Random | None = None, hidden: bool = True,
                  guesses: list[int] | None = None) -> list[list[int]]:
        """Up to ``limit`` solutions (as candidate-mask lists) of a valid flat board; ``guesses`` as in
        :meth:`search` (0 for a board propagation completes)."""
        cand = self.propagated(flat, hidden)
        found: list = []
        if cand is not None:
            self.search(cand, limit, found, rng, hidden=hidden, guesses=guesses)
        return found

    def to_digits(self, cand: list[int]) -> list[int]:
        """Complete masks -> digits (flat)."""
        return [self.digit[m] for m in cand]


@functools.lru_cache(maxsize=None)
def geometry(size: int = 9) -> Geometry:
    """The (cached) :class:`Geometry` of boards of ``size`` (4, 6 or 9)."""
    return Geometry(size)


def as_board(board, name: str = "board", size: int | None = None) -> np.ndarray:
    """Validate an n×n board of ints in 0..n and return it as an int64 array (a copy).

    ``size=None`` takes n from the shape (4, 6 or 9). Raises ValueError naming ``name`` for a wrong shape,
    non-integer or out-of-range values, or givens that repeat a digit in a row, column or box (a contradiction
    visible without search).
    """
    try:
        arr = np.asarray(board)
    except Exception as err:  # ragged nested lists and the like
        raise ValueError(f"{name} must be a square array of ints (4x4, 6x6 or 9x9): {err}") from None
    if size is None and not (arr.ndim == 2 and arr.shape[0] == arr.shape[1] and arr.shape[0] in SHAPES):
        raise ValueError(f"{name} must be a 4x4, 6x6 or 9x9 array (board sizes {sorted(SHAPES)}), "
                         f"got shape {arr.shape}")
    n = arr.shape[0] if size is None else size
    if isinstance(n, bool) or n not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {n!r}")
    if arr.shape != (n, n):
        raise ValueError(f"{name} must have shape ({n}, {n}), got {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold whole numbers 0..{n}")
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold ints 0..{n}, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.min() < 0 or arr.max() > n:
        raise ValueError(f"{name} values must lie in 0..{n} (0 = blank), got range [{arr.min()}, {arr.max()}]")
    geo = geometry(n)
    seen = {"row": [0] * n, "column": [0] * n, "box": [0] * n}  # digits met so far in each unit
    for i, v in enumerate(arr.reshape(n * n).tolist()):  # (n²,) row-major cells
        if v:
            for kind, k in (("row", geo.row[i]), ("column", geo.col[i]), ("box", geo.box[i])):
                if seen[kind][k] >> v & 1:
                    raise ValueError(f"{name} has contradictory givens: digit {v} repeats in {kind} {k}")
                seen[kind][k] |= 1 << v
    return arr


def check_pairs(puzzles, solutions, name: str = "puzzles") -> tuple[np.ndarray, np.ndarray]:
    """Validate (n, s, s) puzzles and solutions (s = 4, 6, 9): solutions are valid grids that agree with the
    givens."""
    p, s = np.asarray(puzzles), np.asarray(solutions)
    if p.ndim != 3 or p.shape[1] not in SHAPES or p.shape[2] != p.shape[1] or p.shape != s.shape:
        raise ValueError(f"{name} and solutions must both have shape (n, s, s) with s in {sorted(SHAPES)}, "
                         f"got {p.shape} and {s.shape}")
    if p.dtype.kind not in "iu" or s.dtype.kind not in "iu":
        raise ValueError(f"{name} and solutions must be integer arrays, got {p.dtype} and {s.dtype}")
    if len(p) == 0:
        raise ValueError(f"{name} and solutions hold no board (n = 0): a set of boards needs at least one")
    size = p.shape[1]
    (br, bc) = SHAPES[size]
    if p.min(initial=0) < 0 or p.max(initial=0) > size:
        raise ValueError(f"{name} values must lie in 0..{size}")
    digits = np.arange(1, size + 1)
    boxes = (s.reshape(-1, size // br, br, size // bc, bc).transpose(0, 1, 3, 2, 4)
             .reshape(-1, size, size))  # (n, box, cell in box)
    for what, groups in (("row", s), ("column", s.transpose(0, 2, 1)), ("box", boxes)):
        bad = ~(np.sort(groups, axis=2) == digits).all(axis=(1, 2))
        if bad.any():
            raise ValueError(f"solutions: board {int(np.argmax(bad))} is not a valid grid (a {what} repeats a digit)")
    clash = ((p > 0) & (p != s)).any(axis=(1, 2))
    if clash.any():
        raise ValueError(f"{name}: board {int(np.argmax(clash))} has givens that disagree with its solution")
    return p.astype(np.int64), s.astype(np.int64)


def solve(board, size: int | None = None) -> np.ndarray | None:
    """A solution of ``board`` (n×n ints, 0 = blank) as an (n, n) int64 array, or None if none exists.

    With several solutions, returns the first one the search meets (use ``count_solutions`` to check
    uniqueness). Contradictory givens, a wrong shape or values outside 0..n raise ValueError. ``size=None``
    takes n from the shape.
    """
    arr = as_board(board, size=size)
    geo = geometry(len(arr))
    found = geo.solutions([int(v) for v in arr.reshape(-1)], 1)
    return np.array(geo.to_digits(found[0]), dtype=np.int64).reshape(arr.shape) if found else None


def count_solutions(board, limit: int = 2, size: int | None = None) -> int:
    """Number of solutions of ``board``, counted exactly up to ``limit`` (returns min(count, limit)).

    ``limit=2`` answers "none / unique / several" with the least search. ``size=None`` takes n from the shape.
    """
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive int, got {limit!r}")
    arr = as_board(board, size=size)
    return len(geometry(len(arr)).solutions([int(v) for v in arr.reshape(-1)], limit))
