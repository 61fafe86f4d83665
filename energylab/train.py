"""One training engine for every chapter: ``train(model, loss_fn, batches, config)``.

The loop reads top to bottom. Per optimiser step ``s`` (0-based):

1. ``batch = batches(s)`` (a callable of the step index: resume is exact and seeding is easy) or the next
   item of an iterable / DataLoader (restarted every epoch);
2. ``loss, metrics = loss_fn(model, batch)`` under bf16 autocast when ``config.amp`` and the device is CUDA;
3. backward, gradient clipping, the learning rate of the schedule, ``optimizer.step()``;
4. ``after_step(model, s)`` (e.g. rescale couplings to a fixed norm);
5. every ``eval_every`` steps ``eval_fn(model) -> dict``; every ``checkpoint_every`` steps and at the end an
   atomic checkpoint (temp file + ``os.replace``) in ``out_dir``.

Curves are kept in a :class:`History` indexed by the number of completed steps. ``resume=True`` continues
from ``out_dir/checkpoint.pt`` (model, optimiser, history, RNG states) and ends with the same numbers as an
uninterrupted run. Under ``torchrun`` (see :func:`init_distributed`) the model is wrapped in
DistributedDataParallel and each rank trains on its slice of the global batch.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Union

import torch
from torch import nn

from energylab._setup import choose_device, seed_everything

LossFn = Callable[[nn.Module, Any], "tuple[torch.Tensor, dict]"]
Batches = Union[Callable[[int], Any], Iterable]
CHECKPOINT = "checkpoint.pt"  # file name of the checkpoint inside out_dir
RESULTS = "results.json"  # file name of an experiment's Results inside out_dir


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


@dataclass
class History:
    """Metric curves: ``curves[name]`` values at ``steps[name]`` (number of completed optimiser steps).

    Train metrics are stored under their own names ("loss", "acc", ...), evaluation metrics with the
    prefix ``"eval/"``.
    """

    steps: dict[str, list[int]] = field(default_factory=dict)
    curves: dict[str, list[float]] = field(default_factory=dict)

    def log(self, step: int, metrics: dict[str, float], prefix: str = "") -> None:
        """Append ``metrics`` (name -> number) at ``step``."""
        for name, value in metrics.items():
            self.steps.setdefault(prefix + name, []).append(int(step))
            self.curves.setdefault(prefix + name, []).append(float(value))

    def last(self, name: str) -> float:
        """The latest value of a curve (KeyError listing the curves if unknown)."""
        if name not in self.curves:
            raise KeyError(f"no curve {name!r}; curves: {sorted(self.curves)}")
        return self.curves[name][-1]

    @property
    def final(self) -> dict[str, float]:
        """The latest value of every curve."""
        return {name: values[-1] for name, values in self.curves.items() if values}

    def to_dict(self) -> dict:
        return {"steps": self.steps, "curves": self.curves}

    @classmethod
    def from_dict(cls, d: dict) -> "History":
        return cls(steps={k: list(map(int, v)) for k, v in d["steps"].items()},
                   curves={k: list(map(float, v)) for k, v in d["curves"].items()})

    def save(self, path: str) -> None:
        _write_json_atomic(path, self.to_dict())

    @classmethod
    def load(cls, path: str) -> "History":
        with open(path) as f:
            return cls.from_dict(json.load(f))


@dataclass
class Results:
    """What an experiment's ``run(config)`` returns; saved as JSON next to the checkpoint.

    ``histories`` maps a run label (e.g. ``"EA/seed3"``) to its curves, ``final`` holds the headline
    numbers, ``tables`` small tables as lists of rows, ``extra`` any other JSON-able data (e.g. an
    attention matrix as nested lists).
    """

    experiment: str
    config: dict
    histories: dict[str, History] = field(default_factory=dict)
    final: dict[str, float] = field(default_factory=dict)
    tables: dict[str, list[dict]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"experiment": self.experiment, "config": self.config,
                "histories": {k: h.to_dict() for k, h in self.histories.items()},
                "final": self.final, "tables": self.tables, "extra": self.extra}

    @classmethod
    def from_dict(cls, d: dict) -> "Results":
        return cls(experiment=d["experiment"], config=d["config"],
                   histories={k: History.from_dict(h) for k, h in d["histories"].items()},
                   final=d["final"], tables=d["tables"], extra=d["extra"])

    def save(self, out_dir: str) -> str:
        """Write ``out_dir/results.json`` atomically; return its path."""
        path = os.path.join(prepare_out_dir(out_dir), RESULTS)
        _write_json_atomic(path, self.to_dict())
        return path

    @classmethod
    def load(cls, out_dir: str) -> "Results":
        """Read ``out_dir/results.json`` (or a path to a .json file)."""
        path = out_dir if out_dir.endswith(".json") else os.path.join(out_dir, RESULTS)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no results at {path}; produce them with `python -m energylab run ...`")
        with open(path) as f:
            return cls.from_dict(json.load(f))


# ---------------------------------------------------------------------------------------------- the loop


def train(model: nn.Module, loss_fn: LossFn, batches: Batches, config: TrainConfig, *,
          eval_fn: Callable[[nn.Module], dict] | None = None,
          after_step: Callable[[nn.Module, int], None] | None = None,
          out_dir: str | None = None, resume: bool = False) -> History:
    """Train ``model`` in place and return its :class:`History`.

    Args:
        model: moved to the config's device by the engine.
        loss_fn: ``(model, batch) -> (loss, metrics)``; ``loss`` a scalar tensor to minimise, ``metrics`` a
            dict name -> number or 0-d tensor, averaged over ``log_every`` steps ("loss" is added).
        batches: ``step -> batch`` (preferred: exact resume) or an iterable of batches re-iterated every
            epoch. Tensors inside the batch (also in tuples, lists, dicts) are moved to the device. Under DDP
            a callable's batch is the global batch, split along dim 0 across ranks; an iterable must already
            be rank-local (DistributedSampler).
        config: a :class:`TrainConfig`.
        eval_fn: ``model -> metrics`` run in eval mode under ``torch.no_grad`` (``torch.enable_grad()`` inside
            still works), stored with the prefix ``"eval/"``.
        after_step: ``(model, step)`` called after every optimiser step, e.g. to project weights.
        out_dir: where checkpoints go; None = no checkpoints.
        resume: continue from ``out_dir/checkpoint.pt`` if it exists (else start fresh).

    Raises:
        TrainingDiverged: the loss is NaN/inf (names the step; the last good checkpoint is kept).
        ValueError: bad config, unwritable ``out_dir``, corrupt or mismatched checkpoint.
    """
    check_config(config)
    total = _total_steps(config, batches)
    rank, world = _dist_info()
    device = _rank_device(config.device, rank, world)
    if out_dir is not None:
        prepare_out_dir(out_dir)
    if resume and out_dir is None:
        raise ValueError("resume=True needs an out_dir holding the checkpoint")
    seed_everything(config.seed)
    model.to(device)
    optimizer = make_optimizer(model.parameters(), config)
    history, window, start = History(), {}, 0
    if resume and os.path.exists(os.path.join(out_dir, CHECKPOINT)):
        state = load_checkpoint(out_dir, config)
        load_module_state(model, state["model"], state["path"])
        optimizer.load_state_dict(state["optimizer"])
        history, window, start = History.from_dict(state["history"]), state["window"], state["step"]
        set_rng_state(state["rng"])
    net = _wrap(model, config, device, world)
    amp = (torch.autocast("cuda", dtype=torch.bfloat16) if config.amp and device.type == "cuda"
           else contextlib.nullcontext())
    schedule = lr_multiplier(config, total)
    get_batch = _batch_source(batches, start, total)
    bar = _progress(config.progress and rank == 0, total, start)

    if start == 0 and config.eval_at_start and eval_fn is not None:
        history.log(0, _evaluate(model, eval_fn), prefix="eval/")
    model.train()
    for step in range(start, total):
        batch = _to_device(get_batch(step), device)
        if world > 1 and callable(batches):
            batch = _shard(batch, rank, world)
        with amp:
            loss, metrics = loss_fn(net, batch)
        value = loss.detach().clone()
        if world > 1:
            torch.distributed.all_reduce(value)
            value /= world
        value = float(value)
        if not math.isfinite(value):
            kept = f"; last good checkpoint kept in {out_dir}" if out_dir else ""
            raise TrainingDiverged(f"loss is {value} at step {step} (0-based){kept}", step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        for group in optimizer.param_groups:
            group["lr"] = config.lr * schedule(step)
        optimizer.step()
        if after_step is not None:
            after_step(model, step)

        done = step + 1
        _accumulate(window, {"loss": value, **metrics}, world)
        if done % config.log_every == 0 or done == total:
            n = window.pop("_n")
            history.log(done, {k: v / n for k, v in window.items()})
            window.clear()
        if eval_fn is not None and ((config.eval_every and done % config.eval_every == 0) or done == total):
            history.log(done, _evaluate(model, eval_fn), prefix="eval/")
        if out_dir is not None and ((config.checkpoint_every and done % config.checkpoint_every == 0)
                                    or done == total):
            save_checkpoint(out_dir, {"step": done, "model": model.state_dict(),
                                      "optimizer": optimizer.state_dict(), "history": history.to_dict(),
                                      "window": dict(window), "rng": get_rng_state(),
                                      "fingerprint": config_fingerprint(config)})
        bar.update(1)
        if bar.disable is False and (done == total or bar.n % max(1, total // 200) == 0):
            bar.set_postfix({k: f"{v[-1]:.4g}" for k, v in history.curves.items()}, refresh=False)
    bar.close()
    return history


def check_config(config: TrainConfig) -> None:
    """Raise ValueError naming the field for an inconsistent :class:`TrainConfig`."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if config.optimizer not in ("adamw", "sgd"):
        raise ValueError(f"optimizer must be 'adamw' or 'sgd', got {config.optimizer!r}")
    if config.schedule not in ("constant", "cosine", "step"):
        raise ValueError(f"schedule must be 'constant', 'cosine' or 'step', got {config.schedule!r}")
    for name in ("steps", "log_every", "lr_step"):
        if not isinstance(getattr(config, name), int) or getattr(config, name) < 1:
            raise ValueError(f"{name} must be a positive int, got {getattr(config, name)!r}")
    for name in ("eval_every", "checkpoint_every", "warmup_steps"):
        if not isinstance(getattr(config, name), int) or getattr(config, name) < 0:
            raise ValueError(f"{name} must be a non-negative int, got {getattr(config, name)!r}")
    if config.epochs is not None and (not isinstance(config.epochs, int) or config.epochs < 1):
        raise ValueError(f"epochs must be a positive int or None, got {config.epochs!r}")
    if not (isinstance(config.lr, (int, float)) and config.lr > 0 and math.isfinite(config.lr)):
        raise ValueError(f"lr must be a finite number > 0, got {config.lr!r}")
    if config.grad_clip is not None and not config.grad_clip > 0:
        raise ValueError(f"grad_clip must be > 0 or None, got {config.grad_clip!r}")


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


