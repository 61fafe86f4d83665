"""Sudoku generation and solving throughput, against a plain recursive pure-Python reference.

The reference is the textbook program: backtracking over the blank cell with the fewest digits its
row, column and box allow (Python sets; without that choice it needs minutes per 22-clue puzzle),
a random grid by the same backtracking with shuffled digits, and holes dug in random order with a
solution count (limit 2) after each removal, restarting from a new grid when the target number of
givens is not reached. No propagation, no bitmasks: what one writes first.
Run ``python -m energylab.bench sudoku`` (one core: set ``OMP_NUM_THREADS=1``).
"""
from __future__ import annotations

import random
import time

import numpy as np

from energylab.bench import median_time
from energylab.tasks.sudoku_generate import ID_GIVENS, OOD_GIVENS, generate
from energylab.tasks.sudoku_hard import generate_hard
from energylab.tasks.sudoku_solver import count_solutions


def _allowed(g: list[int], i: int) -> set[int]:
    r, c = divmod(i, 9)
    b0 = 27 * (r // 3) + 3 * (c // 3)
    used = {g[9 * r + k] for k in range(9)} | {g[9 * k + c] for k in range(9)}
    used |= {g[b0 + 9 * a + k] for a in range(3) for k in range(3)}
    return set(range(1, 10)) - used


def _most_constrained(g: list[int]) -> tuple[int, set[int]] | None:
    """The blank cell with the fewest allowed digits (None if the board is full)."""
    best = None
    for i in range(81):
        if not g[i]:
            allowed = _allowed(g, i)
            if best is None or len(allowed) < len(best[1]):
                best = (i, allowed)
                if len(allowed) <= 1:
                    break
    return best


def reference_count(g: list[int], limit: int = 2) -> int:
    """Plain recursive solution count of a flat board (81 ints, 0 = blank), up to ``limit``."""
    best = _most_constrained(g)
    if best is None:
        return 1
    i, allowed = best
    total = 0
    for v in allowed:
        g[i] = v
        total += reference_count(g, limit - total)
        g[i] = 0
        if total >= limit:
            break
    return total


def _reference_fill(g: list[int], rng: random.Random) -> bool:
    best = _most_constrained(g)
    if best is None:
        return True
    i, allowed = best
    options = sorted(allowed)
    rng.shuffle(options)
    for v in options:
        g[i] = v
        if _reference_fill(g, rng):
            return True
    g[i] = 0
    return False


def reference_generate(n: int, givens: tuple[int, int], seed: int = 0) -> np.ndarray:
    """The plain generator: a random target in ``givens`` per puzzle, dig until reached, else restart."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        target = rng.randint(*givens)
        while True:
            g = [0] * 81
            _reference_fill(g, rng)
            left = 81
            for i in rng.sample(range(81), 81):
                if left == target:
                    break
                v, g[i] = g[i], 0
                if reference_count(list(g)) == 1:
                    left -= 1
                else:
                    g[i] = v
            if left == target:
                out.append(g)
                break
    return np.array(out).reshape(n, 9, 9)  # (n, 81) -> (n, 9, 9)


def _rates(fn, n: int, repeats: int, warmup: int) -> tuple[float, float]:
    """(items per wall second: median over repeats, items per CPU second of this process: mean)."""
    cpu0 = time.process_time()
    wall = median_time(fn, repeats, warmup)
    cpu = (time.process_time() - cpu0) / (repeats + warmup)
    return n / wall, n / cpu


def run(quick: bool = True) -> list[dict]:
    """Rows: generation at SATNet's range, at a hard range and for the 4×4 and 6×6 ID/OOD ranges, and solution
    counting, ours vs reference (the reference is 9×9 only).

    Rates are items per second on one thread: per wall-clock second (median over repeats, as
    ``median_time`` gives) and per CPU second of this process. On a shared machine the wall rate
    moves with the load; the CPU rate is what one dedicated core would do. Speedups use CPU rates.
    The reference at 22–26 givens needs tens of seconds per puzzle, so quick runs skip it.
    """
    repeats = 3 if quick else 5
    rows = []
    cases = (("generate 31-42", (31, 42), 30 if quick else 200, 2 if quick else 5, 9),
             ("generate 22-26", (22, 26), 10 if quick else 50, 0 if quick else 2, 9))
    small = tuple((f"generate {s}x{s} {lo}-{hi}", (lo, hi), 300 if quick else 3000, 0, s)
                  for s in (4, 6) for lo, hi in (ID_GIVENS[s], OOD_GIVENS[s]))  # targets: 4x4 >= 2,000/s, 6x6 >= 500/s
    for label, givens, n_ours, n_ref, size in cases + small:
        seeds = iter(range(1, 10**6))  # a fresh seed per call: every repeat generates new puzzles
        ours = _rates(lambda: generate(n_ours, givens, seed=next(seeds), size=size), n_ours, repeats, warmup=1)
        ref = _rates(lambda: reference_generate(n_ref, givens, seed=next(seeds)), n_ref, repeats, warmup=0) \
            if n_ref else (None, None)
        rows.append({"case": label, "ours_per_s": ours[0], "ours_per_cpu_s": ours[1], "reference_per_cpu_s": ref[1],
                     "speedup": ours[1] / ref[1] if ref[1] else None})
    n_hard = 300 if quick else 3000
    seeds = iter(range(1, 10**6))
    ours = _rates(lambda: generate_hard(n_hard, (17, 34), seed=next(seeds)), n_hard, repeats, warmup=1)
    rows.append({"case": "generate_hard 17-34 (catalogue + symmetries)", "ours_per_s": ours[0],
                 "ours_per_cpu_s": ours[1], "reference_per_cpu_s": None, "speedup": None})
    puzzles, _ = generate(100 if quick else 1000, (31, 42), seed=7)
    flats = [[int(v) for v in p.reshape(81)] for p in puzzles]
    ours = _rates(lambda: [count_solutions(p) for p in puzzles], len(puzzles), repeats, warmup=1)
    ref = _rates(lambda: [reference_count(list(f)) for f in flats], len(flats), repeats, warmup=0)
    rows.append({"case": "count_solutions 31-42", "ours_per_s": ours[0], "ours_per_cpu_s": ours[1],
                 "reference_per_cpu_s": ref[1], "speedup": ours[1] / ref[1]})
    return rows
