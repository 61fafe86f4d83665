"""An exact Sudoku solver in pure Python: bitmask candidates, singles propagation, MRV search.

A board is a 9×9 grid of ints, 0 = blank. The solver keeps one 9-bit candidate mask per cell
(bit d-1 set <=> digit d still possible) and alternates two propagation rules with search:

* naked single: a cell with one candidate removes it from its 20 peers;
* hidden single: a digit with one possible cell in a unit (row, column, box) is placed there;
* branching on the cell with the fewest candidates (minimum remaining values), depth first.

``count_solutions(board, limit)`` stops at ``limit`` solutions, so uniqueness costs at most two.
The generator built on it lives in ``energylab.tasks.sudoku_generate``.
"""
from __future__ import annotations

import random
from operator import itemgetter

import numpy as np

# --- board geometry: cells 0..80 in row-major order --------------------------------------------
ROW = tuple(i // 9 for i in range(81))
COL = tuple(i % 9 for i in range(81))
BOX = tuple(3 * (i // 27) + (i % 9) // 3 for i in range(81))
UNITS = tuple(
    [tuple(range(9 * r, 9 * r + 9)) for r in range(9)]
    + [tuple(range(c, 81, 9)) for c in range(9)]
    + [tuple(i for i in range(81) if BOX[i] == b) for b in range(9)]
)
CELL_UNITS = tuple((UNITS[ROW[i]], UNITS[9 + COL[i]], UNITS[18 + BOX[i]]) for i in range(81))
PEERS = tuple(tuple(sorted({j for u in CELL_UNITS[i] for j in u} - {i})) for i in range(81))
ALL = 0x1FF  # all nine candidates
POP = tuple(bin(m).count("1") for m in range(512))
BITS = tuple(tuple(1 << k for k in range(9) if m >> k & 1) for m in range(512))
DIGIT = {1 << k: k + 1 for k in range(9)}  # single-bit mask -> digit
# hidden singles count candidates per digit in parallel: mask bit k -> nibble k of a 36-bit int
SPREAD = tuple(sum(1 << 4 * k for k in range(9) if m >> k & 1) for m in range(512))
SINGLE_SPREAD = tuple(SPREAD[m] if POP[m] == 1 else 0 for m in range(512))  # placed digits only
NIB = SPREAD[ALL]  # bit 0 of every nibble
PACK = tuple(sum(1 << (k // 4) for k in range(0, 9, 4) if m >> k & 1) for m in range(512))  # 3 nibbles -> 3 bits
UNIT_GET = tuple(itemgetter(*u) for u in UNITS)


def as_board(board, name: str = "board") -> np.ndarray:
    """Validate a 9×9 board of ints in 0..9 and return it as an int64 array (a copy).

    Raises ValueError naming ``name`` for a wrong shape, non-integer or out-of-range values, or
    givens that repeat a digit in a row, column or box (a contradiction visible without search).
    """
    try:
        arr = np.asarray(board)
    except Exception as err:  # ragged nested lists and the like
        raise ValueError(f"{name} must be a 9x9 array of ints 0..9: {err}") from None
    if arr.shape != (9, 9):
        raise ValueError(f"{name} must have shape (9, 9), got {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold whole numbers 0..9")
    elif arr.dtype.kind not in "iub":
        raise ValueError(f"{name} must hold ints 0..9, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.min() < 0 or arr.max() > 9:
        raise ValueError(f"{name} values must lie in 0..9 (0 = blank), got range [{arr.min()}, {arr.max()}]")
    seen = {"row": [0] * 9, "column": [0] * 9, "box": [0] * 9}  # digits met so far in each unit
    for i, v in enumerate(arr.reshape(81).tolist()):  # (81,) row-major cells
        if v:
            for kind, k in (("row", ROW[i]), ("column", COL[i]), ("box", BOX[i])):
                if seen[kind][k] >> v & 1:
                    raise ValueError(f"{name} has contradictory givens: digit {v} repeats in {kind} {k}")
                seen[kind][k] |= 1 << v
    return arr


def _unit_masks(flat) -> tuple[list[int], list[int], list[int]]:
    """Digits present among the givens of each row, column and box (9-bit masks) of a flat board."""
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    for i, v in enumerate(flat):
        if v:
            b = 1 << (v - 1)
            rows[ROW[i]] |= b
            cols[COL[i]] |= b
            boxes[BOX[i]] |= b
    return rows, cols, boxes


def _masks(flat, units: tuple | None = None) -> list[int]:
    """Candidate masks of a valid flat board (81 ints): givens single bits, blanks what their peers allow.

    ``units`` = ``_unit_masks(flat)`` when the caller already keeps them.
    """
    rows, cols, boxes = units or _unit_masks(flat)
    return [1 << (v - 1) if v else ALL & ~(rows[ROW[i]] | cols[COL[i]] | boxes[BOX[i]])
            for i, v in enumerate(flat)]


def _propagate(cand: list[int], stack: list[int], hidden: bool = True) -> bool:
    """Apply naked and hidden singles in place until nothing changes; False on a contradiction.

    ``stack`` holds cells that became single and whose digit must still leave their peers.
    ``hidden=False`` applies naked singles only (cheaper per call, more branching).
    """
    peers, units, getters, pop = PEERS, UNITS, UNIT_GET, POP.__getitem__
    spread, single = SPREAD.__getitem__, SINGLE_SPREAD.__getitem__
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
        if not hidden or sum(map(pop, cand)) == 81:
            return True  # naked singles only, or every cell is decided
        for u, get in zip(units, getters):  # hidden singles: digits seen exactly once in the unit
            masks = get(cand)
            t = sum(map(spread, masks))  # nibble k counts the cells that still allow digit k+1
            if (t | t >> 1 | t >> 2 | t >> 3) & NIB != NIB:
                return False  # some digit has no place left in this unit
            once = t & ~(t >> 1 | t >> 2 | t >> 3) & NIB
            if once & ~sum(map(single, masks)):  # a digit with one place that is not placed yet
                only = PACK[once & 0x1FF] | PACK[once >> 12 & 0x1FF] << 3 | PACK[once >> 24 & 0x1FF] << 6
                for i, m in zip(u, masks):
                    x = m & only
                    if x and x != m:
                        if x & (x - 1):
                            return False  # two digits both need this cell
                        cand[i] = x
                        stack.append(i)
        if not stack:
            return True


def _search(cand: list[int], limit: int, found: list, rng: random.Random | None = None,
            prefer: list[int] | None = None, hidden: bool = True) -> None:
    """Depth-first search from a propagated state; appends complete masks to ``found`` up to ``limit``.

    Values are tried in bit order, shuffled by ``rng``, or with the bit ``prefer[cell]`` first.
    """
    best, fewest = -1, 10
    for i, m in enumerate(cand):
        c = POP[m]
        if 1 < c < fewest:
            best, fewest = i, c
            if c == 2:
                break
    if best < 0:
        found.append(cand)
        return
    m = cand[best]
    options = list(BITS[m])
    if rng is not None:
        rng.shuffle(options)
    elif prefer is not None and m & prefer[best]:
        options.remove(prefer[best])
        options.insert(0, prefer[best])
    for b in options:
        child = cand.copy()
        child[best] = b
        if _propagate(child, [best], hidden):
            _search(child, limit, found, rng, prefer, hidden)
            if len(found) >= limit:
                return


def _solutions(flat, limit: int, rng: random.Random | None = None, hidden: bool = True) -> list[list[int]]:
    """Up to ``limit`` solutions (as candidate-mask lists) of a valid flat board."""
    cand = _masks(flat)
    found: list = []
    if all(cand) and _propagate(cand, [i for i, m in enumerate(cand) if not m & (m - 1)], hidden):
        _search(cand, limit, found, rng, hidden=hidden)
    return found


def _to_board(cand: list[int]) -> np.ndarray:
    return np.array([DIGIT[m] for m in cand], dtype=np.int64).reshape(9, 9)  # (81,) -> (9, 9)


def solve(board) -> np.ndarray | None:
    """Return a solution of ``board`` (9×9 ints, 0 = blank) as a (9, 9) int64 array, or None if none exists.

    With several solutions, returns the first one the search meets (use ``count_solutions`` to check
    uniqueness). Contradictory givens, a wrong shape or values outside 0..9 raise ValueError.
    """
    flat = [int(v) for v in as_board(board).reshape(81)]
    found = _solutions(flat, 1)
    return _to_board(found[0]) if found else None


def count_solutions(board, limit: int = 2) -> int:
    """Number of solutions of ``board``, counted exactly up to ``limit`` (returns min(count, limit)).

    ``limit=2`` answers "none / unique / several" with the least search.
    """
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive int, got {limit!r}")
    flat = [int(v) for v in as_board(board).reshape(81)]
    return len(_solutions(flat, limit))
