"""Every trainable form under one budget: looped 4×4 Sudoku, one block per form, 3 seeds (for the Atlas).

Each layer of :mod:`energylab.layers` that fits a looped block, and the layers built by :func:`energylab.derive`
from the energies of :mod:`energylab.layers.derived`, is trained as the shared block of a
:class:`~energylab.models.looped.LoopedModel` on the same boards with the same optimiser, steps, batches and
seeds. The block is h = x + c; h = h + A(RMSNorm(h)); x' = h + F(RMSNorm(h)): ``form-<attention>`` swaps A
(F = the GELU MLP), ``form-<feedforward>`` swaps F (A = softmax MHA), ``derived-<energy>`` uses A = η·(−∇E)
from autograd. The softmax baseline ``form-mha`` is the Transformer block of the Sudoku chapter.

Measured per (layer, seed): cell and board accuracy on the blanks of held-out boards at the training T, the
trainable parameters and the CPU time per training step. ``tables["summary"]`` has one row per layer: seed-mean
and spread of the accuracies, parameters, and the time per step as a ratio to the baseline's. That ratio comes
from :func:`time_per_step`, which times a few steps of every layer in turn, round after round, on one batch: the
per-run times of a long sequential run drift with the machine's load (measured: the baseline, timed first on a
busy machine, came out 7-10x slower than later layers), interleaving removes the drift.
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import time
from dataclasses import dataclass

import torch

from energylab._setup import choose_device
from energylab.engine.results import Results, seed_spread
from energylab.engine.runs import config_record
from energylab.engine.train import TrainConfig, train
from energylab.layers import derived as D
from energylab.models import count_parameters
from energylab.models.looped import LoopedConfig, LoopedModel
from energylab.tasks.sudoku_harness import blank_loss, epoch_batches, load_set, test_time

LAYERS = D.LAYER_NAMES


CHAPTER = "10_design_your_own"  # the chapter that trains it: notebooks/10_design_your_own.ipynb


@dataclass
class Config:
    layers: tuple[str, ...] = LAYERS  # every trainable form that fits the looped block (see the docstring)
    baseline: str = "form-mha"  # the time ratios are to this layer (softmax MHA + MLP), measured in the same run
    size: int = 4  # 4×4 boards: the one quick task every form can learn on a CPU in seconds
    train_set: str = "4x4-id"  # generated, cached boards (energylab.tasks.sudoku.NAMED_SETS)
    test_set: str = "4x4-id"  # held-out boards of the same distribution
    n_train: int = 1000  # enough boards that 300 steps of 32 see each about 10 times
    n_test: int = 300  # held-out boards: ±3% on a board accuracy near 50%
    dim: int = 32  # width d: small enough for 33 runs in minutes, large enough to learn 4×4
    heads: int = 4  # H = 4, d_h = 8 (the Sudoku chapter's head count)
    ffn_mult: int = 4  # MLP / energy-feedforward width 4d (the papers' ratio)
    iterations: int = 8  # T = 8 loops in training and in the test (the Sudoku chapter's quick T)
    steps: int = 300  # the budget: optimiser steps, the same for every form (softmax MHA: 95% cells at seed 0)
    batch_size: int = 32  # boards per step
    lr: float = 3e-3  # AdamW peak lr, cosine to 0 (one lr for all: the budget includes no tuning)
    warmup_steps: int = 30  # linear warm-up: 10% of the steps
    grad_clip: float | None = 1.0  # max gradient norm, as in the Sudoku experiment
    seeds: tuple[int, ...] = (0, 1, 2)  # 3 seeds per form (model init and batch order)
    timing_steps: int = 5  # training steps per layer and round of the interleaved timing (3 rounds, median)
    data_seed: int = 0  # seed of the generated boards
    checkpoint_every: int = 0  # steps between checkpoints in out_dir (0: only at the end of each layer and seed)
    device: str = "auto"  # "auto", "cpu", "cuda", ...
    progress: bool = False  # progress bars (33 short runs: off)


PROFILES = {
    "quick": Config(),
    # the Sudoku chapter's quick budget (d = 64, 2,500 boards, 1,170 steps of 64) for every form
    "medium": Config(dim=64, n_train=2500, n_test=500, steps=1170, batch_size=64, lr=1e-3, warmup_steps=50),
    # 6×6 boards (2×3 boxes) at d = 128 for a GPU: a budget where the forms' gaps are not just speed of learning
    "full": Config(size=6, train_set="6x6-id", test_set="6x6-id", n_train=9000, n_test=1000, dim=128, heads=8,
                   steps=5600, batch_size=64, lr=1e-3, warmup_steps=200),
}
COST = {
    "quick": "7.4 min on one CPU thread (measured: 407 s of CPU, 11 forms x 3 seeds x 300 steps at d = 32; "
             "committed as results/forms/quick.json)",
    "medium": "about 1.5 h on one CPU thread (11 forms x 3 seeds x 1,170 steps at d = 64; estimate from the "
              "Sudoku quick run, derived-cauchy is 3x slower than the baseline)",
    "full": "estimated 1-3 h on one GPU (11 forms x 3 seeds x 5,600 steps on 6x6 boards at d = 128; not timed)",
}


def make_model(config: Config, layer: str) -> LoopedModel:
    return LoopedModel(LoopedConfig(size=config.size, dim=config.dim, heads=config.heads, ffn_mult=config.ffn_mult,
                                    layer=layer, iterations=config.iterations))


def run(config: Config, out_dir: str | None = None, resume: bool = False) -> Results:
    """Train every layer of ``config.layers`` for every seed under one budget; accuracy, parameters, time ratio.

    ``out_dir``: each (layer, seed) checkpoints in ``out_dir/<layer>/seed<s>``; ``resume`` continues the
    unfinished ones and reloads the finished ones (the medium profile is 33 runs, 1.5 h). ``seconds_per_step``
    of a run counts the steps trained by this call (None for a run that had finished before); the summary's
    time ratios come from :func:`time_per_step`, measured afresh.
    """
    if config.baseline not in config.layers:
        raise ValueError(f"baseline {config.baseline!r} must be one of the layers {config.layers}")
    unknown = [name for name in config.layers if name not in D.LAYER_NAMES]
    if unknown:
        raise ValueError(f"unknown layers {unknown}; valid: {list(D.LAYER_NAMES)}")
    if not config.seeds or config.steps < 1:
        raise ValueError(f"need at least one seed and one step, got seeds={config.seeds}, steps={config.steps}")
    device = choose_device(config.device)
    train_data = load_set(config.train_set, "train", config.n_train, config.size, config.data_seed)
    test_data = load_set(config.test_set, "test", config.n_test, config.size, config.data_seed)
    results = Results("forms", dataclasses.asdict(config))
    rows = []
    for layer in config.layers:
        for s in config.seeds:
            torch.manual_seed(s)
            model = make_model(config, layer)
            batches, _ = epoch_batches(train_data, config.batch_size, s)
            train_cfg = TrainConfig(
                steps=config.steps, optimizer="adamw", lr=config.lr, schedule="cosine",
                warmup_steps=config.warmup_steps, grad_clip=config.grad_clip, log_every=max(1, config.steps // 10),
                checkpoint_every=config.checkpoint_every, device=str(device), seed=s, progress=config.progress)
            trained = []  # the steps this call trains (a resumed run skips the ones in its checkpoint)
            t0 = time.process_time()
            history = train(model, blank_loss, batches, train_cfg, after_step=lambda m, step: trained.append(step),
                            out_dir=None if out_dir is None else os.path.join(out_dir, layer, f"seed{s}"),
                            resume=resume, identity=config_record(config))
            seconds = (time.process_time() - t0) / len(trained) if trained else None
            results.histories[f"{layer}/seed{s}"] = history
            acc = test_time(model, test_data, (config.iterations,))[config.iterations]
            rows.append({"layer": layer, "seed": s, "cell": acc["cell"], "board": acc["board"],
                         "parameters": count_parameters(model), "seconds_per_step": seconds})
    timing = time_per_step(config, train_data)
    results.tables["runs"] = rows
    results.tables["summary"] = summarize(rows, config.baseline, timing)
    for row in results.tables["summary"]:
        for key in ("cell", "board", "time_ratio"):
            results.final[f"{row['layer']}/{key}"] = row[key]
    results.extra.update(device=str(device), steps=config.steps, chance_cell=1 / config.size)
    return results


def time_per_step(config: Config, data, rounds: int = 3) -> dict[str, float]:
    """CPU seconds per training step of every layer: ``config.timing_steps`` AdamW steps on one batch per layer and
    round, layers in turn, ``rounds`` rounds (after one warm-up step each); the median over rounds."""
    batch = epoch_batches(data, config.batch_size, 0)[0](0)
    runs = {}
    for name in config.layers:
        torch.manual_seed(0)
        model = make_model(config, name)
        # fused: its sqrt is the IEEE one (see train.make_optimizer)
        runs[name] = (model, torch.optim.AdamW(model.parameters(), lr=config.lr, fused=True))

    def steps(name: str, n: int) -> None:
        model, opt = runs[name]
        for _ in range(n):
            loss, _ = blank_loss(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    times = {name: [] for name in config.layers}
    for name in config.layers:
        steps(name, 1)
    for _ in range(rounds):
        for name in config.layers:
            t0 = time.process_time()
            steps(name, config.timing_steps)
            times[name].append((time.process_time() - t0) / config.timing_steps)
    return {name: statistics.median(ts) for name, ts in times.items()}


def summarize(rows: list[dict], baseline: str, timing: dict[str, float] | None = None) -> list[dict]:
    """One row per layer: mean and spread (:func:`~energylab.engine.results.seed_spread`) of cell/board accuracy over
    seeds, parameters, and the time per step over the baseline's: from ``timing`` (:func:`time_per_step`) when
    given, else the median of the runs' own times."""
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    median_time = timing or {name: statistics.median(r["seconds_per_step"] for r in rows if r["layer"] == name
                                                     and r["seconds_per_step"] is not None) for name in layers}
    out = []
    for name in layers:
        mine = [r for r in rows if r["layer"] == name]
        (cell, cell_std), (board, board_std) = (seed_spread(r[k] for r in mine) for k in ("cell", "board"))
        out.append({"layer": name, "cell": cell, "cell_std": cell_std, "board": board, "board_std": board_std,
                    "parameters": mine[0]["parameters"], "time_ratio": median_time[name] / median_time[baseline],
                    "seeds": len(mine)})
    return out
