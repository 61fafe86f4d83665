"""The chapters' code fits 88 columns (issue 52): a reader's JupyterLab does not wrap code, and the website shows 88
columns at a laptop's width. scripts/format_notebooks.py keeps it so; this fails on a chapter it would change or on
a line it cannot shorten (cells with IPython magics, the install cell's URL, aside)."""
import json

import pytest

from tests.probes import ROOT, script

fmt = script("format_notebooks")
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_code_line_fits_88_columns(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    long = fmt.long_lines(nb)
    assert not long, f"{path.name}: code lines over {fmt.WIDTH} columns:\n" + "\n".join(
        f"  cell {i}: {line}" for i, line in long)
    assert fmt.dump(fmt.format_notebook(nb)) == path.read_text(encoding="utf-8"), (
        f"{path.name} is not as scripts/format_notebooks.py writes it: run it")


def test_the_formatter_shortens_what_it_can_and_keeps_the_program():
    source = ('x = compute(1)  # a trailing comment long enough to push this line well past the limit of the page\n'
              'print(\n    f"a label that goes on and on {x:.3f} and on further still, well past the edge, {x}"\n)')
    new = fmt.format_source(source)
    assert all(len(line) <= fmt.WIDTH for line in new.splitlines()), new
    assert new.splitlines()[0].startswith("# a trailing comment")
    import ast

    assert ast.dump(ast.parse(new)) == ast.dump(ast.parse(source))  # the same program
    too_long = 'print(f"{some_function_with_a_long_name(argument_one, argument_two, argument_three, argument_four)}")'
    assert fmt.long_lines({"cells": [{"cell_type": "code", "source": too_long}]}) == [(0, too_long)]
    assert fmt.long_lines({"cells": [{"cell_type": "code", "source": "%pip install " + "x" * 90}]}) == []
