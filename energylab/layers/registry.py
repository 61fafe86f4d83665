"""The one registry of looped layers: name -> builder(dim, heads, ffn_mult) -> nn.Module.

Each layer family registers its layers beside their definitions (``register_layer("itrsa", ...)`` in
:mod:`energylab.layers.recurrent`); importing :mod:`energylab.layers` imports every family, so the registry is
complete whatever a program imports first. :class:`energylab.models.looped.LoopedModel` and the experiments look
layers up here by name (``LoopedConfig(layer="hyperset")``, ``--set layer=akorn``).
"""
from __future__ import annotations

from typing import Callable

from torch import nn

__all__ = ["LAYERS", "register_layer", "layer_names", "layer_builder"]

LAYERS: dict[str, Callable[[int, int, int], nn.Module]] = {}  # name -> builder(dim, heads, ffn_mult)


def register_layer(name: str, builder: Callable[[int, int, int], nn.Module]) -> None:
    """Make ``builder(dim, heads, ffn_mult) -> nn.Module`` available as ``LoopedConfig(layer=name)``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"layer name must be a non-empty string, got {name!r}")
    if not callable(builder):
        raise TypeError(f"the builder of layer {name!r} must be callable, got {type(builder).__name__}")
    LAYERS[name] = builder


def layer_names() -> list[str]:
    """Every registered layer name, sorted."""
    return sorted(LAYERS)


def layer_builder(name: str) -> Callable[[int, int, int], nn.Module]:
    """The builder registered as ``name``; a ValueError listing every valid name if there is none."""
    if not isinstance(name, str) or name not in LAYERS:
        raise ValueError(f"unknown layer {name!r}; registered layers: {', '.join(layer_names())}")
    return LAYERS[name]
