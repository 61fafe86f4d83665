"""A certified unique-solution Sudoku generator in pure Python, for 4×4, 6×6 and 9×9 boards.

``generate`` fills a random solution grid, then digs holes in a random cell order, keeping a
removal only if the puzzle keeps exactly one solution. Because the puzzle before a removal is unique
with solution S, the puzzle after removing cell c (value v = S_c) is unique iff no solution has
c != v; cheap sufficient tests (v is a naked or hidden single from the remaining givens) settle most
removals, and only the rest run a search for one solution with c != v. Every accepted puzzle is
therefore certified unique by construction (the tests re-check with an independent counter).

Random digging rarely gets below about 22 givens at 9×9 (minimal puzzles found this way mostly have 22–27
givens); a short random walk over minimal puzzles of the same grid (``_walk_down``) pushes the
low end: on one core about 20–30 boards/s at 22–26 givens, about 1–2/s at 21 and 0.3/s at 20.
Smaller boards are much cheaper (see ``generate``).
"""
from __future__ import annotations

import random

import numpy as np

from energylab.tasks.sudoku_solver import MIN_GIVENS, Geometry, geometry

# size -> givens range of the in-distribution sets (the default of ``generate``) and of the harder
# out-of-distribution sets; see ``energylab.tasks.sudoku.NAMED_SETS`` for the reasons
ID_GIVENS = {4: (6, 8), 6: (14, 19), 9: (31, 42)}
OOD_GIVENS = {4: (4, 5), 6: (9, 12), 9: (22, 34)}
GEN_COST = {4: 0.1, 6: 0.3, 9: 1.0}  # rough cost per board vs 9×9 at 31–42 (a progress bar above 2,000 units)

def random_grid(rng: random.Random, size: int = 9) -> list[int]:
    """A random complete grid (size² digits, row-major).

    Some boxes (``Geometry.free_boxes``) get independent random permutations; randomised depth-first search
    completes the rest (always possible).
    """
    geo = geometry(size)
    flat = [0] * geo.cells
    for b in geo.free_boxes:
        digits = list(range(1, size + 1))
        rng.shuffle(digits)
        for i, v in zip(geo.units[2 * size + b], digits):
            flat[i] = v
    (sol,) = geo.solutions(flat, 1, rng, hidden=False)
    return geo.to_digits(sol)


def _still_unique(geo: Geometry, given: list[int], c: int, v: int, rows, cols, boxes, prefer: list[int]) -> bool:
    """Is the puzzle ``given`` (cell c just blanked, its value v removed from the masks) still unique?

    Assumes the puzzle with c = v had exactly one solution; then uniqueness fails iff some solution
    has c != v. Tries the cheap forced-digit tests first, then searches for such a solution, trying
    the old solution's digits first (``prefer``, one bit per cell): a second solution usually differs
    from the first on a few cells only. Naked singles alone propagate here: in pure Python the
    hidden-single scan costs more than the extra branching it saves (measured: about 5x slower digs).
    """
    b = 1 << (v - 1)
    row, col, box = geo.row, geo.col, geo.box
    if geo.all & ~(rows[row[c]] | cols[col[c]] | boxes[box[c]]) == b:
        return True  # naked single: every other digit is already in a peer
    for unit in geo.cell_units[c]:  # hidden single: v fits nowhere else in one of c's units
        for e in unit:
            if e != c and not given[e] and not (rows[row[e]] | cols[col[e]] | boxes[box[e]]) & b:
                break
        else:
            return True
    cand = geo.masks(given, (rows, cols, boxes))
    cand[c] &= ~b
    if not cand[c] or not geo.propagate(cand, [i for i, m in enumerate(cand) if not given[i] and not m & (m - 1)],
                                        hidden=False):
        return True
    found: list = []
    geo.search(cand, 1, found, prefer=prefer, hidden=False)
    return not found


