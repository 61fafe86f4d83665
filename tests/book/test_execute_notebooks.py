"""scripts/execute_notebooks.py refuses a bad path with one line and exit status 2, before any chapter runs (issue 47:
tracebacks before)."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "execute_notebooks.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def _file(tmp, name, text):
    (tmp / name).write_text(text)
    return tmp / name


@pytest.mark.parametrize("make, says", [
    (lambda tmp: tmp / "missing.ipynb", "does not exist"),
    (lambda tmp: tmp, "is not a .ipynb file"),
    (lambda tmp: _file(tmp, "notes.txt", ""), "is not a .ipynb file"),
    (lambda tmp: _file(tmp, "bad.ipynb", '{"cells": ['), "cannot be read as a notebook (NotJSONError"),
])
def test_bad_paths_are_one_line_and_exit_2(tmp_path, make, says):
    text = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    good = _file(tmp_path, "good.ipynb", text)
    path = make(tmp_path)
    done = _run(str(good), str(path))  # checked before any runs: the good one is not executed (nor rewritten)
    assert done.returncode == 2 and done.stdout == "" and good.read_text() == text
    assert done.stderr.startswith(f"error: notebook '{path}' {says}") and done.stderr.count("\n") == 1, done.stderr
