"""Bad input to committed results and the command line (issue 35): missing, truncated and hand-edited committed
files; --commit never overwrites without --force; every experiment's CLI refuses a bad profile, a CUDA device on a
machine without one, an --out that is a file or unwritable, and --threads 0, with exit code 2 and one line."""
import json
import os

import pytest
import torch

from energylab import __main__ as cli
from energylab import committed as C
from energylab.experiments import EXPERIMENTS
from energylab.results import Results


def _results():
    return Results("nt", {"a": 1}, final={"acc": 0.5})


def test_missing_truncated_and_hand_edited_committed_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no committed results at .*medium.json"):
        C.load_committed("nt", "medium", root=str(tmp_path))
    path = C.commit_results(_results(), "nt", "medium", root=str(tmp_path), source={"commit": "abc", "dirty": False})
    text = open(path).read()
    assert C.load_committed("nt", "medium", root=str(tmp_path))[0].final == {"acc": 0.5}
    for broken, expected in [
        (text[: len(text) // 2], "is truncated or corrupt"),
        ("[1, 2]", "is not a committed results file"),
        (json.dumps({**json.loads(text), "provenance": "by hand"}), "has no provenance block"),
        (json.dumps({**json.loads(text), "provenance": {"date": "2026"}}), r"lacks provenance fields \['commit', "
                                                                            r"'machine'\]"),
        (json.dumps({k: v for k, v in json.loads(text).items() if k != "histories"}),
         r"is not an energylab results file \(KeyError"),
        (json.dumps({**json.loads(text), "histories": {"s": {"steps": 3}}}), "is not an energylab results file"),
    ]:
        with open(path, "w") as f:
            f.write(broken)
        with pytest.raises(ValueError, match=expected):
            C.load_committed("nt", "medium", root=str(tmp_path))


def test_commit_never_overwrites_without_being_asked(tmp_path):
    root, src = str(tmp_path), {"commit": "abc", "dirty": False}
    path = C.commit_results(_results(), "nt", "medium", root=root, source=src)
    before = open(path).read()
    with pytest.raises(ValueError, match=f"^{path} already holds committed results; pass --force"):
        C.commit_results(Results("nt", {"a": 2}), "nt", "medium", root=root, source=src)
    assert open(path).read() == before
    C.commit_results(Results("nt", {"a": 2}), "nt", "medium", root=root, source=src, overwrite=True)
    assert json.load(open(path))["config"] == {"a": 2}


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
