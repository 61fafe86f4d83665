"""One training engine for every chapter: ``train(model, loss_fn, batches, config)``.

The loop reads top to bottom. Per optimiser step ``s`` (0-based):

1. ``batch = batches(s)`` (a callable of the step index: seeding is easy, resuming exact) or the next item of an
   iterable / DataLoader (restarted every epoch; such a run cannot resume);
2. ``loss, metrics = loss_fn(model, batch)`` under bf16 autocast when ``config.amp`` and the device is CUDA;
3. backward, gradient clipping, the learning rate of the schedule, ``optimizer.step()``;
4. ``after_step(model, s)`` (e.g. rescale couplings to a fixed norm);
5. every ``eval_every`` steps ``eval_fn(model) -> dict``; every ``checkpoint_every`` steps and at the end an
   atomic checkpoint in ``out_dir`` (:mod:`energylab.runs` keeps the checkpoint bookkeeping).

These steps are :func:`training_loop`, the one loop: :func:`train` runs it for one model, and the seed ensembles
of :mod:`energylab.ensemble` run it for S models stacked into one vmapped computation (:class:`Members` says what
the loop needs of either).

Curves are kept in a :class:`History` indexed by the number of completed steps. ``resume=True`` continues
from ``out_dir/checkpoint.pt`` (model, optimiser, history, RNG states, step) and ends with the same numbers as
an uninterrupted run: ``batches(step)`` gives the batch of any step. Under ``torchrun`` (see
:func:`init_distributed`) the model is wrapped in DistributedDataParallel and each rank trains on its slice of the
global batch.
"""
from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Union

import torch
from torch import nn

from energylab._checks import check_bool, check_instance, check_int, check_interval, check_positive
from energylab._setup import choose_device, seed_everything
from energylab.batches import Feed, shard, to_device
from energylab.results import History, Results  # noqa: F401 - API
from energylab.runs import (  # noqa: F401 - API
    CHECKPOINT,
    RESULTS,
    claim_run_dir,
    get_rng_state,
    load_checkpoint,
    load_module_state,
    prepare_out_dir,
    run_identity,
    save_checkpoint,
    set_rng_state,
)

LossFn = Callable[[nn.Module, Any], "tuple[torch.Tensor, dict]"]
Batches = Union[Callable[[int], Any], Iterable]


@dataclass
class TrainConfig:
    """Everything the loop needs besides the model, the loss and the data."""

    steps: int = 1000  # optimiser steps in total (ignored when epochs is set)
    epochs: int | None = None  # alternative to steps: passes over a sized iterable of batches
    optimizer: str = "adamw"  # "adamw" or "sgd"
    lr: float = 1e-3  # peak learning rate
    weight_decay: float = 0.0  # decoupled for AdamW, L2 for SGD
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW moment decay rates
    momentum: float = 0.0  # SGD momentum (paper 001 uses 0.8)
    schedule: str = "constant"  # "constant", "cosine" (to min_lr_ratio) or "step" (x lr_gamma every lr_step)
    warmup_steps: int = 0  # linear warm-up from lr/warmup_steps to lr, before the schedule
    min_lr_ratio: float = 0.0  # cosine floor as a fraction of lr
    lr_step: int = 1000  # "step" schedule: decay interval in steps
    lr_gamma: float = 0.1  # "step" schedule: decay factor
    grad_clip: float | None = None  # max global gradient norm; None = no clipping
    log_every: int = 1  # train metrics are averaged over windows of this many steps
    eval_every: int = 0  # run eval_fn every this many steps (and at the end); 0 = only at the end
    eval_at_start: bool = False  # also evaluate the untrained model (step 0), for learning curves
    checkpoint_every: int = 0  # checkpoint every this many steps (and at the end); 0 = only at the end
    device: str = "auto"  # "auto" (cuda > mps > cpu), "cpu", "cuda", "cuda:1", ...
    amp: bool = False  # bf16 autocast for the forward pass; only takes effect on CUDA
    compile: bool = False  # torch.compile the model (worth it on GPUs for long runs)
    seed: int = 0  # seeds the global RNGs at the start of training (dropout, random batches)
    progress: bool = True  # tqdm.auto progress bar with live metrics


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


