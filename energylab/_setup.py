"""Seeds, devices and the rounding of printed errors (the chapters' setup is :mod:`energylab.notebook.setup`)."""
from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch; return a torch.Generator seeded the same way for explicit use."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def choose_device(device: str | torch.device = "auto") -> torch.device:
    """Resolve ``"auto"`` to cuda > mps > cpu; pass anything else through ``torch.device``.

    Asking for a device that is not available raises ValueError instead of failing later inside a kernel.
    """
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise TypeError(f"device must be a string or torch.device, got {type(device).__name__}")
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"device={device!r} is not a valid torch device: {err}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} requested but CUDA is not available here; use 'auto' or 'cpu'")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={device!r} requested but MPS is not available here; use 'auto' or 'cpu'")
    return dev


ROUND_OFF_FLOOR = 1e-12  # float64 identities in the book land at 1e-16..1e-14; anything below this is round-off


def format_error(err: float, floor: float = ROUND_OFF_FLOOR) -> str:
    """An error for printing in the book: ``"< 1e-12"`` at round-off level, else two significant digits.

    Round-off digits change whenever a library function sums in a different order, so committed notebook
    outputs state only that they are below ``floor`` (the tests assert the actual tolerances).
    """
    err = float(err)
    if err != err:  # NaN must never be hidden behind the floor
        return "nan"
    return f"< {floor:.0e}" if abs(err) < floor else f"{err:.1e}"
