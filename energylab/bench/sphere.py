"""Particles on the sphere: simulation speed and animation size (issue 7).

Speed: 1,024 tokens in d = 3 for 1,000 Euler steps of SA and USA (float32, one thread), as a ratio to the bare
PyTorch work those steps cannot avoid: 1,000 calls of ``scaled_dot_product_attention`` on the same tokens
(SA) or 1,000 ``exp(beta X X^T) X`` products (USA). The ratio is our overhead (projection, renormalisation,
bookkeeping). Absolute seconds are printed too, against the 2 s target. Size: bytes a 200-frame, 64-token
animation adds to a page (target 1 MB). Run ``OMP_NUM_THREADS=1 python -m energylab.bench sphere``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from energylab.bench import median_time
from energylab.flows import FlowConfig, preset_weights, simulate, simulate_preset
from energylab.sphere import random_tokens
from energylab.viz.sphere import figure_bytes, sphere_figure


def run(quick: bool) -> list[dict]:
    torch.set_num_threads(1)
    n, steps = (256, 100) if quick else (1024, 1000)
    repeats = 1 if quick else 3
    x0 = random_tokens(1, n, 3, seed=0, dtype=torch.float32)
    w = preset_weights("identity", 3, dtype=torch.float32)
    x4 = x0.unsqueeze(1)  # (B, H, N, d) for the reference kernels

    def ref_sa():
        for _ in range(steps):
            F.scaled_dot_product_attention(x4, x4, x4, scale=1.0)

    def ref_usa():
        for _ in range(steps):
            torch.exp(x0 @ x0.transpose(-1, -2)) @ x0 / n

    rows = []
    for name, normalized, ref in (("SA", True, ref_sa), ("USA", False, ref_usa)):
        cfg = FlowConfig(beta=1.0, normalized=normalized, step=0.01, steps=steps)
        t_ref = median_time(ref, repeats=repeats, warmup=1)
        t_sim = median_time(lambda: simulate(x0, w, cfg), repeats=repeats, warmup=1)
        rows.append({"case": f"{name} Euler, n={n}, d=3, {steps} steps", "seconds": t_sim,
                     "ratio_to_reference": t_sim / t_ref, "target_s": 2.0 if not quick else None})
    frames = 50 if quick else 200
    traj = simulate_preset(n=64, beta=4.0, steps=frames - 1, step=0.1, seed=0)
    fig = sphere_figure(traj.x[:, 0], traj.times)
    rows.append({"case": f"animation, 64 tokens, {len(fig.frames)} frames", "seconds": None,
                 "ratio_to_reference": None, "target_s": None, "bytes": figure_bytes(fig)})
    for r in rows:
        r.setdefault("bytes", None)
    return rows