def _dig_cells(geo: Geometry, given: list[int], cells: list[int], floor: int, solution: list[int],
               stop_above: int | None = None) -> list[int]:
    """Blank ``cells`` of the unique puzzle ``given`` in order (in place), each only if the puzzle stays unique.

    Stops when ``floor`` givens are left, or once fewer than ``stop_above`` givens have become
    unreachable (each untried cell removes at most one); returns the cells blanked, in order.
    """
    stop_above = geo.cells if stop_above is None else stop_above
    prefer = [1 << (v - 1) for v in solution]
    rows, cols, boxes = geo.unit_masks(given)
    row, col, box = geo.row, geo.col, geo.box
    left = sum(1 for v in given if v)
    removed: list[int] = []
    for n_tried, c in enumerate(cells):
        if left <= floor or left - (len(cells) - n_tried) > stop_above:
            break  # floor reached, or too few untried cells left to get down to stop_above
        v = given[c]
        b = 1 << (v - 1)
        given[c] = 0
        rows[row[c]] ^= b
        cols[col[c]] ^= b
        boxes[box[c]] ^= b
        if _still_unique(geo, given, c, v, rows, cols, boxes, prefer):
            removed.append(c)
            left -= 1
        else:  # put it back: this cell stays a given for the rest of the dig
            given[c] = v
            rows[row[c]] |= b
            cols[col[c]] |= b
            boxes[box[c]] |= b
    return removed


def dig(solution: list[int], rng: random.Random, floor: int | None = None, stop_above: int | None = None,
        size: int = 9) -> list[int]:
    """Blank cells of a complete grid in random order while the puzzle stays unique.

    Returns the accepted removals in order; blanking the first ``size² - k`` of them gives a unique
    puzzle with k givens, for every k from ``size² - len(result)`` (a minimal puzzle, or ``floor``,
    where digging stops early; default the size's fewest possible givens) up to size². Gives up early once
    ``stop_above`` givens are out of reach.
    """
    geo = geometry(size)
    order = list(range(geo.cells))
    rng.shuffle(order)
    floor = MIN_GIVENS[size] if floor is None else floor
    return _dig_cells(geo, list(solution), order, floor, solution, stop_above)


def _walk_down(given: list[int], solution: list[int], rng: random.Random, floor: int, steps: int,
               size: int = 9) -> list[int]:
    """Random walk over minimal puzzles of one grid towards fewer givens (returns a new unique puzzle).

    One step blanks a random given, adds back solution cells where a second solution differs until
    the puzzle is unique again, then re-digs all givens in random order; a step that ends with more
    givens than before is undone. Measured at 22–26 givens: about 1.4x more boards per CPU second
    than fresh digs alone (``walk_steps=8`` vs 0); at exactly 21 givens 30 steps beat 8 (2.3 vs 1.1/s).
    """
    geo = geometry(size)
    cells = range(geo.cells)
    best, left = list(given), sum(1 for v in given if v)
    for _ in range(steps):
        if left <= floor:
            break
        trial = list(best)
        x = rng.choice([i for i in cells if trial[i]])
        trial[x] = 0
        while True:
            found = geo.solutions(trial, 2, hidden=False)
            if len(found) == 1:
                break
            other = next(f for f in found if geo.to_digits(f) != solution)
            a = rng.choice([i for i in cells if i != x and geo.digit[other[i]] != solution[i]])
            trial[a] = solution[a]
        kept = [i for i in cells if trial[i]]
        rng.shuffle(kept)
        _dig_cells(geo, trial, kept, floor, solution)
        n_trial = sum(1 for v in trial if v)
        if n_trial <= left:
            best, left = trial, n_trial
    return best


