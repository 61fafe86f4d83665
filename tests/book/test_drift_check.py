"""scripts/drift_check.py's pieces that need no new environment: which requirements it keeps pinned, which chapters
it selects, and what its report says (issue 32)."""
import importlib.util
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
