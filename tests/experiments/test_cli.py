"""The experiment registry and ``python -m energylab``: list, run, resume, load results, error messages."""
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from energylab import experiments
from energylab.__main__ import main
from energylab.engine.runs import config_record
from energylab.engine.train import History, Results, TrainConfig, train
from energylab.experiments import nt


# --- a toy experiment following the pattern, registered for these tests only
@dataclass
class Config:
    steps: int = 8  # optimiser steps
    lr: float = 0.1  # learning rate
    seed: int = 0  # seed of the run
    device: str = "auto"  # device


PROFILES = {"quick": Config(), "full": Config(steps=30)}
COST = {"quick": "instant", "full": "instant"}
CHAPTER = "10_design_your_own"  # a toy has no chapter; `list` needs one to show
INTERRUPT = {"at": -1}  # the toy raises KeyboardInterrupt after this step, as Ctrl-C would (-1 = never)


def run(config: Config, out_dir=None, resume=False) -> Results:
    torch.manual_seed(config.seed)
    model = torch.nn.Linear(3, 1)

    def loss_fn(m, batch):
        return ((m(batch) - 1.0) ** 2).mean(), {}

    def ctrl_c(m, step):
        if step == INTERRUPT["at"]:
            raise KeyboardInterrupt

    cfg = TrainConfig(steps=config.steps, lr=config.lr, seed=config.seed, device=config.device, progress=False,
                      checkpoint_every=4)
    h = train(model, loss_fn, lambda s: torch.ones(5, 3) * (s % 3), cfg, out_dir=out_dir, resume=resume,
              after_step=ctrl_c, identity=config_record(config))
    return Results("toy", {"steps": config.steps}, histories={"seed0": h}, final={"loss": h.last("loss")})


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", __name__)