def generate(n: int, givens: tuple[int, int] | None = None, seed: int = 0, progress: bool | None = None,
             max_digs: int | None = None, walk_steps: int = 8, size: int = 9) -> tuple[np.ndarray, np.ndarray]:
    """``n`` puzzles of ``size``×``size`` with exactly one solution each and a number of givens spread over ``givens``.

    Returns ``(puzzles, solutions)``, int64 arrays of shape (n, size, size), 0 = blank in ``puzzles``.
    ``givens=None`` is the size's in-distribution range (``ID_GIVENS``). Each givens count k in [lo, hi] gets
    an equal quota (n // (hi - lo + 1), the remainder to randomly chosen counts). Each dig (a fresh random
    grid) aims at a random count weighted by the quota still open; a dig that stalls at a minimal puzzle above
    its aim first takes up to ``walk_steps`` steps of ``_walk_down``, then serves the lowest open count at or
    above what it reached (blanking fewer of its cells, or adding solution cells back: both keep it unique),
    so hard counts are not starved. On one core (``python -m energylab.bench sudoku``): 9×9 about
    800–1,100 boards/s at 31–42 givens, 20–30/s at 22–26, 1–2/s at exactly 21, 0.3/s at 20, counts 17–19
    out of reach (``energylab.tasks.sudoku_hard`` reaches them by symmetry); 4×4 and 6×6 see ``ID_GIVENS``.
    After ``max_digs`` digs (default ``50 * n + 200``) a RuntimeError names the counts still missing.
    Same seed, same output.
    """
    if size not in ID_GIVENS:
        raise ValueError(f"size must be one of {sorted(ID_GIVENS)}, got {size!r}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    givens = ID_GIVENS[size] if givens is None else givens
    try:
        lo, hi = (int(g) for g in givens)
    except (TypeError, ValueError):
        raise ValueError(f"givens must be a pair (lo, hi) of ints, got {givens!r}") from None
    geo = geometry(size)
    if not MIN_GIVENS[size] <= lo <= hi <= geo.cells - 1:
        raise ValueError(f"givens must satisfy {MIN_GIVENS[size]} <= lo <= hi <= {geo.cells - 1} (no {size}x{size} "
                         f"puzzle with fewer than {MIN_GIVENS[size]} givens is unique), got {givens!r}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    rng = random.Random(seed)
    counts = list(range(lo, hi + 1))
    quota = {k: n // len(counts) for k in counts}
    for k in rng.sample(counts, n % len(counts)):
        quota[k] += 1
    max_digs = 50 * n + 200 if max_digs is None else max_digs
    for name, value in (("max_digs", max_digs), ("walk_steps", walk_steps)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    cells = geo.cells
    puzzles = np.zeros((n, cells), dtype=np.int64)  # (n, size²) row-major cells
    solutions = np.zeros((n, cells), dtype=np.int64)
    from tqdm.auto import tqdm  # local import: only generation needs a progress bar

    show = n * GEN_COST[size] >= 2000 if progress is None else progress
    bar = tqdm(total=n, desc=f"sudoku {size}x{size} {lo}-{hi} givens", disable=not show)
    filled = digs = 0
    while filled < n:
        if digs >= max_digs:
            bar.close()
            missing = {k: q for k, q in quota.items() if q}
            raise RuntimeError(f"generate: after {digs} digs still missing {missing} (givens count: number); "
                               f"random digging rarely reaches fewer than ~22 givens at 9x9: raise givens[0] or "
                               f"max_digs")
        digs += 1
        open_counts = [k for k in counts if quota[k]]
        aim = rng.choices(open_counts, weights=[quota[k] for k in open_counts])[0]
        grid = random_grid(rng, size)
        order = list(range(cells))
        rng.shuffle(order)
        removed = _dig_cells(geo, list(grid), order, aim, grid, max(open_counts))
        puzzle = list(grid)
        for c in removed:
            puzzle[c] = 0
        reached = cells - len(removed)
        if reached > aim and walk_steps:
            puzzle = _walk_down(puzzle, grid, rng, aim, walk_steps, size)
            removed = [i for i in range(cells) if not puzzle[i]]
            rng.shuffle(removed)
            reached = cells - len(removed)
        k = next((k for k in open_counts if k >= reached), None)
        if k is None:
            continue
        quota[k] -= 1
        puzzle = list(grid)
        for c in removed[: cells - k]:
            puzzle[c] = 0
        puzzles[filled], solutions[filled] = puzzle, grid
        filled += 1
        bar.update(1)
    bar.close()
    perm = np.array(rng.sample(range(n), n))  # mix givens counts (generation order fills easy ones first)
    return puzzles[perm].reshape(n, size, size), solutions[perm].reshape(n, size, size)  # (n, size²) -> (n, s, s)
