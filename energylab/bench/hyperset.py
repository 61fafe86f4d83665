"""One Hyper-SET iteration against the Transformer block of equal width, forward + backward (issue 16).

Both are the looped layers of the Sudoku harness: :class:`energylab.layers.hyperset.HyperSETLayer` (attention and
feedforward steps with their adaptive step sizes, FF width 4d) and the pre-RMSNorm
:class:`energylab.layers.block.TransformerBlock` (FF width 4d). Each timing is one call of the layer and the
backward pass of the sum of its output, median over rounds of CPU time, one call of each layer per round in turn;
the row reports the ratio (target: at most 1.1, issue 27). Run ``python -m energylab.bench hyperset``.

The Hyper-SET layer runs two fast paths (:mod:`energylab.kernels`): the bi-softmax from one exponential (the score
matrix is symmetric, so E = exp(S) serves the row and the column softmax; outside pinned processes, as here, the C
tile loop of :mod:`energylab.kernels.fused_attention` instead) and the feedforward with its RMSNorm moved past the
second product (ReLU commutes with a positive scale). What no kernel removes: the step-size network's
d → 2d map on every token at every iteration, which the Transformer block does not have. Column
``fixed_step_ratio`` times the same iteration with fixed step sizes (α = γ = 0.1, Table 3's variant, no step-size
network) against the same block, in the same rounds: what is left once that network is taken away. Both layers do
about 12d² multiply-adds per token (Hyper-SET: 10d² in its two steps and 2d² in the step sizes), so the fixed-step
iteration near 10/12 of the block says the two steps cost what their arithmetic does, and the rest of the ratio is
the step-size network: its d → 2d map, GELU and RMSNorm over every token, and the gradients of α and γ.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys

import torch

from energylab.bench import cpu_times
from energylab.layers.block import TransformerBlock
from energylab.layers.hyperset import HyperSETLayer
from energylab.models import count_parameters

TARGET = 1.1  # issue 27: one Hyper-SET iteration costs at most 1.1x the Transformer block


def _step(layer, x, x0):
    def fn():
        layer.zero_grad(set_to_none=True)
        y = layer(x, None, t=3, x0=x0) if getattr(layer, "takes_step", False) else layer(x, x0)
        y.sum().backward()
    return fn


def time_ratio(batch: int, tokens: int, dim: int, heads: int, repeats: int = 10, seed: int = 0) -> dict:
    """Median fwd+bwd seconds of one iteration of each layer, and their ratio (Hyper-SET / Transformer)."""
    torch.manual_seed(seed)
    hs, tf = HyperSETLayer(dim, heads), TransformerBlock(dim, heads)
    fixed = HyperSETLayer(dim, heads, step=0.1)  # the same iteration without the step-size network (Table 3)
    with torch.no_grad():  # non-zero step sizes, as after training (zero ones would skip nothing anyway)
        for p in hs.steps.parameters():
            p.normal_(0, 0.02)
    x = torch.randn(batch, tokens, dim, requires_grad=True)
    x0 = torch.randn(batch, tokens, dim)
    # one call of each per round, in turn, in CPU seconds (one thread: the work, not the other processes' load);
    # the wall-clock medians of three blocks that this replaced moved by 0.1 between two runs of one tree
    times = cpu_times({"hyperset": _step(hs, x, x0), "transformer": _step(tf, x, x0),
                       "fixed": _step(fixed, x, x0)}, 3 * repeats)
    hs_s, tf_s, fixed_s = (statistics.median(times[k]) for k in ("hyperset", "transformer", "fixed"))
    return {"case": f"B={batch} N={tokens} d={dim} H={heads}", "hyperset_ms": 1e3 * hs_s,
            "transformer_ms": 1e3 * tf_s, "ratio": hs_s / tf_s, "target": TARGET,
            "fixed_step_ratio": fixed_s / tf_s,
            "params_hyperset": count_parameters(hs), "params_transformer": count_parameters(tf)}


# (batch, tokens, dim, heads): the Sudoku sizes (4x4 quick, the 6x6 league, the 9x9 CPU profile and a 9x9 board at
# d = 128) and the image size
CASES = [(64, 16, 64, 4), (64, 36, 64, 4), (32, 81, 64, 4), (16, 81, 128, 8), (64, 17, 32, 4)]
# A full run measures every case in this many fresh processes: within one process the median over alternated rounds
# is steady, but between processes of one tree the 4x4 ratio moved by 0.07 (1.11-1.18 over five runs here, a
# Xeon VM), with where each process's allocations happened to land; the rows give the median and the range.
PROCESSES = 3


def in_this_process(repeats: int) -> list[dict]:
    """One row per case of :data:`CASES`, measured in this process."""
    return [time_ratio(*case, repeats=repeats) for case in CASES]


def _in_a_fresh_process(repeats: int) -> list[dict]:
    code = ("import json, torch; torch.set_num_threads(1); from energylab.bench import hyperset; "
            f"print(json.dumps(hyperset.in_this_process({int(repeats)})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the bench's child process failed: {done.stderr.strip()[-1000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(quick: bool = True) -> list[dict]:
    """Rows for :data:`CASES`; quick: one process, 15 rounds; full: 60 rounds in each of :data:`PROCESSES` fresh
    processes, each number the median over the processes, with the lowest and highest ratio."""
    if quick:
        return in_this_process(repeats=5)
    runs = []
    for i in range(PROCESSES):
        print(f"  process {i + 1}/{PROCESSES} ...", file=sys.stderr, flush=True)
        runs.append(_in_a_fresh_process(repeats=20))
    rows = []
    for per_case in zip(*runs):
        row = dict(per_case[0])
        for key in ("hyperset_ms", "transformer_ms", "ratio", "fixed_step_ratio"):
            row[key] = statistics.median(r[key] for r in per_case)
        row.update(ratio_min=min(r["ratio"] for r in per_case), ratio_max=max(r["ratio"] for r in per_case),
                   processes=len(per_case))
        rows.append(row)
    return rows
