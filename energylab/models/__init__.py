"""Full models built from energylab.layers: one module per model family; :func:`count_parameters` for all.

``energylab.models.HyperSET`` (the Hyper-SET image classifier of :mod:`energylab.models.hyperset`) is imported on
first use, so that importing this package imports no model family."""
from __future__ import annotations

from torch import nn


def count_parameters(module: nn.Module) -> int:
    """Number of trainable scalars (shared tensors counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def __getattr__(name: str):
    if name == "HyperSET":
        from energylab.models.hyperset import HyperSET

        return HyperSET
    raise AttributeError(f"module 'energylab.models' has no attribute {name!r}")
