"""scripts/drift_check.py's pieces that need no new environment: which requirements it keeps pinned, which chapters
it selects, and what its report says (issue 32)."""
import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("drift_check", ROOT / "scripts" / "drift_check.py")
dc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dc)


def test_numeric_packages_are_upgraded_and_everything_else_stays_pinned():
    text = ("# env\ntorch==2.13.0\nnumpy==2.4.6\nscikit-learn==1.9.1  # digits\n-e .\nplotly==7.1.0\nSciPy==1.1\n"
            "ruff==0.1\n")
    assert dc.other_requirements(text) == ["scikit-learn==1.9.1", "ruff==0.1"]
    kept = dc.other_requirements((ROOT / "requirements.txt").read_text())
    assert kept and not any(line.split("==")[0] in dc.NUMERIC for line in kept) and "-e ." not in kept
    assert set(dc.pinned_versions()) == set(dc.NUMERIC)  # requirements.txt pins all four


def test_chapter_selection_by_prefix():
    assert [p.name[:2] for p in dc.select(["01", "11"])] == ["01", "11"]
    assert len(dc.select(None)) >= 11
    with pytest.raises(SystemExit, match="99"):
        dc.select(["01", "99"])


def test_report_counts_chapters_that_hold_and_shows_the_failure():
    runs = [{"notebook": "01_a.ipynb", "seconds": 60.0, "error": None, "problems": []},
            {"notebook": "02_b.ipynb", "seconds": 30.0, "problems": ["cell 4 (x): stderr: 'FutureWarning | y'"],
             "error": {"type": "CellExecutionError", "ename": "AssertionError", "cell": 7,
                       "cell_starts": "assert err < 1e-9", "message": "err = 3e-6"}}]
    versions = {"torch": "2.14.1", "numpy": "2.4.6", "scipy": "1.17.1", "plotly": "7.1.0"}
    page = dc.render(runs, versions, {"torch": "2.13.0"}, {"torch": "2.15.0"}, {"pip_conflicts": []}, "CPU", "n.")
    assert "**1 of 2 chapters hold.**" in page and "| torch | 2.13.0 | 2.14.1 | 2.15.0 |" in page
    assert "| 01_a.ipynb | holds | 1.0 min | none | ? |" in page  # no executed copy to compare
    assert "fails at cell 7 (`assert err < 1e-9`): AssertionError: err = 3e-6" in page
    assert "FutureWarning \\| y" in page and "no conflicts reported" in page


def test_printed_changes_counts_compared_cells_only(tmp_path):
    import json

    def nb(*printed):
        cells = [{"cell_type": "markdown", "source": "# t"}]
        for source, text in printed:
            cells.append({"cell_type": "code", "source": source,
                          "outputs": [{"output_type": "stream", "name": "stdout", "text": [text]}]})
        return json.dumps({"cells": cells})

    (tmp_path / "old.ipynb").write_text(nb(("a", "err < 1e-12\n"), ("b", "loss 0.25\n"),
                                           ("# NBVAL_IGNORE_OUTPUT\nc", "took 3 s\n")))
    (tmp_path / "new.ipynb").write_text(nb(("a", "err < 1e-12\n"), ("b", "loss 0.26\n"),
                                           ("# NBVAL_IGNORE_OUTPUT\nc", "took 9 s\n")))
    assert dc.printed_changes(tmp_path / "old.ipynb", tmp_path / "new.ipynb") == (1, 2)


def test_an_existing_folder_it_did_not_build_is_never_replaced(tmp_path):
    (tmp_path / "precious.txt").write_text("keep")
    with pytest.raises(SystemExit, match="not built by drift_check"):
        dc.build_venv(tmp_path, "torch")
    assert (tmp_path / "precious.txt").read_text() == "keep"


# ----------------------------------------------------------------------------- bad input (issue 47)
def test_a_chapter_number_selects_that_chapter_only():
    assert [p.name[:2] for p in dc.select(["1"])] == ["01"]  # not 10 and 11 too
    assert [p.name[:2] for p in dc.select(["01", "10"])] == ["01", "10"]
    assert [p.name for p in dc.select(["08_hy"])] == ["08_hyperset.ipynb"]  # a name prefix still works
    with pytest.raises(dc.Refused, match=r"^no chapter starts with \['0'\]; --chapters takes numbers or name "
                                         r"prefixes of 01_free_energy, "):
        dc.select(["0"])


def _refused(capsys, *argv):
    assert dc.main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err.strip()


def test_bad_paths_are_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    def no_build(*args):
        raise AssertionError("the environment was built before the input was checked")

    monkeypatch.setattr(dc, "build_venv", no_build)
    afile = tmp_path / "file"
    afile.write_text("")
    assert _refused(capsys, "--chapters", "01", "--out", str(afile / "r.md")) == \
        f"error: --out {afile / 'r.md'}: {afile} is a file, not a folder"
    assert _refused(capsys, "--out", str(tmp_path)) == \
        f"error: --out {tmp_path} is a folder; give the report's file path"
    assert _refused(capsys, "--chapters", "99").startswith("error: no chapter starts with ['99']")
    venv = str(tmp_path / "venv")
    assert _refused(capsys, "--venv", venv, "--from-runs", str(tmp_path / "none")) == \
        f"error: --from-runs {tmp_path / 'none'}: no runs.json there (give a folder written by an earlier execution)"
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "runs.json").write_text('[{"notebook": ')
    assert _refused(capsys, "--venv", venv, "--from-runs", str(tmp_path / "runs")).startswith(
        f"error: --from-runs {tmp_path / 'runs'}: runs.json is damaged (")
    monkeypatch.undo()
    with pytest.raises(dc.Refused, match="is a file, not a folder; give an empty or new --venv"):
        dc.build_venv(afile, "torch")


@pytest.mark.parametrize("stamp", ['{"torch_spec": "torch", "building": true}', '{"torch_spec": '])
def test_its_own_failed_or_damaged_build_is_rebuilt(tmp_path, monkeypatch, stamp):
    """A failed pip install left a folder without the stamp, which the next run refused as not its own."""
    path = tmp_path / "venv"
    path.mkdir()
    (path / dc.STAMP).write_text(stamp)
    (path / "half-installed").write_text("")
    created = []
    monkeypatch.setattr(dc.venv.EnvBuilder, "create", lambda self, p: (created.append(p), p.mkdir()))
    monkeypatch.setattr(dc, "_pip", lambda python, *args, log: None)
    record = dc.build_venv(path, "torch")
    assert created == [path] and not (path / "half-installed").exists()
    assert record["torch_spec"] == "torch" and "building" not in json.loads((path / dc.STAMP).read_text())


def test_a_rerun_on_the_same_day_does_not_overwrite_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(dc, "REPORTS", tmp_path)
    assert dc._default_out("2026-11-27") == tmp_path / "2026-11-27.md"
    (tmp_path / "2026-11-27.md").write_text("first")
    (tmp_path / "2026-11-27-2.md").write_text("second")
    assert dc._default_out("2026-11-27") == tmp_path / "2026-11-27-3.md"
