"""Trained looped Sudoku models that ship with the library, loaded with one call (issue 30).

    >>> import energylab
    >>> model = energylab.pretrained("sudoku4-transformer")     # or energylab.pretrained.load(...)
    >>> logits = model(tokens, iterations=16)                   # (B, 16, 4): any T, the loop is the same layer

Each model is a quick-profile run of the league's ``energylab.experiments.sudoku`` (4x4 boards, d = 64, T = 8,
seed 0, one CPU thread): trained by ``scripts/pretrain_sudoku.py`` (numerics pinned; the four shipped today, which
``tests/models/test_pretrained.py`` replays from their recipe), or imported from an earlier run of the same config
by ``scripts/import_sudoku_run.py``, which checks that the reloaded model solves the boards the run recorded.
Beside each state_dict (``<name>.pt``) a record (``<name>.json``, :func:`info`) keeps the model config, the
training recipe, the commit, and the board and cell accuracy measured at every test T on the boards of
``sudoku4-test.json`` (:func:`boards`), which ``tests/models/test_pretrained.py`` re-measures. The book's Sudoku
widget runs the same weights, exported by ``scripts/export_sudoku_js.py``.

The module is callable: ``energylab.pretrained(name)`` is :func:`load`.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import sys
import types
from functools import lru_cache

import numpy as np
import torch

from energylab.models.looped import LoopedConfig, LoopedModel

DIRECTORY = os.path.dirname(os.path.abspath(__file__))
TEST_BOARDS = "sudoku4-test.json"  # the boards the recorded accuracies were measured on


def names() -> list[str]:
    """The names of the pretrained models, sorted: every record ``<name>.json`` in the package (the test boards'
    file aside), whether or not its weights ``<name>.pt`` are there (:func:`load` says which file is missing)."""
    return sorted(f[:-5] for f in os.listdir(DIRECTORY) if f.endswith(".json") and f != TEST_BOARDS)


def _check_name(name) -> str:
    if not isinstance(name, str) or name not in names():
        raise ValueError(f"name must be one of the pretrained models {names()}, got {name!r}")
    return name


@lru_cache(maxsize=None)
def _record(path: str) -> dict:
    """The parsed record at ``path`` (cached per path; a damaged one raises ValueError naming the model)."""
    name = os.path.basename(path)[:-5]
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"pretrained model {name!r}: its record {path} is damaged (not JSON: {err}); restore it "
                         f"from the energylab package (reinstall, or git checkout)") from None
    if not isinstance(record, dict) or not isinstance(record.get("model"), dict):
        raise ValueError(f"pretrained model {name!r}: its record {path} is damaged (no 'model' config); restore it "
                         f"from the energylab package (reinstall, or git checkout)")
    return record


def info(name: str) -> dict:
    """The record of model ``name``: ``model`` (LoopedConfig fields), ``recipe`` (experiment, profile, full
    config, steps, parameters), ``accuracy`` ({set: {str(T): {"board", "cell"}}}), ``commit``, ``numerics``,
    ``machine``, ``date``, ``train_seconds``, ``sha256`` (of the weights file ``<name>.pt``)."""
    return json.loads(json.dumps(_record(os.path.join(DIRECTORY, _check_name(name) + ".json"))))  # a fresh copy


def file_sha256(path: str) -> str:
    """The SHA-256 of the file at ``path`` (hex): what a record's ``sha256`` holds for its weights file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_LFS_POINTER = b"version https://git-lfs"  # how a git-lfs pointer file begins (the weights were never fetched)


def _weights_path(name: str, record: dict) -> str:
    """The path of ``name``'s weights, checked against the record's sha256 before torch reads a byte of it: a
    flipped bit inside a tensor loads silently otherwise (torch.load does not check the zip's CRCs)."""
    path = os.path.join(DIRECTORY, name + ".pt")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"pretrained model {name!r}: its weights file {path} is missing (its record is "
                                f"there); restore it from the energylab package (reinstall, or git checkout)")
    with open(path, "rb") as f:
        head = f.read(len(_LFS_POINTER))
    if head == _LFS_POINTER:
        raise ValueError(f"pretrained model {name!r}: {path} is a git-lfs pointer file, not the weights; fetch them "
                         f"with `git lfs pull` (or install energylab from its package)")
    want = record.get("sha256")
    if not isinstance(want, str):
        raise ValueError(f"pretrained model {name!r}: its record has no sha256 of the weights file, so {path} "
                         f"cannot be verified; restore the record from the energylab package")
    got = file_sha256(path)
    if got != want:
        raise ValueError(f"pretrained model {name!r}: its weights file {path} is damaged (sha256 {got} differs from "
                         f"the record's {want}); restore it from the energylab package (reinstall, or git checkout)")
    return path


