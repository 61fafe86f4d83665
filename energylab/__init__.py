"""energylab: attention mechanisms derived from energy functions.

The library behind the book, in one direction of dependence:

* ``catalog`` <- ``forms`` (the energies and their operators, one module per family) -> ``layers`` (trainable
  layers, one module per family, and the registry of looped layers) -> ``models`` (whole networks) ->
  ``experiments`` (one module per experiment, each with its profiles) -> ``claims`` (what the chapters state about
  the runs, as named booleans, one module per topic);
* ``tasks`` (data, the no-learning solvers and the Sudoku harness), ``baselines`` (the input-blind and no-learning
  scores beside every result), ``engine`` (training, runs, results and the committed files), ``kernels`` (the fast
  paths behind one boundary);
* tools of the chapters: ``sphere`` and ``flows`` (tokens as particles), ``descent`` and ``jacobians`` (dynamics),
  ``atlas``, ``viz`` (figures), ``notebook`` (a chapter's setup and its computed prose numbers), ``portable`` (the
  same numbers on every processor), ``bench`` and ``pretrained``.

    >>> from energylab import catalog
    >>> catalog.verify("softmax_free_energy") < 1e-10
    True

Every submodule is imported on first attribute access, so ``import energylab.portable`` (the environment pins,
which must be set before torch loads) imports no torch, and ``viz``/``experiments`` pull in plotly and the
training engine only when used. ``catalog`` is the one exception to a plain import: it first imports ``forms``,
whose family modules register every form into it (see :mod:`energylab.catalog`; the catalog itself may not import
a family, tests/test_layout.py). A few functions are served from their modules: ``energylab.derive(energy)``
builds a layer (:func:`energylab.layers.energy.derive`), ``energylab.setup_notebook(seed)`` prepares a chapter.
"""
import importlib
import pkgutil

# every public module and package of the library, found on disk, so that none is left unreachable from ``energylab``
_SUBMODULES = {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}
# function name -> the module that defines it
_FUNCTIONS = {**dict.fromkeys(("choose_device", "format_error", "seed_everything"), "_setup"),
              "setup_notebook": "notebook.setup", "derive": "layers.energy"}


def __getattr__(name):
    if name in _SUBMODULES:
        if name == "catalog":  # the registry is complete once every family module has registered its forms
            importlib.import_module("energylab.forms")
        return importlib.import_module(f"energylab.{name}")
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(f"energylab.{_FUNCTIONS[name]}"), name)
    raise AttributeError(f"module 'energylab' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)


__all__ = [*sorted(_SUBMODULES), *sorted(_FUNCTIONS)]
# The book's version, its one source: pyproject.toml reads it (setuptools dynamic attr), the chapters' install
# cell pins the git tag v<version>, and the site footer, CITATION.cff and CHANGELOG.md are checked against it.
__version__ = "0.1.0"