# ----------------------------------------------------------------------------------------- checkpoints


def prepare_out_dir(out_dir: str) -> str:
    """Create ``out_dir`` and check it is writable; ValueError otherwise."""
    try:
        os.makedirs(out_dir, exist_ok=True)
        probe = os.path.join(out_dir, f".write_test_{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as err:
        raise ValueError(f"out_dir={out_dir!r} is not writable: {err}") from None
    return out_dir


def save_checkpoint(out_dir: str, state: dict) -> str:
    """Write ``state`` to ``out_dir/checkpoint.pt`` atomically (temp file + ``os.replace``); rank 0 only.

    ``state`` holds tensors, numbers, strings, lists and dicts (loadable with ``weights_only=True``).
    """
    path = os.path.join(out_dir, CHECKPOINT)
    if _dist_info()[0] != 0:
        return path
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(out_dir: str, config: TrainConfig) -> dict:
    """Read ``out_dir/checkpoint.pt`` with ``weights_only=True`` and check it was written under ``config``.

    ValueError for an unreadable file or one written with another training config (seed, optimizer, lr,
    schedule, steps); :func:`load_module_state` checks the model itself.
    """
    path = os.path.join(out_dir, CHECKPOINT)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        step, fingerprint = state["step"], state["fingerprint"]
    except Exception as err:  # noqa: BLE001 - any unpickling failure means the file is unusable
        raise ValueError(f"checkpoint {path} is corrupt or not an energylab checkpoint ({err}); "
                         f"delete it or run without resume") from None
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"checkpoint {path} has an invalid step {step!r}")
    mine = config_fingerprint(config)
    diff = {k: (fingerprint.get(k), v) for k, v in mine.items() if fingerprint.get(k) != v}
    if diff:
        raise ValueError(f"checkpoint {path} was written with another config, (checkpoint, now): {diff}")
    state["path"] = path
    return state