def train(model: nn.Module, loss_fn: LossFn, batches: Batches, config: TrainConfig, *,
          eval_fn: Callable[[nn.Module], dict] | None = None,
          after_step: Callable[[nn.Module, int], None] | None = None,
          out_dir: str | None = None, resume: bool = False, identity: Any = None) -> History:
    """Train ``model`` in place and return its :class:`History`.

    Args:
        model: moved to the config's device by the engine.
        loss_fn: ``(model, batch) -> (loss, metrics)``; ``loss`` a scalar tensor to minimise, ``metrics`` a
            dict name -> number or 0-d tensor, averaged over ``log_every`` steps ("loss" is added).
        batches: ``step -> batch`` or a non-empty iterable of batches (a DataLoader, a list), iterated anew
            every epoch; a one-shot iterator (a generator) serves one epoch only. Only a callable can be
            resumed (an iterable's position is not recorded). Tensors inside the batch (also in tuples, lists,
            dicts) are moved to the device. Under DDP a callable's batch is the global batch, split along dim 0
            across ranks; an iterable must already be rank-local (DistributedSampler).
        config: a :class:`TrainConfig`.
        eval_fn: ``model -> metrics`` run in eval mode under ``torch.no_grad`` (``torch.enable_grad()`` inside
            still works), stored with the prefix ``"eval/"``.
        after_step: ``(model, step)`` called after every optimiser step, e.g. to project weights.
        out_dir: where checkpoints go; None = no checkpoints. A fresh run refuses a folder that already
            holds a checkpoint (it never overwrites another run): resume it, or choose another folder.
        resume: continue from ``out_dir/checkpoint.pt`` if it exists (else start fresh; ``batches`` must be a
            callable); it must have been
            written under the same ``config`` (``device``, ``progress``, ``compile`` and ``checkpoint_every``
            may differ) and the same ``identity``.
        identity: JSON-able data that, with ``config``, identifies the run (e.g. the experiment's config
            dataclass); stored in the checkpoint, and resuming under another one is refused.

    Raises:
        TrainingDiverged: the loss is NaN/inf (names the step and the last good checkpoint, which is kept).
        ValueError: bad config or ``batches``, unwritable or occupied ``out_dir``, corrupt checkpoint, or
            one written under another config or identity (naming the differing fields).
    """
    check_config(config)
    total = _total_steps(config, batches)
    rank, world = _dist_info()
    device = _rank_device(config.device, rank, world)
    if resume and out_dir is None:
        raise ValueError("resume=True needs an out_dir holding the checkpoint")
    if resume and not callable(batches):
        raise ValueError("resume=True needs batches as a callable step -> batch (an iterable's position is not "
                         "recorded): pass batches(step), e.g. a seeded permutation per epoch")
    found = out_dir is not None and claim_run_dir(out_dir, resume)
    ident = run_identity(config, identity)
    seed_everything(config.seed)
    model.to(device)
    optimizer = make_optimizer(model.parameters(), config)
    history, window, start = History(), {}, 0
    feed = batches if callable(batches) else Feed(batches)
    if found:
        state = load_checkpoint(out_dir, ident)
        load_module_state(model, state["model"], state["path"])
        optimizer.load_state_dict(state["optimizer"])
        history, window, start = History.from_dict(state["history"]), state["window"], state["step"]
        set_rng_state(state["rng"])
    net = _wrap(model, config, device, world)
    amp = (torch.autocast("cuda", dtype=torch.bfloat16) if config.amp and device.type == "cuda"
           else contextlib.nullcontext())

    def forward(step):
        batch = to_device(feed(step), device)
        if world > 1 and callable(batches):
            batch = shard(batch, rank, world)
        with amp:
            loss, metrics = loss_fn(net, batch)
        value = loss.detach().clone()
        if world > 1:
            torch.distributed.all_reduce(value)
            value /= world
        return loss, [float(value)], metrics

    def update(loss, factor, step):
        optimizer_step(optimizer, loss, config, factor,
                       lambda max_norm: torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
        if after_step is not None:
            after_step(model, step)

    members = Members(
        forward=forward, update=update,
        numbers=lambda metrics: [_floats(metrics, world)],
        evaluate=lambda fn: [evaluate(model, fn)],
        state=lambda: {"model": model.state_dict(), "optimizer": optimizer.state_dict()},
        diverged=lambda step, values: (None if math.isfinite(values[0])
                                       else f"loss is {values[0]} at step {step} (0-based)"))
    model.train()
    [history] = training_loop(members, config, total, start, [history], [window], eval_fn=eval_fn,
                              out_dir=out_dir, identity=ident, progress=config.progress and rank == 0)
    return history


@dataclass
class Members:
    """What :func:`training_loop` needs of the model(s) it trains: one model (:func:`train`) or S stacked models
    trained as one vmapped computation (:func:`energylab.ensemble.train_ensemble`). Lists hold one entry per
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
        members.update(loss, schedule(step), step)

        done = step + 1
        for history, window, value, metrics in zip(histories, windows, values, members.numbers(raw)):
            log_window(history, window, {"loss": value, **metrics}, done, config.log_every, total)
        if eval_fn is not None and due(config.eval_every, done, total):
            log_eval(done)
        if out_dir is not None and due(config.checkpoint_every, done, total):
            tracked = ({"history": histories[0].to_dict(), "window": dict(windows[0])} if single else
                       {"histories": [h.to_dict() for h in histories], "windows": [dict(w) for w in windows]})
            save_checkpoint(out_dir, {"step": done, **members.state(), **tracked, "rng": get_rng_state(),
                                      "identity": identity})
            saved = done
        bar.update(1)
        if bar.disable is False and (done == total or bar.n % max(1, total // 200) == 0):
            shown = ({k: f"{v[-1]:.4g}" for k, v in histories[0].curves.items()} if single
                     else {"loss(mean)": f"{sum(values) / len(values):.4g}"})
            bar.set_postfix(shown, refresh=False)
    bar.close()
    return histories


def check_config(config: TrainConfig) -> None:
    """Raise ValueError (TypeError for a wrong type: bools are not numbers) naming the field of a bad
    :class:`TrainConfig`."""
    check_instance("config", config, TrainConfig)
    if config.optimizer not in ("adamw", "sgd"):
        raise ValueError(f"optimizer must be 'adamw' or 'sgd', got {config.optimizer!r}")
    if config.schedule not in ("constant", "cosine", "step"):
        raise ValueError(f"schedule must be 'constant', 'cosine' or 'step', got {config.schedule!r}")
    for name in ("steps", "log_every", "lr_step"):
        check_int(name, getattr(config, name), minimum=1)
    for name in ("eval_every", "checkpoint_every", "warmup_steps"):
        check_int(name, getattr(config, name), minimum=0)
    check_int("seed", config.seed)
    if config.epochs is not None:
        check_int("epochs", config.epochs, minimum=1)
    check_positive("lr", config.lr, scalar=True)
    check_positive("weight_decay", config.weight_decay, allow_zero=True, scalar=True)
    check_interval("momentum", config.momentum, 0, 1, high_open=True)
    if not isinstance(config.betas, (tuple, list)) or len(config.betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {config.betas!r}")
    for i, beta in enumerate(config.betas):
        check_interval(f"betas[{i}]", beta, 0, 1, high_open=True)
    check_interval("min_lr_ratio", config.min_lr_ratio, 0, 1)  # the cosine floor: a fraction of lr
    check_interval("lr_gamma", config.lr_gamma, 0, 1, low_open=True)  # a decay factor
    if config.grad_clip is not None:
        check_positive("grad_clip", config.grad_clip, scalar=True)
    for name in ("eval_at_start", "amp", "compile", "progress"):
        check_bool(name, getattr(config, name))
    check_device(config.device)


def check_device(device: str | torch.device) -> torch.device:
    """:func:`~energylab._setup.choose_device`, restricted to devices the engine trains on (ValueError naming
    ``device`` otherwise): cpu, cuda (an existing index) and mps."""
    dev = choose_device(device)
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device={str(device)!r} is not supported: use 'auto', 'cpu', 'cuda', 'cuda:<index>' or 'mps'")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device={str(device)!r}: there are only {torch.cuda.device_count()} CUDA devices")
    return dev


def make_optimizer(params, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW or SGD (with momentum) as configured."""
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=config.lr, betas=tuple(config.betas),
                                 weight_decay=config.weight_decay)
    return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)


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


