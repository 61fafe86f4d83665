"""Tasks: data generators, datasets, metrics and corruptions, one module per task family; :func:`one_hot` for all."""
from __future__ import annotations

import torch

_INTEGER = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def one_hot(symbols: torch.Tensor, n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The orthogonal embedding e_x of integer symbols: (...,) int  ->  (..., n) float.

    A comparison with ``arange(n)``, so it also runs under ``torch.func.vmap`` (which cannot check values): a
    symbol outside [0, n) gives an all-zero row. TypeError for a non-integer tensor.
    """
    if not isinstance(symbols, torch.Tensor) or symbols.dtype not in _INTEGER:
        raise TypeError(f"symbols must be an integer tensor, got {getattr(symbols, 'dtype', type(symbols).__name__)}")
    return (symbols.unsqueeze(-1) == torch.arange(n, device=symbols.device)).to(dtype)
