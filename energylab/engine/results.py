"""What a run produced, as data: metric curves and experiment results.

:class:`History` is what one training run (:func:`energylab.engine.train.train`) returns; :class:`Results` is what an
experiment's ``run(config)`` returns: several histories, headline numbers and small tables. Both round-trip
through JSON, so a notebook can read results produced elsewhere by ``python -m energylab run``. The folders they
are written to, checkpoints and the identity of a run are :mod:`energylab.engine.runs`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from energylab.engine.runs import RESULTS, prepare_out_dir, read_json, write_json


def seed_spread(values: Iterable[float]) -> tuple[float, float]:
    """Mean and spread of one number over seeds (or any repeated runs), the book's one convention for a ``_std`` in
    a committed table: the sample standard deviation (ddof = 1), since the seeds are a sample of the seeds one could
    have run; 0.0 for a single run. In float64 with torch's mean and std, as the committed tables were computed."""
    import torch

    v = torch.tensor([float(x) for x in values], dtype=torch.float64)
    if v.numel() == 0:
        raise ValueError("seed_spread needs at least one value")
    return float(v.mean()), float(v.std()) if v.numel() > 1 else 0.0


@dataclass
class History:
    """Metric curves: ``curves[name]`` values at ``steps[name]`` (number of completed optimiser steps).

    Train metrics are stored under their own names ("loss", "acc", ...), evaluation metrics with the
    prefix ``"eval/"``.
    """

    steps: dict[str, list[int]] = field(default_factory=dict)
    curves: dict[str, list[float]] = field(default_factory=dict)

    def log(self, step: int, metrics: dict[str, float], prefix: str = "") -> None:
        """Append ``metrics`` (name -> number) at ``step``."""
        for name, value in metrics.items():
            self.steps.setdefault(prefix + name, []).append(int(step))
            self.curves.setdefault(prefix + name, []).append(float(value))

    def last(self, name: str) -> float:
        """The latest value of a curve (KeyError listing the curves if unknown)."""
        if name not in self.curves:
            raise KeyError(f"no curve {name!r}; curves: {sorted(self.curves)}")
        return self.curves[name][-1]

    @property
    def final(self) -> dict[str, float]:
        """The latest value of every curve."""
        return {name: values[-1] for name, values in self.curves.items() if values}

    def to_dict(self) -> dict:
        return {"steps": self.steps, "curves": self.curves}

    @classmethod
    def from_dict(cls, d: dict) -> "History":
        return cls(steps={k: list(map(int, v)) for k, v in d["steps"].items()},
                   curves={k: list(map(float, v)) for k, v in d["curves"].items()})

    def save(self, path: str) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str) -> "History":
        data = read_json(path)
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise ValueError(f"{path} is not an energylab History ({type(err).__name__}: {err})") from None


@dataclass
class Results:
    """What an experiment's ``run(config)`` returns; saved as JSON next to the checkpoint.

    ``histories`` maps a run label (e.g. ``"EA/seed3"``) to its curves, ``final`` holds the headline
    numbers, ``tables`` small tables as lists of rows, ``extra`` any other JSON-able data (e.g. an
    attention matrix as nested lists).
    """

    experiment: str
    config: dict
    histories: dict[str, History] = field(default_factory=dict)
    final: dict[str, float] = field(default_factory=dict)
    tables: dict[str, list[dict]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"experiment": self.experiment, "config": self.config,
                "histories": {k: h.to_dict() for k, h in self.histories.items()},
                "final": self.final, "tables": self.tables, "extra": self.extra}

    @classmethod
    def from_dict(cls, d: dict) -> "Results":
        return cls(experiment=d["experiment"], config=d["config"],
                   histories={k: History.from_dict(h) for k, h in d["histories"].items()},
                   final=d["final"], tables=d["tables"], extra=d["extra"])

    def save(self, out_dir: str) -> str:
        """Write ``out_dir/results.json`` atomically; return its path."""
        path = os.path.join(prepare_out_dir(out_dir), RESULTS)
        write_json(path, self.to_dict())
        return path

    @classmethod
    def load(cls, out_dir: str) -> "Results":
        """Read ``out_dir/results.json`` (or a path to a .json file)."""
        path = out_dir if out_dir.endswith(".json") else os.path.join(out_dir, RESULTS)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no results at {path}; produce them with `python -m energylab run ...`")
        data = read_json(path)
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise ValueError(f"{path} is not an energylab results file ({type(err).__name__}: {err})") from None
