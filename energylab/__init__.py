"""energylab: attention mechanisms derived from energy functions.

The library behind the book. Dependencies point one way:
energies -> operators -> catalog / modules -> models -> experiments; viz and train serve notebooks.

    >>> from energylab import catalog
    >>> catalog.verify("softmax_free_energy") < 1e-10
    True

Submodules that pull in heavier dependencies (``viz`` needs plotly, ``experiments`` the training engine)
are imported on first attribute access.
"""
import importlib

from energylab import catalog, energies, hyperspherical, modules, operators
from energylab._setup import choose_device, format_error, seed_everything, setup_notebook

_LAZY = {"atlas", "descent", "sphere", "train", "ensemble", "experiments", "dynamics", "tasks", "models", "viz", "bench"}


def __getattr__(name):
    if name in _LAZY:
        return importlib.import_module(f"energylab.{name}")
    raise AttributeError(f"module 'energylab' has no attribute {name!r}")


__all__ = ["catalog", "energies", "hyperspherical", "modules", "operators",
           "choose_device", "format_error", "seed_everything", "setup_notebook", *sorted(_LAZY)]
__version__ = "0.1.0"
