"""Bench section "engine": the training engine against a bare PyTorch loop, and seed ensembles.

Rows (all ratios of CPU times measured in the same run on the same tiny NT model, N2T5 at N_con = 16, 802 parameters):

- ``engine_overhead``: time per step of :func:`energylab.engine.train.train` over a bare ``zero_grad / backward / step``
  loop with the same model, optimiser and batches (target <= 1.10);
- ``ensemble_speedup``: S = 8 sequential ``train`` runs over one vmapped
:func:`energylab.engine.ensemble.train_ensemble`
  run of the 8 seeds with ``TrainConfig(compile=True)`` (target >= 3 in every one of 5 rounds; ``ratios`` lists
  the rounds, ``ratio`` is their median), for the per-position model and for the shared-weights variant (112
  parameters). Both sides train the same models (the seed's initial weights) on the same batches for the same steps
  with the same SGD; the sequential runs are plain eager ``train`` calls, as the book runs them. The ensemble is
  compiled (``torch.compile`` of its vmapped forward and backward): the compilation is paid once per process, in
  the warm-up call that :func:`energylab.bench.cpu_times` makes before the timed rounds, and is not in the ratios;
  ``compile_s`` reports that warm-up call's CPU seconds (less when Inductor's on-disk cache already holds the
  kernels). Compiled, the ensemble equals the sequential runs up to float rounding, not bit for bit;
- ``ensemble_speedup_eager``: the same comparison with the uncompiled ensemble (what ``train_ensemble`` does by
  default, e.g. in chapters 4 and 5); no target. The eager vmapped step of this tiny model is dominated by
  dispatching ~300 small kernels (and their autograd nodes) per step, which vmap batches but cannot remove;
- ``ensemble_speedup_both_compiled``: the compiled ensemble against 8 sequential ``train`` runs that are compiled
  too (``TrainConfig(compile=True)``; their compilation also falls in the warm-up call): what batching the members
  gains once compilation has removed most of the per-op overhead from both sides; no target.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import replace

import torch

from energylab.bench import cpu_times
from energylab.engine.ensemble import train_ensemble
from energylab.engine.train import TrainConfig, train
from energylab.models.nt import NTModel, NTModelConfig, accuracy, squared_error
from energylab.tasks import nt

S = 8  # ensemble size of the target


def _setup(steps: int):
    config = NTModelConfig(N=2, n_con=16, attention="EA")
    data = [nt.batch(2, 5, 16, 40, generator=torch.Generator().manual_seed(i)) for i in range(steps)]

    def loss_fn(model, batch):
        x, y = batch
        out = model(x)
        return squared_error(out, y), {"acc": accuracy(out, y)}

    train_cfg = TrainConfig(steps=steps, optimizer="sgd", lr=0.02, momentum=0.8, progress=False, device="cpu")
    return config, data, loss_fn, train_cfg


def _interleaved(fns: dict, repeats: int) -> dict:
    """Median CPU time of each function, alternating calls (:func:`energylab.bench.cpu_times`)."""
    return {name: statistics.median(ts) for name, ts in cpu_times(fns, repeats).items()}


def run(quick: bool) -> list[dict]:
    torch.set_num_threads(1)  # CPU time measures the work only on one thread (idle threads spin and are counted)
    steps, repeats = (20, 3) if quick else (100, 5)
    config, data, loss_fn, train_cfg = _setup(steps)

    def bare():
        torch.manual_seed(0)
        model = NTModel(config)
        opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.8)
        for step in range(steps):
            loss, _ = loss_fn(model, data[step])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    def engine():
        torch.manual_seed(0)
        train(NTModel(config), loss_fn, lambda step: data[step], train_cfg)

    t = _interleaved({"bare": bare, "engine": engine}, repeats)
    rows = [{"case": "engine_overhead", "model": "NT N2T5 N_con=16 (802 params)", "steps": steps,
             "ratio": t["engine"] / t["bare"], "target": "<= 1.10", "reference": "bare PyTorch loop",
             "ms_per_step_ref": 1e3 * t["bare"] / steps, "ms_per_step": 1e3 * t["engine"] / steps,
             "min_ratio": None, "ratios": None, "compile_s": None}]
    compiled_cfg = replace(train_cfg, compile=True)
    for label, cfg in (("802 params", config), ("shared, 112 params", replace(config, per_position=False))):
        def sequential(cfg=cfg, tcfg=train_cfg):
            for seed in range(S):
                torch.manual_seed(seed)
                train(NTModel(cfg), loss_fn, lambda step, s=seed: data[(step + s) % steps], tcfg)

        def ensemble(cfg=cfg, tcfg=train_cfg):
            train_ensemble(lambda seed: NTModel(cfg), loss_fn, lambda step, s: data[(step + s) % steps],
                           tcfg, list(range(S)), vmapped=True)

        t0 = time.process_time()
        ensemble(tcfg=compiled_cfg)  # compiles (once per process); cpu_times' own warm-up then runs compiled
        compile_s = time.process_time() - t0
        t = cpu_times({"sequential": sequential, "ensemble": lambda: ensemble(tcfg=compiled_cfg),
                       "eager": ensemble, "sequential compiled": lambda: sequential(tcfg=compiled_cfg)}, repeats)
        for case, key, ref, target, note in (
                ("ensemble_speedup", "ensemble", "sequential", f">= 3 (S={S}) in every round", compile_s),
                ("ensemble_speedup_eager", "eager", "sequential", None, None),
                ("ensemble_speedup_both_compiled", "ensemble", "sequential compiled", None, None)):
            ratios = [a / b for a, b in zip(t[ref], t[key])]  # one speed-up per round
            rows.append({"case": case, "model": f"NT N2T5 N_con=16 ({label})", "steps": steps,
                         "ratio": statistics.median(ratios), "target": target,
                         "reference": f"{S} sequential train() runs" + (", compiled" if ref != "sequential" else ""),
                         "ms_per_step_ref": 1e3 * statistics.median(t[ref]) / steps,
                         "ms_per_step": 1e3 * statistics.median(t[key]) / steps,
                         "min_ratio": min(ratios), "ratios": " ".join(f"{r:.2f}" for r in ratios),
                         "compile_s": note})
    return rows