def test_list_shows_experiments_profiles_and_cost(toy, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "toy" in out and "instant" in out and "nt" in out and "full" in out


FULL = {"steps": 30, "lr": 0.05, "seed": 0, "device": "cpu"}


def _run_toy(out, *extra):
    return main(["run", "toy", "--profile", "full", "--device", "cpu", "--out", out, "--set", "lr=0.05", *extra])


def _err_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err.strip()


def test_run_writes_results_that_load_or_run_reads(toy, tmp_path, capsys):
    out = str(tmp_path / "r")
    assert _run_toy(out) == 0
    assert "results written" in capsys.readouterr().out
    assert sorted(os.listdir(out)) == ["checkpoint.pt", "results.json", "run.json"]
    res = Results.load(out)
    assert res.config == FULL and res.histories["seed0"].steps["loss"][-1] == 30
    # present with the same config (the device may differ): loaded, not re-run
    assert experiments.load_or_run("toy", "full", out_dir=out, lr=0.05, device="auto") == res
    with pytest.raises(ValueError, match=r"results.json was written with another config: steps: 30 \(recorded\) "
                                         r"!= 8 \(requested\); lr: 0.05 \(recorded\) != 0.1 \(requested\)"):
        experiments.load_or_run("toy", "quick", out_dir=out)
    with pytest.raises(ValueError, match="holds experiment 'toy', not 'nt'"):
        experiments.load_or_run("nt", "quick", out_dir=out)
    # resume of a finished run reproduces it
    assert _run_toy(out, "--resume") == 0
    assert Results.load(out) == res


def test_fresh_run_refuses_a_folder_holding_a_run(toy, tmp_path, capsys):
    out = str(tmp_path / "r")
    assert _run_toy(out) == 0
    before = {name: open(os.path.join(out, name), "rb").read() for name in os.listdir(out)}
    capsys.readouterr()
    assert _run_toy(out, "--set", "steps=12") == 2
    assert re.fullmatch(r"error: out_dir '.*r' already holds a run \(checkpoint.pt, results.json, run.json\); "
                        r"pass resume=True \(--resume\) to continue it, or choose another folder", _err_line(capsys))
    assert {name: open(os.path.join(out, name), "rb").read() for name in os.listdir(out)} == before


def test_resume_under_another_config_names_the_fields(toy, tmp_path, capsys):
    out = str(tmp_path / "r")
    assert _run_toy(out) == 0
    results = open(os.path.join(out, "results.json")).read()
    capsys.readouterr()
    assert _run_toy(out, "--resume", "--set", "lr=0.02") == 2
    assert _err_line(capsys).endswith("run.json was written with another config: lr: 0.05 (recorded) != 0.02 "
                                      "(requested); pass the config it was written with, or choose another folder")
    assert main(["run", "toy", "--out", out, "--resume", "--set", "lr=0.05"]) == 2  # the quick profile
    assert "steps: 30 (recorded) != 8 (requested)" in _err_line(capsys)
    assert open(os.path.join(out, "results.json")).read() == results
    # the library's own backstop: a checkpoint records the experiment config it was trained under
    with pytest.raises(ValueError, match=r"checkpoint .*checkpoint.pt was written with another config: train.lr: "
                                         r"0.05 \(checkpoint\) != 0.02 \(now\); config.lr: 0.05 \(checkpoint\) "
                                         r"!= 0.02 \(now\);"):
        run(Config(steps=30, lr=0.02, device="cpu"), out_dir=out, resume=True)
    os.remove(os.path.join(out, "run.json"))  # a folder with checkpoints only (e.g. written by run() itself)
    os.remove(os.path.join(out, "results.json"))
    assert _run_toy(out, "--resume", "--set", "lr=0.02") == 2
    assert "config.lr: 0.05 (checkpoint) != 0.02 (now)" in _err_line(capsys)
    assert os.listdir(out) == ["checkpoint.pt"]  # no run.json claiming the refused config is left behind


def test_ctrl_c_keeps_the_last_checkpoint_and_writes_no_results(toy, tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "r")
    monkeypatch.setitem(INTERRUPT, "at", 9)
    assert _run_toy(out) == 130  # checkpoints at steps 4 and 8
    assert _err_line(capsys) == (f"error: interrupted; results.json not written; 1 checkpoint(s) kept under {out} "
                                 f"(checkpoint.pt)")
    assert sorted(os.listdir(out)) == ["checkpoint.pt", "run.json"]
    assert torch.load(os.path.join(out, "checkpoint.pt"), weights_only=True)["step"] == 8
    with pytest.raises(FileNotFoundError):  # load_or_run finds no results.json and continues the run ...
        Results.load(out)
    monkeypatch.setitem(INTERRUPT, "at", -1)
    assert _run_toy(out, "--resume", "--set", "steps=31") == 2  # ... but only under the same config
    assert "steps: 30 (recorded) != 31 (requested)" in _err_line(capsys)
    assert _run_toy(out, "--resume") == 0
    assert _run_toy(str(tmp_path / "ref")) == 0
    assert Results.load(out) == Results.load(str(tmp_path / "ref"))  # equals the uninterrupted run


def test_ctrl_c_before_any_checkpoint_leaves_nothing(toy, tmp_path, capsys, monkeypatch):
    out = tmp_path / "r"
    monkeypatch.setitem(INTERRUPT, "at", 1)
    assert _run_toy(str(out)) == 130
    assert _err_line(capsys) == "error: interrupted; nothing was saved"
    assert not out.exists()
    out.mkdir()  # a folder that existed before stays, empty
    assert _run_toy(str(out)) == 130
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("argv,code,msg", [
    (["--set", "lr=1e4", "--set", "grad_clip=None", "--set", "seeds=1"], 1,
     r"error: training diverged: loss is not finite at step \d+ \(0-based\) for seeds \[0\]; no checkpoint of "
     r"this run was written .*; nothing was saved"),
    (["--device", "xpu"], 2, r"error: device='xpu' is not supported: use 'auto', 'cpu', .*"),
    (["--device", "meta"], 2, r"error: device='meta' is not supported: .*"),
    (["--set", "seeds=x"], 2, r"error: config field 'seeds' of experiment 'nt' expects int, got 'x' \(str\)"),
    (["--set", "eval_every=-5"], 2, r"error: eval_every must be an int >= 0 .*got -5"),
    (["--set", "grad_clip=big"], 2, r"error: config field 'grad_clip' .* expects float \| None, got 'big' \(str\)"),
])
def test_cli_failures_are_one_line_and_create_nothing(tmp_path, capsys, argv, code, msg):
    out = tmp_path / "out"
    assert main(["run", "nt", "--out", str(out), *argv]) == code
    assert re.fullmatch(msg, _err_line(capsys))
    assert not out.exists()


def test_module_failure_prints_no_traceback(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "energylab", "run", "nt", "--device", "meta", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "" and not out.exists()
    assert proc.stderr.splitlines() == ["error: device='meta' is not supported: use 'auto', 'cpu', 'cuda', "
                                        "'cuda:<index>' or 'mps'"]


def test_overrides_are_checked_against_the_field_types():
    cfg = experiments.get_config("nt", "quick", lr=1, grad_clip=None, attentions=["EA"], seeds=2)
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float) and cfg.grad_clip is None and cfg.attentions == ("EA",)
    for field, value, expected in [("seeds", "x", "int"), ("seeds", True, "int"), ("seeds", 2.0, "int"),
                                   ("progress", 1, "bool"), ("attentions", "EA", r"tuple\[str, \.\.\.\]"),
                                   ("runs", ({"N": 2},), r"tuple\[.*NTRun, \.\.\.\]")]:
        with pytest.raises(ValueError, match=f"config field '{field}' of experiment 'nt' expects {expected}, got"):
            experiments.get_config("nt", "quick", **{field: value})
    assert experiments.get_config("attractor", "quick", n_train=None, tau_range=[2, 4]).tau_range == (2, 4)
    with pytest.raises(ValueError, match=r"'tau_range' .* expects tuple\[int, int\], got \(3,\)"):
        experiments.get_config("attractor", "quick", tau_range=(3,))


def test_nt_eval_every_zero_evaluates_at_start_and_end_only():
    cfg = nt.Config(runs=(nt.NTRun("tiny", 2, 5, 16, 6),), attentions=("DPA",), seeds=2, eval_every=0,
                    n_eval_series=2, n_final_series=2, attention_maps=2, device="cpu", progress=False)
    res = nt.run(cfg)
    h = res.histories["tiny/DPA/seed0"]
    assert h.steps["eval/acc"] == [0, 6] and h.steps["loss"] == [6]
    with pytest.raises(ValueError, match="eval_every must be an int >= 0"):
        nt.run(experiments.get_config("nt", "quick", eval_every=-1))


@pytest.mark.parametrize("argv,msg", [
    (["run", "nope"], "unknown experiment 'nope'; valid experiments: .*nt.*toy"),
    (["run", "toy", "--profile", "huge"], "unknown profile 'huge' .* valid profiles: quick, full"),
    (["run", "toy", "--set", "epochz=3"], r"unknown config field\(s\) \['epochz'\]"),
    (["run", "toy", "--out", "/dev/null/x"], "not writable"),
    # experiments that train one model per seed have no `seed` field: the error says which field to set
    (["run", "sudoku", "--set", "seed=3"], r"\['seed'\] for experiment 'sudoku'; it trains one model per entry of "
                                          r"'seeds', e\.g\. --set seeds=\[3\]"),
    (["run", "forms", "--set", "seed=3"], r"\['seed'\] for experiment 'forms'; it trains one model per entry of"),
])
def test_cli_errors_list_valid_choices(toy, capsys, argv, msg):
    assert main(argv) == 2
    assert re.search(msg, capsys.readouterr().err)


def test_registry_helpers():
    with pytest.raises(ValueError, match="valid experiments"):
        experiments.get_experiment("NT")
    cfg = experiments.get_config("nt", "quick", seeds=2)
    assert cfg.seeds == 2 and experiments.get_config("nt", "quick").seeds != 2  # a copy, profile untouched
    nt_profiles = {r["profile"] for r in experiments.describe() if r["experiment"] == "nt"}
    assert nt_profiles == {"quick", "medium", "medium-n16t2", "long-n16t2", "figures", "n16t2-causes", "clip-guard",
                           "full"}
    assert isinstance(History(), History)


def test_every_experiment_follows_the_convention():
    import dataclasses
    import inspect
    import typing

    assert set(experiments.EXPERIMENTS) >= {"nt", "lis", "attractor", "hopfield"}
    for name in experiments.EXPERIMENTS:
        module = experiments.get_experiment(name)
        assert dataclasses.is_dataclass(module.Config) and not hasattr(module.Config, "preset"), name
        assert {"quick", "full"} <= set(module.PROFILES) == set(module.COST), name  # medium and variants may follow
        assert all(type(c) is module.Config for c in module.PROFILES.values()), name
        fields = {f.name for f in dataclasses.fields(module.Config)}
        assert "device" in fields and fields & {"seed", "seeds"}, name
        assert list(inspect.signature(module.run).parameters) == ["config", "out_dir", "resume"], name
        assert typing.get_type_hints(module.run)["return"] is Results, name


def test_module_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "energylab", "list"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    for name in ("nt", "lis", "attractor", "hopfield"):
        assert {"quick", "full"} <= {line.split()[2] for line in proc.stdout.splitlines() if line.split()[:1] == [name]}


# --- issue 47: sizes, the device, the numerics of a resumed committed run
@pytest.mark.parametrize("name, setting, field, says", [
    ("sudoku", "n_train=0", "n_train", "must be >= 1"), ("sudoku", "n_test=0", "n_test", "must be >= 1"),
    ("hopfield", "n_queries=0", "n_queries", "must be >= 1"), ("hopfield", "steps=0", "steps", "must be >= 1"),
    ("forms", "steps=0", "steps", "must be >= 1"), ("nt", "n_final_series=0", "n_final_series", "must be >= 1"),
    ("forms", "timing_steps=0", "timing_steps", "must be >= 1"),
    ("recurrent", "lyap_steps=0", "lyap_steps", "must be >= 1"),
    ("lis", "lengths=()", "lengths", "must hold at least one entry, each >= 1"),
    ("hopfield", "n_patterns=[10,0]", "n_patterns", "must hold at least one entry, each >= 1"),
    ("sudoku", "test_sets=[]", "test_sets", "must hold at least one entry")])
def test_zero_or_empty_sizes_are_refused_before_anything_runs(name, setting, field, says, tmp_path, capsys):
    """They once ran to exit 0 with NaN (or "violations: 0" over zero queries) in results.json."""
    out = tmp_path / "r"
    assert main(["run", name, "--device", "cpu", "--out", str(out), "--set", setting]) == 2
    assert _err_line(capsys).startswith(f"error: config field '{field}' of experiment '{name}' {says}")
    assert not out.exists()


def test_set_device_is_honoured_and_a_conflict_refused(toy, tmp_path, capsys):
    out = str(tmp_path / "r")
    assert main(["run", "toy", "--out", out, "--device", "cpu", "--set", "device=cuda"]) == 2
    assert _err_line(capsys) == "error: --device cpu and --set device=cuda disagree: give the device once"
    assert main(["run", "toy", "--out", out, "--set", "device=cpu"]) == 0  # honoured, not replaced by auto
    assert Results.load(out).config["device"] == "cpu"
    if not torch.cuda.is_available():  # honoured: refused here, not trained on the CPU
        assert main(["run", "toy", "--out", str(tmp_path / "c"), "--set", "device=cuda"]) == 2
        assert "CUDA is not available" in _err_line(capsys)


def test_resume_commit_refuses_a_run_trained_under_other_numerics(toy, tmp_path, capsys, monkeypatch):
    """An interrupted run made unpinned on 2 threads, resumed with --commit, was committed as pinned, 1 thread."""
    import json

    from energylab.engine import committed
    from energylab.engine.runs import process_numerics

    monkeypatch.setattr(committed, "ROOT", str(tmp_path / "results"))
    monkeypatch.setitem(INTERRUPT, "at", 5)
    out = str(tmp_path / "r")
    assert _run_toy(out) == 130
    manifest = os.path.join(out, "run.json")
    with open(manifest) as f:
        record = json.load(f)
    assert record["numerics"] == [process_numerics()]  # what this segment ran under
    record["numerics"] = [{"numerics": "unpinned: MKL_CBWR", "torch_threads": 2}]
    with open(manifest, "w") as f:
        json.dump(record, f)
    monkeypatch.setitem(INTERRUPT, "at", -1)
    capsys.readouterr()
    assert _run_toy(out, "--resume", "--commit") == 2
    now = process_numerics()
    assert _err_line(capsys) == (
        f"error: --resume --commit: the run in {out} was trained under other numerics (unpinned: MKL_CBWR, 2 "
        f"thread(s)) than this process's ({now['numerics']}, {now['torch_threads']} thread(s)), so its results "
        f"cannot be committed as made under them; commit a fresh run (--commit with a new --out), or resume without "
        f"--commit")
    assert not os.path.exists(tmp_path / "results") and not os.path.exists(os.path.join(out, "results.json"))
    del record["numerics"]  # a run.json from before the numerics were recorded
    with open(manifest, "w") as f:
        json.dump(record, f)
    assert _run_toy(out, "--resume", "--commit") == 2 and "numerics (not recorded)" in _err_line(capsys)
    record["numerics"] = [now]
    with open(manifest, "w") as f:
        json.dump(record, f)
    assert _run_toy(out, "--resume", "--commit") == 0  # the same numerics throughout: committed
    assert os.path.exists(tmp_path / "results" / "toy" / "full.json")


def test_help_fits_a_terminal_of_100_columns():
    """Issue 54: the top-level --help had 9 lines of 101-112 columns."""
    import subprocess
    import sys

    for args in ([], ["run"], ["list"]):
        out = subprocess.run([sys.executable, "-m", "energylab", *args, "--help"], capture_output=True, text=True,
                             check=True, env={**__import__("os").environ, "COLUMNS": "100"}).stdout
        assert max(len(line) for line in out.splitlines()) <= 100, args
