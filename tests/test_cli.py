"""The experiment registry and ``python -m energylab``: list, run, resume, load results, error messages."""
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from energylab import experiments
from energylab.__main__ import main
from energylab.train import History, Results, TrainConfig, train


# --- a toy experiment following the pattern, registered for these tests only
@dataclass
class Config:
    steps: int = 8  # optimiser steps
    lr: float = 0.1  # learning rate
    seed: int = 0  # seed of the run
    device: str = "auto"  # device


PROFILES = {"quick": Config(), "full": Config(steps=30)}
COST = {"quick": "instant", "full": "instant"}


def run(config: Config, out_dir=None, resume=False) -> Results:
    torch.manual_seed(config.seed)
    model = torch.nn.Linear(3, 1)

    def loss_fn(m, batch):
        return ((m(batch) - 1.0) ** 2).mean(), {}

    cfg = TrainConfig(steps=config.steps, lr=config.lr, seed=config.seed, device=config.device, progress=False,
                      checkpoint_every=4)
    h = train(model, loss_fn, lambda s: torch.ones(5, 3) * (s % 3), cfg, out_dir=out_dir, resume=resume)
    return Results("toy", {"steps": config.steps}, histories={"seed0": h}, final={"loss": h.last("loss")})


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", __name__)


def test_list_shows_experiments_profiles_and_cost(toy, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "toy" in out and "instant" in out and "nt" in out and "full" in out


def test_run_writes_results_that_load_or_run_reads(toy, tmp_path, capsys):
    out = str(tmp_path / "r")
    assert main(["run", "toy", "--profile", "full", "--device", "cpu", "--out", out, "--set", "lr=0.05"]) == 0
    assert "results written" in capsys.readouterr().out
    res = Results.load(out)
    assert res.config == {"steps": 30} and res.histories["seed0"].steps["loss"][-1] == 30
    loaded = experiments.load_or_run("toy", "quick", out_dir=out)  # present: loaded, not re-run
    assert loaded == res
    with pytest.raises(ValueError, match="holds experiment 'toy', not 'nt'"):
        experiments.load_or_run("nt", "quick", out_dir=out)
    # resume of a finished run reproduces it
    assert main(["run", "toy", "--profile", "full", "--device", "cpu", "--out", out, "--resume",
                 "--set", "lr=0.05"]) == 0
    assert Results.load(out) == res


@pytest.mark.parametrize("argv,msg", [
    (["run", "nope"], "unknown experiment 'nope'; valid experiments: .*nt.*toy"),
    (["run", "toy", "--profile", "huge"], "unknown profile 'huge' .* valid profiles: quick, full"),
    (["run", "toy", "--set", "epochz=3"], r"unknown config field\(s\) \['epochz'\]"),
    (["run", "toy", "--out", "/dev/null/x"], "not writable"),
])
def test_cli_errors_list_valid_choices(toy, capsys, argv, msg):
    assert main(argv) == 2
    import re
    assert re.search(msg, capsys.readouterr().err)


def test_registry_helpers():
    with pytest.raises(ValueError, match="valid experiments"):
        experiments.get_experiment("NT")
    cfg = experiments.get_config("nt", "quick", seeds=2)
    assert cfg.seeds == 2 and experiments.get_config("nt", "quick").seeds != 2  # a copy, profile untouched
    assert {r["profile"] for r in experiments.describe() if r["experiment"] == "nt"} == {"quick", "full"}
    assert isinstance(History(), History)


def test_module_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "energylab", "list"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "nt" in proc.stdout