def load(name: str, device: str | torch.device = "cpu") -> LoopedModel:
    """The pretrained :class:`~energylab.models.looped.LoopedModel` ``name``, in eval mode on ``device``.

    The weights file is verified against the record's sha256 first; a missing, damaged or git-lfs pointer file
    raises FileNotFoundError or ValueError naming the model, and so does a device torch cannot place it on."""
    from energylab.engine.train import check_device

    record = info(name)
    try:  # before any work: torch's own error would come from deep inside .to()
        device = check_device(device)
    except ValueError as err:
        raise ValueError(f"pretrained model {name!r}: {err}") from None
    path = _weights_path(name, record)
    model = LoopedModel(LoopedConfig(**record["model"]))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except Exception as err:  # noqa: BLE001 - a file that matches its checksum but not its record
        raise ValueError(f"pretrained model {name!r}: its weights {path} do not load into the model its record "
                         f"describes ({type(err).__name__}: {str(err).splitlines()[0]})") from None
    return model.eval().to(device)


@lru_cache(maxsize=None)
def _boards() -> dict:
    with open(os.path.join(DIRECTORY, TEST_BOARDS)) as f:
        return json.load(f)


def boards(set_name: str) -> tuple[np.ndarray, np.ndarray]:
    """(puzzles, solutions) of the committed test set ``set_name`` ("4x4-id" or "4x4-ood"), each (n, 4, 4)
    int64 with 0 for a blank."""
    data = _boards()
    if set_name not in data["sets"]:
        raise ValueError(f"set_name must be one of {sorted(data['sets'])}, got {set_name!r}")
    s = data["size"]

    def grid(rows):
        return np.array([[int(ch) for ch in r] for r in rows], dtype=np.int64).reshape(-1, s, s)

    return grid(data["sets"][set_name]["puzzles"]), grid(data["sets"][set_name]["solutions"])


def boards_dataset(set_name: str):
    """The committed test set ``set_name`` as an ``energylab.tasks.sudoku.SudokuDataset``."""
    from energylab.tasks.sudoku import SudokuDataset

    return SudokuDataset(*boards(set_name))


def accuracy(model: LoopedModel, data, iterations) -> dict[str, dict[str, float]]:
    """{str(T): {"board", "cell"}} of ``model`` on ``data`` (a SudokuDataset) at every T in ``iterations``, on the
    blanks (the experiments' own :func:`energylab.tasks.sudoku_harness.test_time`, exact counts)."""
    from energylab.tasks.sudoku_harness import test_time

    return {str(t): v for t, v in test_time(model, data, iterations).items()}


def as_float64(model: LoopedModel) -> LoopedModel:
    """A float64 copy of ``model`` that keeps float32's epsilon where ``nn.RMSNorm`` has none (torch takes the
    dtype's). The page's JavaScript computes this model (float64 arithmetic on the float32 weights), so it is the
    reference the site's smoke test holds it to; the float32 model itself drifts from it as its rounding errors grow
    along the iterations (measured on Hyper-SET: 4.5e-5 in the logits at t = 8, 1.5e-3 at t = 32)."""
    import copy

    out = copy.deepcopy(model).double()
    for module in out.modules():
        if isinstance(module, torch.nn.RMSNorm) and module.eps is None:
            module.eps = torch.finfo(torch.float32).eps
    return out


def logits_along(model: LoopedModel, tokens: torch.Tensor, iterations: int) -> torch.Tensor:
    """The logits after every iteration t = 1..``iterations``: (B, N) tokens -> (B, iterations, N, n)."""
    with torch.no_grad():
        at = model.readouts(tokens, range(1, iterations + 1))
    return torch.stack([at[t] for t in range(1, iterations + 1)], 1)


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`load`."""

    def __call__(self, *args, **kwargs) -> LoopedModel:
        return load(*args, **kwargs)


__signature__ = inspect.signature(load)
__all__ = ["names", "info", "load", "file_sha256", "as_float64", "logits_along", "boards", "boards_dataset", "accuracy",
           "DIRECTORY", "TEST_BOARDS"]
sys.modules[__name__].__class__ = _CallableModule
