"""Batches for the training engine: iterables replayed exactly on resume, moved to the device, sharded for DDP.

:func:`energylab.train.train` takes ``batches`` as a callable ``step -> batch`` (nothing to replay) or as an
iterable (a DataLoader, a list, a generator), which :class:`Feed` iterates anew every epoch and can replay up to
any position for an exact resume.
"""
from __future__ import annotations

import collections.abc
from typing import Iterable

import torch

from energylab.results import get_rng_state, set_rng_state


class Feed:
    """The batches of an iterable, iterated anew every epoch; on resume the epoch in progress is replayed.

    At the start of every epoch the RNG states that ``iter(batches)`` may consume are recorded (global torch
    and CUDA, the DataLoader's and its sampler's generators). A resumed run restores them, restarts the epoch,
    skips the batches already consumed, and restores the checkpoint's RNG states: the same batches follow.
    """

    def __init__(self, batches: Iterable):
        if not isinstance(batches, collections.abc.Iterable):
            raise ValueError(f"batches must be a callable step -> batch or an iterable of batches, "
                             f"got {type(batches).__name__}")
        self.batches, self.it, self.epoch, self.pos, self.rng = batches, None, -1, 0, None
        self.per_epoch = len(batches) if hasattr(batches, "__len__") else None
        self.one_shot = isinstance(batches, collections.abc.Iterator)  # a generator: cannot restart
        self.pending = None

    def state(self) -> dict:
        """The position to store in a checkpoint: epoch, batches consumed in it, RNG states at its start, and
        the states of the DataLoader's generators now."""
        return {"epoch": self.epoch, "pos": self.pos, "rng": self.rng,
                "generators": [g.get_state() for g in self._generators()]}

    def resume_from(self, state: dict | None, path: str) -> None:
        """Continue from a checkpoint's :meth:`state` (read from ``path``); the replay runs on the next call."""
        if not isinstance(state, dict):
            raise ValueError(f"{path} was written with batches(step) callable; pass the same kind of batches")
        self.epoch, self.pos, self.rng = state["epoch"], state["pos"], state["rng"]
        self.pending = state if self.pos != self.per_epoch else None  # a finished epoch needs no replay
        if self.pending is None:
            self._set_generators(state["generators"])

    def _generators(self) -> list[torch.Generator]:
        found = []
        for obj in (self.batches, getattr(self.batches, "sampler", None),
                    getattr(getattr(self.batches, "batch_sampler", None), "sampler", None)):
            g = getattr(obj, "generator", None)
            if isinstance(g, torch.Generator) and all(g is not h for h in found):
                found.append(g)
        return found

    def _start(self, step: int) -> None:
        if self.one_shot and self.epoch >= 0:
            raise ValueError(f"batches ran out at step {step}: a one-shot iterator (e.g. a generator) serves one "
                             f"epoch; pass a callable batches(step) or a re-iterable such as a DataLoader")
        self.epoch, self.pos = self.epoch + 1, 0
        self.rng = {"global": get_rng_state(), "generators": [g.get_state() for g in self._generators()]}
        sampler = getattr(self.batches, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self.epoch)
        self.it = iter(self.batches)

    def _replay(self, step: int) -> None:
        now, state = get_rng_state(), self.pending
        self.pending = None
        set_rng_state(state["rng"]["global"])
        self._set_generators(state["rng"]["generators"])
        self.epoch -= 1
        self._start(step)
        for _ in range(state["pos"]):
            if next(self.it, _END) is _END:
                raise ValueError(f"batches yields fewer batches than when the checkpoint was written "
                                 f"(epoch {self.epoch} ended before batch {state['pos']})")
        self.pos = state["pos"]
        set_rng_state(now)
        self._set_generators(state["generators"])

    def _set_generators(self, states: list) -> None:
        gens = self._generators()
        if len(gens) != len(states):
            raise ValueError(f"batches has {len(gens)} random generator(s), the checkpoint {len(states)}: "
                             f"pass the same kind of batches as the interrupted run")
        for g, g_state in zip(gens, states):
            g.set_state(g_state)

    def __call__(self, step: int):
        """The next batch (``step`` only names the position in error messages)."""
        if self.pending is not None:
            self._replay(step)
        if self.it is None:
            self._start(step)
        batch = next(self.it, _END)
        if batch is _END:  # the epoch is over: start the next one
            self._start(step)
            batch = next(self.it, _END)
            if batch is _END:
                raise ValueError(f"batches yielded no batch at step {step}: it is empty (or an exhausted "
                                 f"iterator); pass a non-empty iterable or a callable batches(step)")
        self.pos += 1
        return batch


_END = object()


def to_device(batch, device: torch.device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


def shard(batch, rank: int, world: int):
    """This rank's slice along dim 0 of every tensor in the (global) batch."""
    if isinstance(batch, torch.Tensor):
        if batch.shape[0] % world:
            raise ValueError(f"global batch size {batch.shape[0]} is not divisible by the world size {world}")
        n = batch.shape[0] // world
        return batch[rank * n:(rank + 1) * n]
    if isinstance(batch, (list, tuple)):
        return type(batch)(shard(b, rank, world) for b in batch)
    if isinstance(batch, dict):
        return {k: shard(v, rank, world) for k, v in batch.items()}
    return batch
