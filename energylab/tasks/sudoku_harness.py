"""The harness of the looped Sudoku models: the data, the loss, the batches and the evaluation at several T.

Every Sudoku experiment trains and scores through these functions (:mod:`energylab.experiments.sudoku` and its
league, ``recurrent``, ``forms``, ``sudoku_voting``, ``hopfield_heads``), and the chapters and tests load their
boards with :func:`load_set`:

- data: a set is a name in ``energylab.tasks.sudoku.NAMED_SETS`` (generated and cached: ``"4x4-id"``,
  ``"4x4-ood"``, ``"6x6-id"``, ``"6x6-ood"``, ``"satnet-like"``, ``"rrn-like"``, ``"rrn-17"``, and
  ``"6x6-search"``, ``"9x9-search"``: boards constraint propagation cannot finish,
  :mod:`energylab.tasks.sudoku_search`), or the public files as ``"satnet:<dir>"`` / ``"rrn:<dir>"`` (RRN: the
  seeded random subset of ``load_rrn``, as Hyper-SET's code takes). Our machines cannot download the public files,
  so the profiles use generated sets;
- loss: :func:`blank_loss`, cross-entropy on the blanks only (:func:`regularised_loss` adds a regulariser of the
  layer); batches: :func:`epoch_batches`, a seeded permutation per epoch (optionally through random symmetries);
- evaluation: :func:`test_time`, board and cell accuracy on the blanks after each T of one pass (the counts of
  :func:`energylab.tasks.sudoku.sudoku_counts`, as every Sudoku score of the book), and :func:`iteration_metrics`,
  the layer's own measures along the iterations.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch
import torch.nn.functional as F

from energylab.engine.batches import EpochOrder
from energylab.models.looped import LoopedModel
from energylab.models.regularisers import REGULARISERS, regulariser
from energylab.tasks import sudoku as tasks
from energylab.tasks import sudoku_symmetry as symmetry

__all__ = ["load_set", "blank_loss", "regularised_loss", "epoch_batches", "test_time", "iteration_metrics"]


def load_set(name: str, split: str, n: int, size: int, data_seed: int = 0) -> tasks.SudokuDataset:
    """The dataset called ``name`` (a named set or the public files: see the module docstring), its first ``n``
    boards (or a seeded sample of n for RRN's files); ValueError if its boards are not ``size``×``size``."""
    if name.startswith("satnet:"):
        ds = tasks.load_satnet(name.split(":", 1)[1], "train" if split == "train" else "test")
        ds = tasks.SudokuDataset(ds.puzzles[:n], ds.solutions[:n])
    elif name.startswith("rrn:"):
        ds = tasks.load_rrn(name.split(":", 1)[1], split, limit=n, seed=data_seed)
    elif name in tasks.NAMED_SETS:
        base = tasks.NAMED_SETS[name]
        config = dataclasses.replace(base, n_train=n if split == "train" else base.n_train,
                                     n_test=n if split == "test" else base.n_test, seed=data_seed)
        ds = tasks.sudoku_dataset(config, split, progress=False)
    else:
        raise ValueError(f"unknown set {name!r}: use one of {sorted(tasks.NAMED_SETS)}, 'satnet:<dir>' or 'rrn:<dir>'")
    if ds.size != size:
        raise ValueError(f"set {name!r} has {ds.size}x{ds.size} boards, the config says size={size}")
    return ds


def blank_loss(model, batch):
    """Cross-entropy on the blanks only, and the cell accuracy there."""
    tokens, target, mask = batch
    logits = model(tokens)  # (B, N, n)
    loss = F.cross_entropy(logits[mask], target[mask])
    return loss, {"cell": (logits.argmax(-1)[mask] == target[mask]).float().mean()}


def regularised_loss(name: str, weight: float):
    """``blank_loss`` plus ``weight`` times the regulariser ``name`` of the model's layer (paper 003, Sec. 6.2)."""
    if name != "none" and name not in REGULARISERS:
        raise ValueError(f"regulariser must be 'none' or one of {sorted(REGULARISERS)}, got {name!r}")
    if name == "none" or weight == 0:
        return blank_loss

    def loss(model, batch):
        base, metrics = blank_loss(model, batch)
        penalty = regulariser(name, getattr(model, "module", model).layer)  # DDP wraps the model
        return base + weight * penalty, {**metrics, "reg": penalty.detach()}

    return loss


def epoch_batches(data: tasks.SudokuDataset, batch_size: int, seed: int, augment: bool = False):
    """``step -> (tokens, target, mask)``: each epoch a fresh seeded permutation, cut into full batches; with
    ``augment`` each board seen through a random symmetry drawn from (seed, step), so a resumed run sees the same."""
    order = EpochOrder(len(data), batch_size)

    def batch(step: int):
        idx = order(step, seed)
        if augment:
            return symmetry.augment(data.tokens[idx], data.target[idx], data.size,
                                    np.random.default_rng([seed, step]))
        return data.tokens[idx], data.target[idx], data.mask[idx]

    return batch, order.steps_per_epoch


@torch.no_grad()
def test_time(model: LoopedModel, data: tasks.SudokuDataset, iterations, chunk: int = 500) -> dict[int, dict]:
    """{T: {"board", "cell"}} on the blanks of ``data``, reading out after each T of one pass: the exact counts of
    :func:`energylab.tasks.sudoku.sudoku_counts` summed over chunks, so the numbers of
    :func:`~energylab.tasks.sudoku.sudoku_accuracy` (the no-learning baselines' scorer) on the whole set."""
    device = next(model.parameters()).device
    right = {t: [0, 0, 0] for t in iterations}  # right cells, counted cells, solved boards
    was_training = model.training
    model.eval()
    for i in range(0, len(data), chunk):
        tokens, target, mask = (t[i:i + chunk].to(device) for t in (data.tokens, data.target, data.mask))
        for t, logits in model.readouts(tokens, iterations).items():
            right[t] = [a + b for a, b in zip(right[t], tasks.sudoku_counts(logits.argmax(-1), target, mask))]
    model.train(was_training)
    return {t: {"board": r[2] / len(data), "cell": r[0] / max(r[1], 1)} for t, r in right.items()}


@torch.no_grad()
def iteration_metrics(model: LoopedModel, tokens: torch.Tensor, iterations: int) -> dict[str, list] | None:
    """Means over ``tokens`` of the layer's ``metrics(x, t)`` at t = 0..iterations (t = 0: x_0 = c), or None if the
    layer has none. For Hyper-SET also ``attention_mid``: E_ATTN after iteration t's attention half
    (``HyperSETLayer.attention_after_halves``; index 0 repeats t = 0), which splits each change of E_ATTN between
    the attention half and the feedforward half."""
    layer = model.layer
    if not hasattr(layer, "metrics"):
        return None
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    c = model.inputs(tokens.to(device))
    _, states = model(tokens.to(device), iterations, return_states=True)
    xs = [c] + states
    rows = [layer.metrics(x, max(t, 1)) for t, x in enumerate(xs)]
    out = {k: [round(float(r[k].double().mean()), 6) for r in rows] for k in rows[0]}
    if hasattr(layer, "attention_after_halves"):
        out["attention_mid"] = [out["attention"][0]] + [round(float(e.double().mean()), 6)
                                                        for e in layer.attention_after_halves(xs, c)]
    model.train(was_training)
    return out
