"""Structural checks on the chapters: nbval passes un-executed cells silently, so these make sure it has
something to compare, and that every chapter is parameterised for papermill and listed in the book."""
import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TOC = (ROOT / "_toc.yml").read_text()


def code_cells(nb_path):
    cells = json.loads(nb_path.read_text())["cells"]
    return [c for c in cells if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 1


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_committed_executed(nb):
    cells = code_cells(nb)
    unrun = [i for i, c in enumerate(cells) if c.get("execution_count") is None]
    assert not unrun, f"{nb.name}: code cells {unrun} were committed without being executed"
    counts = [c["execution_count"] for c in cells]
    assert counts == sorted(counts), f"{nb.name}: cells were executed out of order: {counts}"
    errors = [i for i, c in enumerate(cells) for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{nb.name}: cells {errors} stored an error"
    with_output = sum(bool(c.get("outputs")) for c in cells)
    assert with_output >= len(cells) // 2, f"{nb.name}: only {with_output}/{len(cells)} code cells have output"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_parameters_cell(nb):
    tagged = [c for c in code_cells(nb) if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{nb.name}: expected one cell tagged 'parameters', found {len(tagged)}"
    src = "".join(tagged[0]["source"])
    for name, default in [("profile", '"quick"'), ("seed", "0"), ("device", '"auto"')]:
        assert re.search(rf"^{name}\s*=\s*{re.escape(default)}", src, re.M), f"{nb.name}: {name} = {default} missing"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_in_toc(nb):
    assert f"notebooks/{nb.stem}" in TOC, f"{nb.name} is not listed in _toc.yml"


def test_toc_entries_exist():
    for entry in re.findall(r"file:\s*(\S+)", TOC):
        candidates = [ROOT / f"{entry}{ext}" for ext in (".md", ".ipynb")]
        assert any(p.exists() for p in candidates), f"_toc.yml lists {entry}, which does not exist"


def test_file_number_is_chapter_number_is_toc_order():
    # 04_x.ipynb is chapter 4, its title starts "# 4.", and the table of contents lists chapters in file order
    listed = re.findall(r"file:\s*notebooks/(\d\d)_\S+", TOC)
    assert listed == sorted(listed), f"_toc.yml lists chapters out of order: {listed}"
    for nb in NOTEBOOKS:
        number = int(nb.name[:2])
        title = json.loads(nb.read_text())["cells"][0]["source"][0]
        assert title.startswith(f"# {number}. "), f"{nb.name}: the title must start with '# {number}. ', got {title!r}"
        cells = json.loads(nb.read_text())["cells"]
        markdown = "".join("".join(c["source"]) + "\n" for c in cells if c["cell_type"] == "markdown")
        sections = re.findall(r"^##+ (\d+)\.\d", markdown, re.M)  # "## 5.2 ..." belongs to chapter 5
        assert all(int(s) == number for s in sections), f"{nb.name}: section numbers {sorted(set(sections))}"


def test_no_python_domain_roles_in_markdown():
    """The site has no API pages (no autodoc), so {func}`...`-style roles are broken references under -n."""
    role = re.compile(r"\{(?:py:)?(?:func|class|meth|mod|attr|obj)\}`")
    for path in sorted(pathlib.Path(__file__).resolve().parents[2].glob("notebooks/[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        bad = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and role.search("".join(c["source"]))]
        assert not bad, f"{path.name}: markdown cells {bad} use a Python-domain role; write `name` instead"
