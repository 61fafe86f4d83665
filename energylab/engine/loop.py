"""The one training loop (:func:`training_loop`) and its steps, for one model (:func:`energylab.engine.train.train`)
or S models stacked into one vmapped computation (:mod:`energylab.engine.ensemble`); :class:`Members` says what the
loop needs of either. Per optimiser step: forward, a check that the loss is finite (:class:`TrainingDiverged`
otherwise), the optimiser step at the schedule's learning rate (:func:`lr_multiplier`), the train metrics logged per
``log_every`` window, evaluation and an atomic checkpoint when due (:mod:`energylab.engine.runs`), a progress bar.
"""
from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from energylab.engine.results import History
from energylab.engine.runs import CHECKPOINT, get_rng_state, save_checkpoint

# ``config`` below is an :class:`energylab.engine.train.TrainConfig` (not imported: train imports this module)
TrainConfig = Any


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; ``step`` says where. The last good checkpoint is kept."""

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


def diverged(what: str, step: int, out_dir: str | None, saved: int) -> TrainingDiverged:
    """A :class:`TrainingDiverged` that says where the last good checkpoint (written at step ``saved``) is."""
    if out_dir is None:
        where = "no checkpoints (out_dir=None)"
    elif saved:
        where = f"the last good checkpoint (step {saved}) is kept in {os.path.join(out_dir, CHECKPOINT)}"
    else:
        where = "no checkpoint of this run was written (checkpoint_every > 0 keeps intermediate ones)"
    return TrainingDiverged(f"{what}; {where}", step)


# ---------------------------------------------------------------------------------------------- the loop


def lr_multiplier(config: TrainConfig, total: int) -> Callable[[int], float]:
    """``step -> factor`` on the peak lr: linear warm-up, then constant, cosine or step decay."""
    warm = config.warmup_steps

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        s = step - warm
        if config.schedule == "cosine":
            progress = s / max(1, total - warm)
            return config.min_lr_ratio + (1 - config.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
        if config.schedule == "step":
            return config.lr_gamma ** (s // config.lr_step)
        return 1.0

    return factor


# ------------------------------------------------------------------ bookkeeping shared with energylab.engine.ensemble


class NonFinite(FloatingPointError):
    """Raised inside a step whose gradients (or whose updated parameters) are not finite; the loop turns it into a
    :class:`TrainingDiverged` before anything is logged or written."""


def non_finite(tensors) -> bool:
    """Whether any of the floating tensors holds a NaN or an infinity (one reduction and one sync for all)."""
    tensors = [t for t in tensors if t is not None and t.is_floating_point()]
    if not tensors:
        return False
    return not bool(torch.stack([t.detach().isfinite().all() for t in tensors]).all())


def optimizer_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, config: TrainConfig, factor: float,
                   clip: Callable[[float], Any]) -> None:
    """One optimiser step on ``loss``: backward, a check that every gradient is finite (:class:`NonFinite`
    otherwise: a finite loss can still have NaN gradients, e.g. NaN data behind a masked loss), ``clip(
    config.grad_clip)`` when clipping is on, the learning rate ``config.lr * factor`` (``factor`` from
    :func:`lr_multiplier`), ``optimizer.step()``."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if non_finite(p.grad for p in params):
        raise NonFinite("a gradient is NaN or infinite (the loss was finite)")
    if config.grad_clip is not None:
        clip(config.grad_clip)
    for group in optimizer.param_groups:
        group["lr"] = config.lr * factor
    optimizer.step()


def log_window(history: History, window: dict, metrics: dict[str, float], done: int, log_every: int,
               total: int) -> None:
    """Add one step's train ``metrics`` to ``window``; after every ``log_every`` steps (and the last of ``total``)
    log the window's means in ``history`` at ``done`` completed steps and empty it."""
    for name, value in metrics.items():
        window[name] = window.get(name, 0.0) + value
    window["_n"] = window.get("_n", 0) + 1
    if done % log_every == 0 or done == total:
        n = window.pop("_n")
        history.log(done, {k: v / n for k, v in window.items()})
        window.clear()


def due(every: int, done: int, total: int) -> bool:
    """Whether an evaluation or checkpoint made ``every`` steps (0 = only at the end) is due after ``done``."""
    return bool(every and done % every == 0) or done == total


