"""The one-line setup every chapter starts with: ``device = energylab.setup_notebook(seed, device, profile=profile)``.

It sits above the experiments (it reads their profiles), so the low-level helpers it calls live in
:mod:`energylab._setup`, which the training engine imports too.
"""
from __future__ import annotations

import importlib
import os
import warnings

import torch

from energylab import portable
from energylab._setup import choose_device, seed_everything

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


def check_profile(profile, profiles: tuple[str, ...]) -> str:
    """Return ``profile`` if it is one of ``profiles``, else a ValueError listing them."""
    if not isinstance(profile, str) or profile not in profiles:
        raise ValueError(f"profile must be one of {', '.join(map(repr, profiles))}, got {profile!r}")
    return profile


def setup_notebook(seed: int = 0, device: str = "auto", threads: int = 1, profile: str = "quick",
                   profiles: tuple[str, ...] | None = None) -> torch.device:
    """Make a chapter reproducible and its figures visible everywhere.

    Checks ``profile`` against the chapter's ``profiles`` (default: the profiles every experiment defines,
    :func:`energylab.experiments.common_profiles`; a typo must not silently run another scale), seeds
    every generator, pins torch to ``threads`` CPU threads (one thread gives bit-identical floating-point sums
    run to run, which the committed outputs rely on), uses float32 matmuls at full precision, applies
    :func:`energylab.portable.configure_torch` (a no-op outside the book's pinned runs), keeps torch's warnings
    about its own internals out of the chapter (torch >= 2.14), registers the book's plotly renderer (in Colab: the
    one for isolated outputs, and Colab's widget manager for ipywidgets 8), and returns the chosen device.
    """
    if profiles is None:
        from energylab.experiments import common_profiles  # local: imports every experiment module

        profiles = common_profiles()
    check_profile(profile, profiles)
    seed_everything(seed)
    torch.set_num_threads(threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    torch.set_float32_matmul_precision("highest")
    portable.configure_torch()  # in the book's pinned runs: no oneDNN, whose kernels depend on the processor
    portable.perturb_if_asked()  # the emulated pass: approximate vector math moved by one ulp
    if _torch_at_least(2, 14):  # the pinned torch (2.13) neither warns nor pays for the import here
        try:
            import_quietly(*_TORCH_SCRIPTS_ITSELF)
        except ImportError:  # a later torch without that module: nothing left to keep quiet
            pass
    from energylab import viz  # local import: viz pulls in plotly, which library users may not need

    viz.use_book_renderer()  # in Colab, the renderer whose every output loads plotly.js itself
    if viz.in_colab():
        enable_colab_widgets()
    return choose_device(device)


def enable_colab_widgets() -> bool:
    """Let Colab draw the chapters' ipywidgets (version 8, the book's extra): Colab's own widget manager knows only
    version 7, its custom one loads them. Returns whether it was switched on (False outside Colab)."""
    try:
        from google.colab import output
    except ImportError:
        return False
    output.enable_custom_widget_manager()
    return True
