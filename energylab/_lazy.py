"""A package whose submodules are imported on first use, written once (``energylab.engine``, ``energylab.claims``).

    __all__, __getattr__, __dir__ = lazy_submodules(__name__, __path__)

at the end of a package's ``__init__.py`` makes every public module of its folder (found on disk, so none is left
unreachable) an attribute of the package, imported when first read; the import of the package itself stays cheap.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Iterable


def lazy_submodules(package: str, path: Iterable[str]) -> tuple[list[str], Callable, Callable]:
    """(``__all__``, ``__getattr__``, ``__dir__``) for ``package`` (its ``__name__``) from its folder ``path``."""
    names = sorted(m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_"))

    def __getattr__(name: str):
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return list(names)

    return list(names), __getattr__, __dir__
