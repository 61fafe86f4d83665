"""Reading the book outside the website: cell ids (nbformat 4.5) and `python -m energylab list` in a terminal."""
import copy
import importlib.util
import json
import pathlib
import re

import pytest

from energylab.notebook import prose

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("add_cell_ids", ROOT / "scripts" / "add_cell_ids.py")
add_cell_ids = importlib.util.module_from_spec(spec)
spec.loader.exec_module(add_cell_ids)
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_cell_has_an_id(path):
    """nbformat 4.5: every cell carries a unique id (scripts/add_cell_ids.py adds the missing ones)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5)
    missing = [i for i, c in enumerate(nb["cells"]) if not add_cell_ids.VALID.match(str(c.get("id", "")))]
    assert not missing, f"{path.name}: cells {missing} have no id (run python scripts/add_cell_ids.py)"
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids), f"{path.name}: duplicate cell ids"


def test_add_cell_ids_is_deterministic_idempotent_and_touches_nothing_else(tmp_path):
    nb = {"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# T"], "id": "keep-me"},
        {"cell_type": "code", "metadata": {}, "source": "x = 1", "execution_count": 1,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["1\n"]}]},
        {"cell_type": "code", "metadata": {}, "source": "x = 1", "execution_count": 2, "outputs": []},
        {"cell_type": "markdown", "metadata": {}, "source": "dup", "id": "keep-me"}]}
    path = tmp_path / "01_x.ipynb"
    path.write_text(add_cell_ids.dumps(nb), encoding="utf-8")
    assert add_cell_ids.process(path) == 3
    first = path.read_text(encoding="utf-8")
    done = json.loads(first)
    ids = [c["id"] for c in done["cells"]]
    assert ids[0] == "keep-me" and len(set(ids)) == 4 and all(add_cell_ids.VALID.match(i) for i in ids)
    assert done["nbformat_minor"] == 5
    strip = lambda n: [{k: v for k, v in c.items() if k != "id"} for c in n["cells"]]  # noqa: E731
    assert strip(done) == strip(nb)  # sources, outputs, counts unchanged
    assert add_cell_ids.process(path) == 0 and path.read_text(encoding="utf-8") == first  # idempotent
    again = tmp_path / "again" / "01_x.ipynb"
    again.parent.mkdir()
    again.write_text(add_cell_ids.dumps(copy.deepcopy(nb)), encoding="utf-8")
    add_cell_ids.process(again)
    assert again.read_text(encoding="utf-8") == first  # deterministic: same name and cells, same ids
    with pytest.raises(TypeError, match="nb"):
        add_cell_ids.add_ids([], "x")


def test_list_fits_a_100_column_terminal(capsys):
    from energylab.__main__ import LIST_WIDTH, main

    assert main(["list"]) == 0
    short = capsys.readouterr().out.splitlines()
    assert main(["list", "--long"]) == 0
    long = capsys.readouterr().out.splitlines()
    assert LIST_WIDTH == 100
    assert max(map(len, short)) <= 100 and max(map(len, long)) <= 100
    assert not any(line.endswith("…") for line in short)  # issue 54: no cost is cut, in either form
    words = lambda lines: " ".join(" ".join(lines).split())  # noqa: E731
    from energylab import experiments

    for row in experiments.describe():
        assert " ".join(row["cost"].split()) in words(short) and " ".join(row["cost"].split()) in words(long), row
    assert main(["list", "lis"]) == 0
    one = capsys.readouterr().out
    assert "lis " in one and "sudoku" not in one
    assert main(["list", "nope"]) == 2


spec_r = importlib.util.spec_from_file_location("reader_notebooks", ROOT / "scripts" / "reader_notebooks.py")
reader = importlib.util.module_from_spec(spec_r)
spec_r.loader.exec_module(reader)


def test_every_chapter_converts_to_plain_jupyter_markdown(tmp_path):
    """scripts/reader_notebooks.py: no MyST left in any chapter; equations tagged as on the website; exercises as
    headings with collapsed solutions; author-year citations and the references at the end; code cells unchanged (but
    for the figures' HTML)."""
    written = reader.build(tmp_path)
    assert [p.name for p in written] == [p.name for p in CHAPTERS]
    site_numbers = ROOT / "_build" / "html" / "notebooks"
    for path, source in zip(written, CHAPTERS):
        nb, original = json.loads(path.read_text(encoding="utf-8")), json.loads(source.read_text(encoding="utf-8"))
        assert reader.leftovers(nb) == [], path.name
        text = "\n".join(reader._source(c) for c in nb["cells"] if c["cell_type"] == "markdown")
        raw = "\n".join(reader._source(c) for c in original["cells"] if c["cell_type"] == "markdown")
        assert text.count("\\tag{") == raw.count("```{math}")
        assert text.count("#### Exercise ") == raw.count("```{exercise}")
        assert text.count("<details>") == text.count("</details>") == raw.count("```{solution}")
        if "{cite}" in raw:
            assert nb["cells"][-1]["source"].startswith("## References")
            assert re.search(r"\([A-Z][^()]*, (19|20)\d\d[a-z]?\)", text), path.name
        table = prose.table_of(original) or {}  # the numbers the prose quotes, in place
        for expr in prose.role_expressions(raw):
            assert table[expr.removeprefix("N.")] in text, (path.name, expr)
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        # unchanged but a figure's HTML twin, which loads plotly.js itself there (tests/book/test_isolated_figures.py)
        assert [_no_figure_html(c) for c in code] == [_no_figure_html(c) for c in original["cells"]
                                                      if c["cell_type"] == "code"]
        html = site_numbers / (path.stem + ".html")
        if html.exists():  # the same equation numbers as the website (numbered across the book)
            site = [int(n) for n in re.findall(r'<span class="eqno">\((\d+)\)', html.read_text(encoding="utf-8"))]
            assert [int(n) for n in re.findall(r"\\tag\{(\d+)\}", text)] == site, path.name


def _no_figure_html(cell: dict) -> dict:
    cell = json.loads(json.dumps(cell))
    for output in cell["outputs"]:
        if reader.PLOTLY_JSON in output.get("data", {}):
            output["data"].pop("text/html")
    return cell


def test_converter_markup():
    book = reader.Book([], ROOT / "book" / "references.bib")
    book.labels.update({"eq-a": "(7)", "ex-a": "Exercise 3"})
    book.titles["ex-a"] = "Title"
    conv = reader.Converter(book, ROOT / "notebooks" / "01_x.ipynb")
    md = conv.markdown("See {eq}`eq-a` and {cite}`gros2024expressive`.\n\n```{math}\n:label: eq-a\na \\\\ b\n```\n\n"
                       "````{exercise} Title\n:label: ex-a\nDo it.\n```{math}\n:label: eq-a\nx\n```\n````\n\n"
                       "```{solution} ex-a\n:class: dropdown\nDone.\n```")
    assert "See (7) and (Gros, 2024)." in md
    assert "$$\n\\begin{split}a \\\\ b\\end{split} \\tag{7}\n$$" in md
    assert "#### Exercise 3: Title\n\nDo it.\n$$\nx \\tag{7}\n$$" in md
    assert "<details>\n<summary>Solution to Exercise 3 (Title)</summary>\n\nDone.\n\n</details>" in md
    assert conv.references().startswith("## References\n\n- Gros, Claudius (2024).")
    with pytest.raises(ValueError, match="no-such"):
        conv.markdown("{eq}`no-such`")
    with pytest.raises(ValueError, match="figure"):
        conv.markdown("```{figure} x.png\n```")
    assert reader.leftovers({"cells": [{"cell_type": "markdown", "source": ":label: x\n{cite}`a`"}]}) == [
        "cell 0: :label:", "cell 0: {cite}`"]


def test_markdown_outputs_render_their_tables():
    """The chapters' computed tables are Markdown(...) outputs: myst-nb parses them as CommonMark by default, which
    has no tables, and printed every one as a paragraph of pipes. The book parses them as MyST; on a built site no
    page shows a paragraph that starts with a table's pipe."""
    config = (ROOT / "_config.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s+nb_render_markdown_format: myst\s*$", config, re.M)
    site = ROOT / "_build" / "html" / "notebooks"
    if not site.exists():
        pytest.skip("no built site (python scripts/build_book.py)")
    for page in sorted(site.glob("*.html")):
        assert "<p>| " not in page.read_text(encoding="utf-8"), page.name