def load_module_state(module: nn.Module, state_dict: dict, path: str = "checkpoint") -> None:
    """``module.load_state_dict`` with a ValueError naming the file when the checkpoint is another model's."""
    try:
        module.load_state_dict(state_dict)
    except RuntimeError as err:
        raise ValueError(f"{path} does not match the model: {err}") from None


def config_fingerprint(config: TrainConfig) -> dict:
    keys = ("seed", "optimizer", "lr", "weight_decay", "momentum", "schedule", "warmup_steps", "steps", "epochs")
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(config).items() if k in keys}


def get_rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _write_json_atomic(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


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
    return config.epochs * len(batches)


def _batch_source(batches, start: int, total: int) -> Callable[[int], Any]:
    if callable(batches):
        return batches
    state = {"it": None, "epoch": -1}
    per_epoch = len(batches) if hasattr(batches, "__len__") else None

    def next_batch(step: int):
        if state["it"] is None:  # (re)start; on resume skip the batches of the epoch already consumed
            state["epoch"] += 1
            sampler = getattr(batches, "sampler", None)
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(step // per_epoch if per_epoch else state["epoch"])
            state["it"] = iter(batches)
            for _ in range(step % per_epoch if per_epoch else 0):
                next(state["it"])
        try:
            return next(state["it"])
        except StopIteration:
            state["it"] = None
            return next_batch(step)

    return next_batch


def _to_device(batch, device: torch.device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch


def _shard(batch, rank: int, world: int):
    """This rank's slice along dim 0 of every tensor in the (global) batch."""
    if isinstance(batch, torch.Tensor):
        if batch.shape[0] % world:
            raise ValueError(f"global batch size {batch.shape[0]} is not divisible by the world size {world}")
        n = batch.shape[0] // world
        return batch[rank * n:(rank + 1) * n]
    if isinstance(batch, (list, tuple)):
        return type(batch)(_shard(b, rank, world) for b in batch)
    if isinstance(batch, dict):
        return {k: _shard(v, rank, world) for k, v in batch.items()}
    return batch


def _accumulate(window: dict, metrics: dict, world: int) -> None:
    for name, value in metrics.items():
        if isinstance(value, torch.Tensor):
            value = value.detach()
            if world > 1 and name != "loss":
                value = value.clone()
                torch.distributed.all_reduce(value)
                value /= world
            value = float(value)
        window[name] = window.get(name, 0.0) + value
    window["_n"] = window.get("_n", 0) + 1


def _evaluate(model: nn.Module, eval_fn) -> dict:
    model.eval()
    with torch.no_grad():
        metrics = eval_fn(model)
    model.train()
    return {k: float(v) for k, v in metrics.items()}


def _progress(enabled: bool, total: int, start: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, disable=not enabled, desc="train", dynamic_ncols=True,
                mininterval=0.5)
