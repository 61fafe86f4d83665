"""Ramsauer et al.'s regimes of attention heads, measured on a looped Transformer the book trains (chapter 3).

Read as a Hopfield update, every query row of an attention head settles either on (I) a global average of all N
tokens, (II) a metastable state averaging a subset, or (III) a fixed point near one token (Ramsauer et al. 2021,
Sec. 2 and Sec. 4). Per (iteration t, head h) we take the softmax weights p of every query over a set of boards and
record, over all queries,

- the median participation ratio r = 1/Σ_j p_j² (chapter 3's measure: how many tokens the head averages);
- the median k of the smallest number of weights that sum to 0.90 (the paper's measure);
- the mean weight on the query cell's Sudoku peers (its row, column and box, itself included).

A head's **regime** comes from its median r: ``"global"`` if r > N/2 (the paper's class-I boundary on k),
``"single"`` if r ≤ ``SINGLE`` (fewer than two tokens' worth), ``"metastable"`` otherwise. :func:`paper_class`
gives the paper's four classes from the median k: (I) k > N/2, (II) N/8 < k ≤ N/2, (III) N/32 < k ≤ N/8,
(IV) k ≤ N/32.

The model is :mod:`energylab.experiments.sudoku`'s looped Transformer (one shared pre-RMSNorm block iterated T
times) at the size in :data:`HEADS` (4×4 boards, N = 16 tokens, 4 heads, T = 4): seconds on one CPU thread.
"""
from __future__ import annotations

import dataclasses

import torch

from energylab.engine.train import TrainConfig, train
from energylab.experiments import sudoku
from energylab.tasks import sudoku_harness as harness
from energylab.tasks.sudoku_solver import geometry

__all__ = ["HEADS", "SINGLE", "participation", "mass_count", "regime", "paper_class", "peer_mask", "head_weights",
           "head_table", "train_looped", "board_accuracy"]

# 4×4 Sudoku, d = 32, 4 heads, T = 4, 468 steps of 32 boards (6 epochs of 2,500): about 10 s on one CPU thread
HEADS = dataclasses.replace(sudoku.PROFILES["quick"], dim=32, heads=4, iterations=4, test_iterations=(4,), epochs=6,
                            batch_size=32, warmup_steps=20, test_sets=("4x4-id",), n_test=500, progress=False,
                            n_trace=0)
SINGLE = 2.0  # a head whose median participation ratio is at most this retrieves one token


def participation(p: torch.Tensor) -> torch.Tensor:
    """1/Σ_j p_j² over the last axis: 1 for one token, N for uniform weights over N."""
    return 1.0 / p.pow(2).sum(-1)


def mass_count(p: torch.Tensor, mass: float = 0.9) -> torch.Tensor:
    """The smallest number of weights (largest first) whose sum reaches ``mass``, over the last axis (int64)."""
    cum = p.sort(-1, descending=True).values.cumsum(-1)
    return (cum < mass - 1e-12).sum(-1) + 1


def regime(median_participation: float, n_tokens: int, single: float = SINGLE) -> str:
    """"global" (r > N/2), "single" (r ≤ ``single``) or "metastable" for a head's median participation ratio r."""
    if median_participation > n_tokens / 2:
        return "global"
    return "single" if median_participation <= single else "metastable"


def paper_class(median_k: float, n_tokens: int) -> str:
    """Ramsauer et al.'s operating class (I–IV) of a head from the median k of its 90%-mass counts."""
    if median_k > n_tokens / 2:
        return "I"
    if median_k > n_tokens / 8:
        return "II"
    return "III" if median_k > n_tokens / 32 else "IV"


def peer_mask(size: int) -> torch.Tensor:
    """(N, N) bool: cells i and j share a row, a column or a box (the diagonal included)."""
    g = geometry(size)
    mask = torch.eye(g.cells, dtype=torch.bool)
    for i, peers in enumerate(g.peers):
        mask[i, list(peers)] = True
    return mask


@torch.no_grad()
def head_weights(model: sudoku.LoopedModel, tokens: torch.Tensor, iterations: int | None = None) -> torch.Tensor:
    """Attention weights of every iteration: (T, B, H, N, N) for boards ``tokens`` (B, N), in float64. Iteration t
    attends over h = x_{t−1} + c (x_0 = c), as the looped Transformer block does."""
    T = model.config.iterations if iterations is None else iterations
    c = model.inputs(tokens)
    out, x = [], c
    for _ in range(T):
        out.append(model.layer.attention_weights(x + c).double())
        x = model.layer(x, c)
    return torch.stack(out)


def head_table(model: sudoku.LoopedModel, tokens: torch.Tensor, iterations: int | None = None) -> list[dict]:
    """One row per (iteration t, head h) over every query cell of the boards ``tokens``: {"t", "head",
    "participation" (median r), "k90" (median k), "peer_weight" (mean), "regime", "class", "quantiles" (of r at
    10, 25, 50, 75 and 90%: "q10" … "q90")}. Medians and quantiles interpolate (torch.quantile)."""
    was_training = model.training
    model.eval()
    p = head_weights(model, tokens, iterations)  # (T, B, H, N, N)
    model.train(was_training)
    N, size = p.shape[-1], model.config.size
    r = participation(p).transpose(1, 2).flatten(2)  # (T, H, B·N)
    k = mass_count(p).transpose(1, 2).flatten(2).double()
    peers = (p * peer_mask(size).to(p.device)).sum(-1).transpose(1, 2).flatten(2)
    levels = torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9], dtype=torch.float64)
    rows = []
    for t in range(p.shape[0]):
        for h in range(p.shape[2]):
            q = torch.quantile(r[t, h], levels).tolist()
            med_k = float(torch.quantile(k[t, h], 0.5))
            rows.append({"t": t + 1, "head": h + 1, "participation": q[2], "k90": med_k,
                         "peer_weight": float(peers[t, h].mean()), "regime": regime(q[2], N),
                         "class": paper_class(med_k, N),
                         "quantiles": dict(zip(("q10", "q25", "q50", "q75", "q90"), q))})
    return rows


def train_looped(config: sudoku.Config = HEADS, seed: int = 0, trained: bool = True):
    """The looped Transformer of ``config`` with seed ``seed``, trained on its training boards (cross-entropy on the
    blanks) unless ``trained`` is False (then as initialised), in float32 whatever the default dtype. Returns
    ``(model, test)``: the model in eval mode on the CPU and the first test set (a
    :class:`~energylab.tasks.sudoku.SudokuDataset`)."""
    test = harness.load_set(config.test_sets[0], "test", config.n_test, config.size, config.data_seed)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)  # trained in float32 as the experiment is, whatever the caller's default
    try:
        torch.manual_seed(seed)
        model = sudoku.make_model(config)
        if trained:
            data = harness.load_set(config.train_set, "train", config.n_train, config.size, config.data_seed)
            batches, per_epoch = harness.epoch_batches(data, config.batch_size, seed)
            train(model, harness.blank_loss, batches,
                  TrainConfig(steps=config.epochs * per_epoch, optimizer="adamw", lr=config.lr, betas=config.betas,
                              schedule=config.schedule, warmup_steps=config.warmup_steps,
                              grad_clip=config.grad_clip, log_every=per_epoch, device="cpu", seed=seed,
                              progress=False))
    finally:
        torch.set_default_dtype(default)
    return model.eval(), test


def board_accuracy(model: sudoku.LoopedModel, test) -> float:
    """Share of the test boards solved at the model's training T."""
    T = model.config.iterations
    return harness.test_time(model, test, (T,))[T]["board"]
