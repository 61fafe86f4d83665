"""Benchmarks, run with ``python -m energylab.bench [section ...]``.

Each section is a module of this package with ``run(quick: bool) -> list[dict]`` returning table rows.
Every timing is reported as a ratio to a reference measured in the same run, never as an absolute
threshold, because absolute times depend on the machine.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

# section name -> module name inside energylab.bench; each section owner adds one line here
SECTIONS = {
    "attention": "attention",  # forward+backward time and peak memory of each layer vs SDPA attention (issue 3)
    "engine": "engine",  # training loop overhead vs bare PyTorch; seed-ensemble speed-up (issue 4)
    "sudoku": "sudoku",  # generation and solving throughput vs a plain recursive solver
    "attractor": "attractor",  # local field of the attractor net: autograd route vs the catalog operator (issue 9)
    "hyperset": "hyperset",  # one Hyper-SET iteration fwd+bwd vs the Transformer block of equal width (issue 16)
    "sphere": "sphere",  # particle flows on the sphere vs bare SDPA / exp-matmul; animation page size (issue 7)
    "derive": "derive",  # a layer from energylab.derive (autograd) vs its hand-derived closed form (issue 20)
}


def median_time(fn: Callable[[], object], repeats: int = 10, warmup: int = 2,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """Median time of ``fn()`` in seconds over ``repeats`` calls after ``warmup`` calls: wall time by default,
    ``clock=time.process_time`` for the CPU seconds of this process (one thread: the work, not the load)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def cpu_times(fns: dict[str, Callable[[], object]], repeats: int, warmup: bool = True) -> dict[str, list[float]]:
    """CPU seconds (``time.process_time``) of each function in each of ``repeats`` rounds, one call of each per
    round in turn, after one warm-up call of each when ``warmup``.

    Benchmarks run on one thread, so the process's CPU time measures the work itself; wall time on a shared
    machine swings by 2x with other processes' load, and alternating the functions spreads what is left evenly.
    """
    if warmup:
        for fn in fns.values():
            fn()  # imports, allocator, compilation
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.process_time()
            fn()
            times[name].append(time.process_time() - t0)
    return times


def format_table(rows: list[dict]) -> str:
    """Render rows (dicts with the same keys) as a fixed-width text table."""
    if not rows:
        return "(no rows)"
    keys = list(rows[0])
    cells = [[_fmt(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths))  # noqa: E731
    return "\n".join([line(keys), line(["-" * w for w in widths]), *map(line, cells)])


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)
