"""Particles on the sphere: simulation speed, the float32 error, and animation size (issues 7 and 19).

Speed: 1,024 tokens in d = 3 for 1,000 Euler steps of SA and USA on one thread, four ways: the default float64
integrator (the reference of every ratio, measured in the same run), the same integrator in float32, float32 with
``FlowConfig(fused=True)`` (here, Q = K = V = I, the symmetric kernel of :mod:`energylab.kernels.sphere_symmetric`: each
exponential serves the pairs (i, j) and (j, i)), and float32 through the ``torch.compile``'d step of
:mod:`energylab.kernels.sphere_fused` that ``fused=True`` takes when Q_hᵀK_h is not symmetric or the mask is causal
(called in a loop like ``simulate`` does). Times are CPU seconds of this process (``time.process_time``, one
thread), the median of ``repeats`` runs taken in alternation: on a shared machine wall time swings with other
processes' load. The build time of each kernel (C compiler, or ``torch.compile``) is reported apart (it is paid once
per shape and process). ``max_abs_error`` is the largest coordinate difference of the final tokens from the float64
run. A last row gives the bare ``scaled_dot_product_attention`` loop (SA) or ``exp(β X Xᵀ) X`` loop (USA) in
float32, the attention work alone. Size: bytes a 200-frame, 64-token animation adds
to a page (target 1 MB). Targets of issue 19: SA in float32 within 0.5 s; one redraw of the chapter's live explorer
at 256 tokens (simulation, figure and its JSON, what the notebook sends to the browser) within 1 s.
"""
from __future__ import annotations

import statistics
import time

import plotly.io
import torch
import torch.nn.functional as F

from energylab.bench import cpu_times
from energylab.flows import FlowConfig, fused_way, preset_weights, simulate, simulate_preset
from energylab.kernels import sphere_fused
from energylab.sphere import random_tokens
from energylab.viz.sphere import explorer_figure, figure_bytes, sphere_figure

TARGET_S = 0.5  # issue 19: SA, 1,024 tokens, 1,000 Euler steps, one core
REDRAW_TARGET_S = 1.0  # issue 19: the chapter's live explorer redraws within 1 s at 256 tokens


def _median(times: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(ts) for name, ts in times.items()}


def run(quick: bool) -> list[dict]:
    torch.set_num_threads(1)
    n, steps = (256, 100) if quick else (1024, 1000)
    repeats = 1 if quick else 3
    x64 = random_tokens(1, n, 3, seed=0)
    x32 = x64.float()
    w64, w32 = preset_weights("identity", 3), preset_weights("identity", 3, dtype=torch.float32)
    rows = []
    for name, normalized in (("SA", True), ("USA", False)):
        cfg = FlowConfig(beta=1.0, normalized=normalized, step=0.01, steps=steps)
        fused = FlowConfig(beta=1.0, normalized=normalized, step=0.01, steps=steps, fused=True)
        if fused_way(x32, w32, fused) != "symmetric":  # the docstring and the rows' labels say it is
            raise RuntimeError(f"fused=True takes the {fused_way(x32, w32, fused)!r} step here, not the symmetric one")
        t0 = time.perf_counter()
        simulate(x32, w32, FlowConfig(beta=1.0, normalized=normalized, step=0.01, steps=1, fused=True))
        compile_s = {"float32 fused": time.perf_counter() - t0}
        kernel, beta_t, h_t = sphere_fused.compiled_euler_step(), torch.tensor(1.0), torch.tensor(0.01)

        def compiled():  # the unsymmetric fused step, one call per step as simulate makes them
            xt = x32.transpose(-1, -2).contiguous()
            for _ in range(steps):
                xt = kernel(xt, w32.Q, w32.K, w32.V, beta_t, h_t, normalized, False)
            return xt.transpose(-1, -2)

        t0 = time.perf_counter()
        kernel(x32.transpose(-1, -2).contiguous(), w32.Q, w32.K, w32.V, beta_t, h_t, normalized, False)
        compile_s["float32 compiled step"] = time.perf_counter() - t0
        x4 = x32.unsqueeze(1)  # (B, H, N, d)

        def bare():
            for _ in range(steps):
                if normalized:
                    F.scaled_dot_product_attention(x4, x4, x4, scale=1.0)
                else:
                    torch.exp(x32 @ x32.transpose(-1, -2)) @ x32 / n

        ends = {"float64": simulate(x64, w64, cfg).x[-1], "float32": simulate(x32, w32, cfg).x[-1],
                "float32 fused": simulate(x32, w32, fused).x[-1], "float32 compiled step": compiled()[-1]}
        t = _median(cpu_times({"float64": lambda: simulate(x64, w64, cfg), "float32": lambda: simulate(x32, w32, cfg),
                               "float32 fused": lambda: simulate(x32, w32, fused), "float32 compiled step": compiled,
                               "bare attention": bare}, repeats, warmup=False))  # warm: the ends above ran once
        for way, seconds in t.items():
            err = float((ends[way].double() - ends["float64"]).abs().max()) if way in ends else None
            rows.append({"case": f"{name} Euler, n={n}, d=3, {steps} steps", "way": way, "cpu_seconds": seconds,
                         "ratio_to_float64": seconds / t["float64"], "max_abs_error": err,
                         "compile_seconds": compile_s.get(way),
                         "target_s": TARGET_S if (normalized and way == "float32 fused" and not quick) else None})
    for explorer_steps in (200, 1000):  # the explorer's default and its largest number of steps
        params = {"n": 256, "beta": 1.0, "preset": "identity", "heads": 1, "step": 0.1, "steps": explorer_steps,
                  "normalized": True, "causal": False, "seed": 0}
        redraw = lambda: plotly.io.to_json(explorer_figure(params), validate=False)  # noqa: E731 - what the widget shows
        t = _median(cpu_times({"redraw": redraw}, repeats))["redraw"]
        rows.append({"case": f"explorer redraw, 256 tokens, {explorer_steps} steps, 100 frames",
                     "way": "simulate + figure + JSON", "cpu_seconds": t, "ratio_to_float64": None,
                     "max_abs_error": None, "compile_seconds": None, "target_s": REDRAW_TARGET_S})
    frames = 50 if quick else 200
    traj = simulate_preset(n=64, beta=4.0, steps=frames - 1, step=0.1, seed=0)
    fig = sphere_figure(traj.x[:, 0], traj.times)
    rows.append({"case": f"animation, 64 tokens, {len(fig.frames)} frames", "way": "page bytes",
                 "cpu_seconds": None, "ratio_to_float64": None, "max_abs_error": None, "compile_seconds": None,
                 "target_s": None, "bytes": figure_bytes(fig)})
    for r in rows:
        r.setdefault("bytes", None)
    return rows
