"""Bad input to the command line (issue 35): --commit never overwrites without --force, checked before training;
every experiment's CLI refuses a bad profile, a CUDA device on a machine without one, an --out that is a file or
unwritable, and --threads 0, with exit code 2 and one line."""
import os

import pytest
import torch

from energylab import __main__ as cli
from energylab.engine import committed as C
from energylab.engine.results import Results
from energylab.experiments import EXPERIMENTS


def _results():
    return Results("nt", {"a": 1}, final={"acc": 0.5})


def _cli(capsys, *args):
    code = cli.main(["run", *args])
    err = capsys.readouterr().err
    return code, err


def test_cli_commit_over_an_existing_file_is_refused_before_training(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(C, "ROOT", str(tmp_path / "results"))
    path = C.commit_results(_results(), "nt", "medium", source={"commit": "abc", "dirty": False})
    code, err = _cli(capsys, "nt", "--profile", "medium", "--out", str(tmp_path / "run"), "--commit", "--unpinned")
    assert code == 2 and err.startswith(f"error: {path} already holds committed results; pass --force")
    assert not (tmp_path / "run").exists()  # nothing was trained
    code, err = _cli(capsys, "nt", "--out", str(tmp_path / "run"), "--force")
    assert code == 2 and err == "error: --force only applies to --commit\n"


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_cli_bad_input_for_every_experiment(name, tmp_path, capsys):
    code, err = _cli(capsys, name, "--profile", "huge", "--out", str(tmp_path / "a"))
    assert code == 2 and err.startswith(f"error: unknown profile 'huge' for experiment '{name}'; valid profiles: ")
    assert err.count("\n") == 1 and not (tmp_path / "a").exists()

    afile = tmp_path / "file"
    afile.write_text("not a folder")
    code, err = _cli(capsys, name, "--out", str(afile))
    assert code == 2 and err.startswith(f"error: out_dir='{afile}' is not writable")
    assert afile.read_text() == "not a folder"

    code, err = _cli(capsys, name, "--out", "/proc/energylab-run")
    assert code == 2 and err.startswith("error: out_dir='/proc/energylab-run' is not writable")

    code, err = _cli(capsys, name, "--threads", "0", "--out", str(tmp_path / "b"))
    assert code == 2 and err == "error: --threads must be >= 1, got 0\n"

    if not torch.cuda.is_available():
        code, err = _cli(capsys, name, "--device", "cuda", "--out", str(tmp_path / "c"))
        assert code == 2 and "cuda" in err.lower() and err.startswith("error: ")
        assert not (tmp_path / "c").exists()
    assert not os.path.exists(tmp_path / "b")
