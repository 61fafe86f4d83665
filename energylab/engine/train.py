"""One training engine for every chapter: ``train(model, loss_fn, batches, config)``.

The loop reads top to bottom. Per optimiser step ``s`` (0-based):

1. ``batch = batches(s)`` (a callable of the step index: seeding is easy, resuming exact) or the next item of an
   iterable / DataLoader (restarted every epoch; such a run cannot resume);
2. ``loss, metrics = loss_fn(model, batch)`` under bf16 autocast when ``config.amp`` and the device is CUDA;
3. backward, gradient clipping, the learning rate of the schedule, ``optimizer.step()``;
4. ``after_step(model, s)`` (e.g. rescale couplings to a fixed norm);
5. every ``eval_every`` steps ``eval_fn(model) -> dict``; every ``checkpoint_every`` steps and at the end an
   atomic checkpoint in ``out_dir`` (:mod:`energylab.engine.runs` keeps the checkpoint bookkeeping).

These steps are :func:`energylab.engine.loop.training_loop`, the one loop: :func:`train` runs it for one model, and the
seed ensembles of :mod:`energylab.engine.ensemble` run it for S models stacked into one vmapped computation
(:class:`~energylab.engine.loop.Members` says what the loop needs of either).

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
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Union

import torch
from torch import nn

from energylab._checks import check_bool, check_instance, check_int, check_interval, check_positive
from energylab._setup import choose_device, seed_everything
from energylab.engine.batches import Feed, shard, to_device
from energylab.engine.loop import (  # noqa: F401 - API
    Members,
    TrainingDiverged,
    diverged,
    due,
    evaluate,
    log_window,
    lr_multiplier,
    optimizer_step,
    progress_bar,
    training_loop,
)
from energylab.engine.results import History, Results  # noqa: F401 - API
from energylab.engine.runs import (  # noqa: F401 - API
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
    ema: float = 0.0  # decay of an exponential moving average of the weights (0: off); with it, evaluations and
    # the trained model use the average (:class:`WeightAverage`), the checkpoint keeps both
    progress: bool = True  # tqdm.auto progress bar with live metrics


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
    if out_dir is not None and not callable(batches):  # its checkpoints record no position in the iterable
        warnings.warn(f"out_dir={out_dir!r} with batches from an iterable ({type(batches).__name__}): the checkpoints "
                      f"it writes can never be resumed (resume=True needs batches as a callable step -> batch)",
                      UserWarning, stacklevel=2)
    found = out_dir is not None and claim_run_dir(out_dir, resume)
    ident = run_identity(config, identity)
    seed_everything(config.seed)
    model.to(device)
    optimizer = make_optimizer(model.parameters(), config)
    average = WeightAverage(model, config.ema) if config.ema else None
    history, window, start = History(), {}, 0
    feed = batches if callable(batches) else Feed(batches)
    if found:
        state = load_checkpoint(out_dir, ident)
        load_module_state(model, state["model"], state["path"])
        optimizer.load_state_dict(state["optimizer"])
        if average is not None:
            average.load(state.get("ema"), state["path"])
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
        if average is not None:
            average.update()
        if after_step is not None:
            after_step(model, step)

    members = Members(
        forward=forward, update=update,
        numbers=lambda metrics: [_floats(metrics, world)],
        evaluate=lambda fn: [evaluate(model, fn, average)],
        state=lambda: {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                       **({} if average is None else {"ema": average.state()})},
        diverged=lambda step, values: (None if math.isfinite(values[0])
                                       else f"loss is {values[0]} at step {step} (0-based)"))
    model.train()
    [history] = training_loop(members, config, total, start, [history], [window], eval_fn=eval_fn,
                              out_dir=out_dir, identity=ident, progress=config.progress and rank == 0)
    if average is not None:
        average.copy_to(model)
    return history


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
    check_interval("ema", config.ema, 0, 1, high_open=True)
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
    """AdamW or SGD (with momentum) as configured.

    AdamW is torch's fused kernel on the CPU and CUDA: the default (foreach) one takes its denominator's sqrt from
    MKL's vector math on the CPU, whose last bit depends on the processor (energylab.portable.APPROXIMATE_OPS);
    the fused kernel's sqrt is the IEEE one, the same on every machine (and it is faster)."""
    if config.optimizer == "adamw":
        params = list(params)
        devices = {p.device.type for group in params for p in (group["params"] if isinstance(group, dict) else [group])}
        return torch.optim.AdamW(params, lr=config.lr, betas=tuple(config.betas), weight_decay=config.weight_decay,
                                 fused=True if devices and devices <= {"cpu", "cuda"} else None)
    return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)


class WeightAverage:
    """An exponential moving average of a model's parameters, updated after every optimiser step:
    ``avg <- decay * avg + (1 - decay) * w`` (buffers are not averaged). The average generalises better than the
    last iterate on small data (HRM and TRM, 2025, train Sudoku with it); :func:`train` evaluates it and leaves it
    in the model at the end."""

    def __init__(self, model: nn.Module, decay: float):
        self.decay = decay
        self.params = dict(model.named_parameters())
        self.avg = {name: p.detach().clone() for name, p in self.params.items()}

    @torch.no_grad()
    def update(self) -> None:
        for name, p in self.params.items():
            self.avg[name].mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)

    def state(self) -> dict[str, torch.Tensor]:
        return self.avg

    def load(self, state: dict | None, path: str) -> None:
        if not isinstance(state, dict) or set(state) != set(self.avg):
            raise ValueError(f"checkpoint {path} holds no weight average for this model (written without ema?)")
        for name, value in state.items():
            self.avg[name].copy_(value)

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        """Put the average into ``model``'s parameters (the model it was made for)."""
        for name, p in model.named_parameters():
            p.copy_(self.avg[name])

    @contextlib.contextmanager
    def swapped(self):
        """The average in the model's parameters inside the block, the trained weights back after it."""
        with torch.no_grad():
            for name, p in self.params.items():
                tmp = p.detach().clone()
                p.copy_(self.avg[name])
                self.avg[name] = tmp
        try:
            yield
        finally:
            with torch.no_grad():
                for name, p in self.params.items():
                    tmp = p.detach().clone()
                    p.copy_(self.avg[name])
                    self.avg[name] = tmp


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