# ------------------------------------------------------------------ bookkeeping shared with energylab.ensemble


def optimizer_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, config: TrainConfig, factor: float,
                   clip: Callable[[float], Any]) -> None:
    """One optimiser step on ``loss``: backward, ``clip(config.grad_clip)`` when clipping is on, the learning rate
    ``config.lr * factor`` (``factor`` from :func:`lr_multiplier`), ``optimizer.step()``."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
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


def evaluate(model: nn.Module, eval_fn: Callable[[nn.Module], dict]) -> dict[str, float]:
    """``eval_fn(model)`` in eval mode under ``torch.no_grad``, as Python numbers; the model is left in train mode."""
    model.eval()
    with torch.no_grad():
        metrics = eval_fn(model)
    model.train()
    return {k: float(v) for k, v in metrics.items()}


def progress_bar(enabled: bool, total: int, start: int):
    """A tqdm.auto bar over ``total`` steps from ``start`` (disabled when not ``enabled``)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, disable=not enabled, desc="train", dynamic_ncols=True,
                mininterval=0.5)


# ------------------------------------------------------------------------------- data, devices, DDP


def init_distributed() -> tuple[int, int]:
    """Under ``torchrun`` (env WORLD_SIZE > 1): join the process group (nccl on CUDA, else gloo).

    Returns ``(rank, world_size)``; ``(0, 1)`` when not launched distributed.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not torch.distributed.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend)
    return _dist_info()


def _dist_info() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _rank_device(device: str, rank: int, world: int) -> torch.device:
    dev = choose_device(device)
    if world > 1 and dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    return dev


def _wrap(model: nn.Module, config: TrainConfig, device: torch.device, world: int) -> nn.Module:
    net = model
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    if config.compile:
        net = torch.compile(net)
    return net


def _total_steps(config: TrainConfig, batches) -> int:
    if config.epochs is None:
        return config.steps
    if callable(batches) or not hasattr(batches, "__len__"):
        raise ValueError("epochs needs batches to be a sized iterable (e.g. a DataLoader); use steps instead")
    if len(batches) == 0:
        raise ValueError("batches is empty (len 0): nothing to train on")
    return config.epochs * len(batches)


def _floats(metrics: dict, world: int) -> dict[str, float]:
    """Metrics as Python numbers; tensors averaged over the ranks under DDP."""
    out = {}
    for name, value in metrics.items():
        if isinstance(value, torch.Tensor):
            value = value.detach()
            if world > 1 and name != "loss":  # the loss is averaged already
                value = value.clone()
                torch.distributed.all_reduce(value)
                value /= world
            value = float(value)
        out[name] = value
    return out

