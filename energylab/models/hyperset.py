"""Hyper-SET's image classifier (paper 004, Sec. 5): patch embedding, a CLS token, one shared looped layer (the
Hyper-SET layer of :mod:`energylab.layers.hyperset` or any registered layer), RMSNorm and a linear head."""
from __future__ import annotations

import torch
from torch import nn

from energylab._checks import check_int, value_checks_off
from energylab.layers import LAYERS
from energylab.layers.hyperset import VARIANTS, HyperSETLayer

__all__ = ["HyperSET"]


class HyperSET(nn.Module):
    """Image classifier: patches (B, N, p) -> Linear(p→d) + learnable positions, a CLS token in front, one shared
    looped layer iterated T times, RMSNorm + Linear on the CLS token. ``layer`` is a name in
    ``energylab.models.looped.LAYERS`` ("hyperset" and its variants; "transformer" for the looped baseline, which
    gets no injected input); ``lora_iterations`` sets the number of depth-wise adapters for "hyperset-lora*"."""

    def __init__(self, patch_dim: int, n_patches: int, classes: int, dim: int = 32, heads: int = 4,
                 ffn_mult: int = 4, iterations: int = 4, layer: str = "hyperset"):
        super().__init__()
        if not isinstance(layer, str) or layer not in LAYERS:
            raise ValueError(f"unknown layer {layer!r}; registered: {', '.join(sorted(LAYERS))}")
        for name, value in (("patch_dim", patch_dim), ("n_patches", n_patches), ("classes", classes), ("dim", dim),
                            ("ffn_mult", ffn_mult), ("iterations", iterations)):
            check_int(name, value, minimum=1)
        self.iterations, self.layer_name = iterations, layer
        self.embed = nn.Linear(patch_dim, dim, bias=False)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(n_patches + 1, dim))
        if layer.startswith("hyperset"):
            kwargs = dict(VARIANTS[layer[len("hyperset-"):]] if "-" in layer else {})
            # the step sizes see the current state x_t, as the paper's image models do (App. D.3)
            self.layer = HyperSETLayer(dim, heads, ffn_mult, lora_iterations=iterations, condition="xt", **kwargs)
        else:
            self.layer = LAYERS[layer](dim, heads, ffn_mult)
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, classes, bias=False)

    def inputs(self, patches: torch.Tensor) -> torch.Tensor:
        """x_0 = [CLS; patches W_eᵀ] + P: (B, N, p) -> (B, N + 1, d)."""
        if not isinstance(patches, torch.Tensor) or not patches.is_floating_point():
            raise TypeError(f"patches must be a floating-point torch.Tensor (B, N, p), "
                            f"got {getattr(patches, 'dtype', type(patches).__name__)}")
        want = (self.pos.shape[0] - 1, self.embed.in_features)
        if patches.dim() != 3 or tuple(patches.shape[1:]) != want:
            raise ValueError(f"patches must have shape (B, N={want[0]}, p={want[1]}), got {tuple(patches.shape)}")
        if not value_checks_off() and not torch.isfinite(patches).all():  # once at entry: NaN logits without a word
            raise ValueError("patches contains NaN or inf")
        x = self.embed(patches)
        return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos

    def states(self, patches: torch.Tensor, iterations: int | None = None):
        """Yield (t, x_t) for t = 1..T."""
        iterations = self.iterations if iterations is None else check_int("iterations", iterations, minimum=1)
        x0 = self.inputs(patches)
        x, takes_step = x0, getattr(self.layer, "takes_step", False)
        for t in range(1, iterations + 1):
            x = self.layer(x, None, t=t, x0=x0) if takes_step else self.layer(x, None)
            yield t, x

    def readout(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(x[:, 0]))

    def forward(self, patches: torch.Tensor, iterations: int | None = None) -> torch.Tensor:
        """Logits (B, classes) after T iterations (default: the training T)."""
        for _, x in self.states(patches, iterations):
            pass
        return self.readout(x)

    def trace(self, patches: torch.Tensor, iterations: int, hook) -> list:
        """[hook(t, x_t) for t = 1..iterations]."""
        return [hook(t, x) for t, x in self.states(patches, iterations)]