def evaluate(model: nn.Module, eval_fn: Callable[[nn.Module], dict], average=None) -> dict[str, float]:
    """``eval_fn(model)`` in eval mode under ``torch.no_grad``, as Python numbers; the model is left in train mode.
    With ``average`` (a :class:`energylab.engine.train.WeightAverage`) the model holds the averaged weights
    meanwhile."""
    model.eval()
    with torch.no_grad(), (average.swapped() if average is not None else contextlib.nullcontext()):
        metrics = {k: float(v) for k, v in eval_fn(model).items()}  # read while the evaluated weights are in
    model.train()
    return metrics


def progress_bar(enabled: bool, total: int, start: int):
    """A tqdm.auto bar over ``total`` steps from ``start`` (disabled when not ``enabled``)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, disable=not enabled, desc="train", dynamic_ncols=True,
                mininterval=0.5)


def _tensors(entry):
    """The tensors of a (nested) state dict."""
    for value in entry.values():
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, dict):
            yield from _tensors(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, dict):
                    yield from _tensors(item)
                elif isinstance(item, torch.Tensor):
                    yield item


@dataclass
class Members:
    """What :func:`training_loop` needs of the model(s) it trains: one model (:func:`train`) or S stacked models
    trained as one vmapped computation (:func:`energylab.engine.ensemble.train_ensemble`). Lists hold one entry per
    member.

    forward(step) -> (loss to minimise, [loss value per member], raw metrics); update(loss, lr factor, step): the
    optimiser step and ``after_step``; numbers(raw metrics) -> [metrics per member] as Python numbers (read after
    the update, as a metric may be a parameter); evaluate(eval_fn) -> [eval metrics per member]; state() -> the
    checkpoint entries of the model(s) and optimiser; diverged(step, values) -> why the step failed, or None.
    """

    forward: Callable[[int], tuple]
    update: Callable[[torch.Tensor, float, int], None]
    numbers: Callable[[Any], list[dict]]
    evaluate: Callable[[Callable], list[dict]]
    state: Callable[[], dict]
    diverged: Callable[[int, list[float]], str | None]


def training_loop(members: Members, config: TrainConfig, total: int, start: int, histories: list[History],
                  windows: list[dict], *, eval_fn=None, out_dir: str | None = None, identity: Any = None,
                  progress: bool = True, ensemble: bool = False) -> list[History]:
    """The one training loop, steps ``start`` .. ``total`` − 1: forward, a check that the loss is finite, the
    optimiser step at the schedule's learning rate, the train metrics logged per ``log_every`` window, evaluation
    and checkpoints when due, a progress bar. ``histories`` and ``windows`` (one per member) are updated in place
    and returned; a checkpoint holds ``members.state()``, the step, the histories, the RNG state and ``identity``
    (an ``ensemble``'s under "histories" and "windows", one model's under "history" and "window")."""
    schedule = lr_multiplier(config, total)
    saved = start
    bar = progress_bar(progress, total, start)
    single = not ensemble

    def log_eval(done):
        for history, metrics in zip(histories, members.evaluate(eval_fn)):
            history.log(done, metrics, prefix="eval/")

    if start == 0 and config.eval_at_start and eval_fn is not None:
        log_eval(0)
    for step in range(start, total):
        loss, values, raw = members.forward(step)
        why = members.diverged(step, values)
        if why is not None:
            raise diverged(why, step, out_dir, saved)
        try:
            members.update(loss, schedule(step), step)
        except NonFinite as err:  # nothing logged or saved for this step: the last checkpoint stays the good one
            raise diverged(str(err), step, out_dir, saved) from None

        done = step + 1
        for history, window, value, metrics in zip(histories, windows, values, members.numbers(raw)):
            log_window(history, window, {"loss": value, **metrics}, done, config.log_every, total)
        if eval_fn is not None and due(config.eval_every, done, total):
            log_eval(done)
        if out_dir is not None and due(config.checkpoint_every, done, total):
            state = members.state()
            if non_finite(t for entry in state.values() if isinstance(entry, dict) for t in _tensors(entry)):
                raise diverged("a parameter or optimiser state is NaN or infinite", step, out_dir, saved)
            tracked = ({"history": histories[0].to_dict(), "window": dict(windows[0])} if single else
                       {"histories": [h.to_dict() for h in histories], "windows": [dict(w) for w in windows]})
            save_checkpoint(out_dir, {"step": done, **state, **tracked, "rng": get_rng_state(),
                                      "identity": identity})
            saved = done
        bar.update(1)
        if bar.disable is False and (done == total or bar.n % max(1, total // 200) == 0):
            shown = ({k: f"{v[-1]:.4g}" for k, v in histories[0].curves.items()} if single
                     else {"loss(mean)": f"{sum(values) / len(values):.4g}"})
            bar.set_postfix(shown, refresh=False)
    bar.close()
    return histories
