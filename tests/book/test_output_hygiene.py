"""Committed chapter outputs carry no warnings and no stray stderr (issue 32).

A warning or a progress bar on stderr in a committed output is shown to every reader of the website and of the
notebook, and nbval's sanitizer would let a new one slip in unnoticed; so the outputs themselves are checked:
stream outputs named stderr, error outputs, and any output text that mentions a warning (``...Warning`` or
``warnings.warn``), in the cells and in the saved state of ipywidgets Output widgets (which the website shows).
Reading the JSON only keeps this fast (well under 2 s for every chapter). The check itself lives in
scripts/nbclean.py, beside the clean-up of committed outputs.
"""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from nbclean import WIDGET_STATE, notebook_problems  # noqa: E402 - the check's one home (drift_check uses it too)

CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_chapters():
    assert len(CHAPTERS) >= 11


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_committed_outputs_have_no_warnings_or_stderr(path):
    problems = notebook_problems(json.loads(path.read_text(encoding="utf-8")))
    assert problems == [], f"{path.name}: " + "; ".join(problems)


def _code(*outputs):
    return {"cell_type": "code", "id": "c1", "metadata": {}, "source": "", "outputs": list(outputs)}


def test_the_check_catches_each_kind_of_noise():
    stdout = {"output_type": "stream", "name": "stdout", "text": ["loss 0.1\n"]}
    assert notebook_problems({"cells": [_code(stdout)]}) == []
    stderr = {"output_type": "stream", "name": "stderr", "text": "100%|####| 10/10\n"}
    warned = {"output_type": "stream", "name": "stdout",
              "text": "/x.py:3: UserWarning: deprecated\n  warnings.warn(msg)\n"}
    error = {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": []}
    html = {"output_type": "display_data", "data": {"text/html": ["<pre>FastPathWarning: slow path</pre>"],
                                                    "image/png": "Warning"}}  # binary data is not text
    found = notebook_problems({"cells": [_code(stderr, warned), _code(error), _code(html)]})
    assert len(found) == 4 and found[0].startswith("cell 0 (c1): stderr: '100%")
    assert "UserWarning" in found[1] and "ValueError" in found[2] and "text/html" in found[3]
    widget = {"metadata": {"widgets": {WIDGET_STATE: {"state": {"m1": {"state": {"outputs": [stderr]}}}}}},
              "cells": [{"cell_type": "markdown", "source": "a `FastPathWarning` in prose is fine"}]}
    assert notebook_problems(widget) == ["widget m1: stderr: '100%|####| 10/10'"]
