"""Seeds, devices and the one-line notebook setup every chapter starts with."""
from __future__ import annotations

import importlib
import os
import random
import warnings

import numpy as np
import torch

from energylab import portable


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


PROFILES = ("quick", "full")  # the scales a chapter runs at (book/how_to_run.md); quick is what the website shows


def check_profile(profile, profiles=PROFILES) -> str:
    """Return ``profile`` if it is one of ``profiles``, else a ValueError listing them."""
    if not isinstance(profile, str) or profile not in profiles:
        raise ValueError(f"profile must be one of {', '.join(map(repr, profiles))}, got {profile!r}")
    return profile


# torch 2.14 deprecates torch.jit.script yet scripts its own forward-mode decompositions with it the first time a
# chapter uses forward AD (torch.func.hessian, jacfwd): a FutureWarning about torch's own code, nothing a reader can
# act on, printed into the chapter (found by scripts/drift_check.py). Importing that module once, quietly, at setup
# keeps it out; the filter does not outlive the import, so the reader's own torch.jit.script calls still warn.
_TORCH_SCRIPTS_ITSELF = ("torch._decomp.decompositions_for_jvp", r"`torch\.jit\.script` is deprecated")


def import_quietly(module: str, message: str, category: type[Warning] = FutureWarning):
    """Import ``module`` with the warnings matching ``message`` (a regex) silenced during that import only."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=message, category=category)
        return importlib.import_module(module)


def _torch_at_least(major: int, minor: int) -> bool:
    parts = torch.__version__.split("+")[0].split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


def setup_notebook(seed: int = 0, device: str = "auto", threads: int = 1, profile: str = "quick",
                   profiles: tuple[str, ...] = PROFILES) -> torch.device:
    """Make a chapter reproducible and its figures visible everywhere.

    Checks ``profile`` against the chapter's ``profiles`` (a typo must not silently run another scale), seeds
    every generator, pins torch to ``threads`` CPU threads (one thread gives bit-identical floating-point sums
    run to run, which the committed outputs rely on), uses float32 matmuls at full precision, applies
    :func:`energylab.portable.configure_torch` (a no-op outside the book's pinned runs), keeps torch's warnings
    about its own internals out of the chapter (torch >= 2.14), registers the book's plotly renderer, and returns
    the chosen device.
    """
    check_profile(profile, profiles)
    seed_everything(seed)
    torch.set_num_threads(threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    torch.set_float32_matmul_precision("highest")
    portable.configure_torch()  # in the book's pinned runs: no oneDNN, whose kernels depend on the processor
    if _torch_at_least(2, 14):  # the pinned torch (2.13) neither warns nor pays for the import here
        try:
            import_quietly(*_TORCH_SCRIPTS_ITSELF)
        except ImportError:  # a later torch without that module: nothing left to keep quiet
            pass
    from energylab import viz  # local import: viz pulls in plotly, which library users may not need

    viz.use_book_renderer()
    return choose_device(device)


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
