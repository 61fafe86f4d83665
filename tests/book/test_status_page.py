"""scripts/status_page.py: the execution status page the build writes (chapters' runs, committed results)."""
import importlib.util
import json
import pathlib

from energylab.engine.committed import commit_results
from energylab.engine.results import Results

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "status_page.py"
spec = importlib.util.spec_from_file_location("status_page", SCRIPT)
sp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sp)


def _notebook(path, title):
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["# " + title + "\n", "text"]}]}))
    return path


def test_rows_per_chapter_with_result_time_and_missing_runs(tmp_path):
    a = _notebook(tmp_path / "01_a.ipynb", "1. First | chapter")
    b = _notebook(tmp_path / "02_b.ipynb", "2. Second")
    c = _notebook(tmp_path / "03_c.ipynb", "3. Third")
    runs = [{"notebook": "01_a.ipynb", "profile": "quick", "seconds": 12.34, "date": "2026-11-23 15:00", "error": None},
            {"notebook": "02_b.ipynb", "profile": "quick", "seconds": 3.0, "date": "2026-11-23 15:01",
             "error": "PapermillExecutionError: boom"}]
    page = sp.render(runs, [a, b, c], {"processor": "CPU X", "cores": 2, "torch": "2.13.0"}, tmp_path / "none")
    lines = page.splitlines()
    assert lines[0] == "# Execution status" and "on CPU X (2 cores" in page
    assert "| [1. First \\| chapter](../notebooks/01_a.ipynb) | quick | 12.3 s | 2026-11-23 15:00 | passed |" in lines
    assert ("| [2. Second](../notebooks/02_b.ipynb) | quick | 3.0 s | 2026-11-23 15:01 | "
            "failed: PapermillExecutionError: boom |") in lines
    assert "| [3. Third](../notebooks/03_c.ipynb) | committed outputs | not executed in this build | | |" in lines
    assert "No medium or full results are committed yet." in page
    assert "did not execute the chapters" in sp.render([], [a], None, tmp_path / "none")


def test_committed_results_are_listed_with_provenance(tmp_path):
    root = tmp_path / "results"
    commit_results(Results("nt", {}), "nt", "medium", seconds=600, command="python -m energylab run nt", root=str(root))
    rows = sp.committed_table(root)
    assert rows[0].startswith("| Experiment | Results | Date (UTC) | Machine | Commit")
    assert len(rows) == 3 and rows[2].startswith("| nt | `results/nt/medium.json` | 20") and "| 10.0 min |" in rows[2]


def test_status_page_goes_last_in_the_back_matter():
    toc = (SCRIPT.parents[1] / "_toc.yml").read_text()
    staged = sp.add_to_toc(toc)
    assert staged.rstrip().endswith("- file: book/status") and sp.add_to_toc(staged) == staged
    last_part = staged.rsplit("- caption:", 1)[1]
    assert last_part.startswith(" Back matter") and "book/references" in last_part
