"""Batches for the training engine: iterables served one epoch after another, moved to the device, sharded for DDP.

:func:`energylab.engine.train.train` takes ``batches`` as a callable ``step -> batch`` (seeded by the step: any step
can be recomputed, so a run can resume exactly; every experiment passes one) or as an iterable (a DataLoader, a list, a
generator), which :class:`Feed` iterates anew every epoch. A run on an iterable is not resumable: the position and
the random state of an iterable's epoch are not recorded.

The experiments' callables all draw their epochs the same way, from :func:`epoch_generator`: the permutation of a
fixed training set (:class:`EpochOrder`) or a fresh draw of data (NT's series) for epoch ``e`` of seed ``s`` comes
from a generator seeded ``stride * s + e``, so any step's batch can be recomputed from the step alone.
"""
from __future__ import annotations

import collections.abc
from typing import Iterable

import torch


class Feed:
    """The batches of an iterable as ``step -> batch``, iterated anew every epoch (a DistributedSampler is told
    the epoch)."""

    def __init__(self, batches: Iterable):
        if not isinstance(batches, collections.abc.Iterable):
            raise ValueError(f"batches must be a callable step -> batch or an iterable of batches, "
                             f"got {type(batches).__name__}")
        self.batches, self.it, self.epoch = batches, None, -1
        self.one_shot = isinstance(batches, collections.abc.Iterator)  # a generator: cannot restart

    def _start(self, step: int) -> None:
        if self.one_shot and self.epoch >= 0:
            raise ValueError(f"batches ran out at step {step}: a one-shot iterator (e.g. a generator) serves one "
                             f"epoch; pass a callable batches(step) or a re-iterable such as a DataLoader")
        self.epoch += 1
        sampler = getattr(self.batches, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self.epoch)
        self.it = iter(self.batches)

    def __call__(self, step: int):
        """The next batch (``step`` only names the position in error messages)."""
        if self.it is None:
            self._start(step)
        batch = next(self.it, _END)
        if batch is _END:  # the epoch is over: start the next one
            self._start(step)
            batch = next(self.it, _END)
            if batch is _END:
                raise ValueError(f"batches yielded no batch at step {step}: it is empty (or an exhausted "
                                 f"iterator); pass a non-empty iterable or a callable batches(step)")
        return batch


_END = object()

EPOCH_STRIDE = 1_000_003  # seeds' epoch streams do not collide before epoch 1,000,003


def epoch_generator(seed: int, epoch: int, stride: int = EPOCH_STRIDE) -> torch.Generator:
    """The generator of epoch ``epoch`` of seed ``seed``, seeded ``stride * seed + epoch``. (The attractor runs of
    chapter 7 were committed with ``stride=1000``; they keep it so that they replay.)"""
    return torch.Generator().manual_seed(stride * seed + epoch)


class EpochOrder:
    """``(step, seed) -> indices`` of that step's batch among ``n`` samples: every epoch a fresh permutation from
    :func:`epoch_generator`, cut into batches of ``batch_size``. ``drop_last`` drops an epoch's last partial batch
    (``steps_per_epoch = n // batch_size``); without it the last batch is shorter (``ceil(n / batch_size)``)."""

    def __init__(self, n: int, batch_size: int, *, drop_last: bool = True, stride: int = EPOCH_STRIDE):
        if not 1 <= batch_size <= n:
            raise ValueError(f"batch_size must be between 1 and the {n} training samples, got {batch_size}")
        self.n, self.batch_size, self.stride = n, batch_size, stride
        self.steps_per_epoch = n // batch_size if drop_last else -(-n // batch_size)
        self._perms: dict[tuple[int, int], torch.Tensor] = {}  # (epoch, seed) -> permutation, one epoch kept

    def __call__(self, step: int, seed: int = 0) -> torch.Tensor:
        epoch, k = divmod(step, self.steps_per_epoch)
        if (epoch, seed) not in self._perms:
            self._perms = {key: v for key, v in self._perms.items() if key[0] == epoch}
            self._perms[(epoch, seed)] = torch.randperm(self.n, generator=epoch_generator(seed, epoch, self.stride))
        return self._perms[(epoch, seed)][k * self.batch_size:(k + 1) * self.batch_size]


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
