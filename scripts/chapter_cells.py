"""Two cells every chapter carries, written from one place: `python scripts/chapter_cells.py [--check]`.

1. **The install cell**, the first code cell: on Colab (or any kernel without the library) it installs energylab and
   the chapters' extras from the repository named in _config.yml, at the tag of the book's version
   (v<energylab.__version__>); elsewhere it does nothing and prints nothing.
2. **The "Run this chapter" box** of a chapter that trains, right after its title cell: each profile of its
   experiments with the time it takes (the experiment's COST) and the command that runs it, so a reader knows what
   the quick run in the page is and how to get the paper's scale.

With --check nothing is written; the exit status is 1 when a chapter is out of date (tests/book/test_notebooks.py runs
the same check). Neither cell has outputs, so writing them needs no re-execution.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # book_version, also when a test loads this file by path
import book_version  # noqa: E402 - torch-free

INSTALL_TAG = "install-energylab"
BOX_TAG = "run-this-chapter"


def trained() -> dict[str, tuple[str, ...]]:
    """chapter file -> the experiments it trains: those whose ``CHAPTER`` names it, in the registry's order."""
    from energylab.experiments import EXPERIMENTS, get_experiment

    out: dict[str, tuple[str, ...]] = {}
    for name in EXPERIMENTS:
        chapter = get_experiment(name).CHAPTER + ".ipynb"
        out[chapter] = out.get(chapter, ()) + (name,)
    return out


def repository_url() -> str:
    """repository.url of _config.yml (scripts/book_version.py)."""
    return book_version.repository_url()


def install_source() -> str:
    """The install cell: the library at this book's own version (the git tag v<energylab.__version__>, which
    scripts/release.py creates), so a chapter runs against the code it was written with, not whatever the main
    branch holds later. The wheel pip builds from it carries the committed results the chapters read (setup.py)."""
    tag = book_version.tag()
    return "\n".join([
        "# On Colab, or in any kernel without the book's library: install it, at this book's",
        f"# version ({tag}), with the chapters' extras, from the book's repository. Elsewhere",
        "# this cell does nothing.",
        "import importlib",
        "import importlib.util",
        "",
        'if importlib.util.find_spec("energylab") is None:',
        "    # IPython puts this variable's value in place of {url} in the line below",
        f'    url = "git+{repository_url()}@{tag}"',
        '    %pip install -q "energylab[book] @ {url}"',
        "    importlib.invalidate_caches()  # the next cells import what pip just installed"])


def box_source(experiments: tuple[str, ...]) -> str:
    """The "Run this chapter" admonition for a chapter that trains ``experiments``."""
    from energylab.experiments import get_experiment

    rows = ["| Experiment | Profile | Time | How to run it |", "|---|---|---|---|"]
    for name in experiments:
        module = get_experiment(name)
        for profile in module.PROFILES:
            cost = " ".join(module.COST[profile].split()).replace("|", "\\|")
            if profile == "quick" and "committed as" in cost:  # too long for the page: run once, read back
                how = (f"run once, committed: `python -m energylab run {name} --profile quick --commit`; "
                       "the page reads it")
            elif profile == "quick":
                how = "this page: `profile = \"quick\"` in the parameters cell (the default)"
            else:
                device = " --device cuda" if "GPU" in cost or profile.startswith("full") else ""
                how = f"`python -m energylab run {name} --profile {profile}{device}`"
            rows.append(f"| `{name}` | {profile} | {cost} | {how} |")
    return "\n".join([
        ":::{admonition} Run this chapter",
        ":class: tip",
        "The page shows the **quick** profile, executed on one CPU thread when the book was built. The other "
        "profiles run the same code at a larger scale (see [How to run](../book/how_to_run.md); medium results "
        "committed under `results/` are shown in the chapter with their machine and date).",
        "",
        *rows,
        ":::"])


def _cell(cell_type: str, source: str, tag: str) -> dict:
    # nbformat 4.5: every cell has an id (a new cell's is its tag, unique in a chapter: one cell carries each tag)
    cell = {"cell_type": cell_type, "id": tag, "metadata": {"tags": [tag]}, "source": source.splitlines(keepends=True)}
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def _tagged(nb: dict, tag: str) -> int | None:
    return next((i for i, c in enumerate(nb["cells"]) if tag in c.get("metadata", {}).get("tags", [])), None)


def update(nb: dict, name: str) -> dict:
    """The notebook with both cells present and current (a new dict; ``nb`` is not modified)."""
    nb = json.loads(json.dumps(nb))
    cells = nb["cells"]
    install = _tagged(nb, INSTALL_TAG)
    if install is None:
        first_code = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
        cells.insert(first_code, _cell("code", install_source(), INSTALL_TAG))
    elif "".join(cells[install]["source"]) != install_source():
        # only the source changes: the cell keeps its id, execution count and (empty) outputs, so nbval and the
        # committed run stay valid without re-executing the chapter
        cells[install]["source"] = install_source().splitlines(keepends=True)
    box = _tagged(nb, BOX_TAG)
    experiments = trained().get(name)
    if experiments:
        wanted = _cell("markdown", box_source(experiments), BOX_TAG)
        if box is None:
            cells.insert(1, wanted)  # right after the title cell
        elif "".join(cells[box]["source"]) != "".join(wanted["source"]):
            if "id" in cells[box]:  # the cell keeps its id (nbformat 4.5: every cell has one; links use it)
                wanted["id"] = cells[box]["id"]
            cells[box] = wanted
    elif box is not None:
        del cells[box]
    return nb


def chapters() -> list[pathlib.Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a chapter is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path in chapters():
        nb = json.loads(path.read_text(encoding="utf-8"))
        new = update(nb, path.name)
        if new != nb:
            stale.append(path.name)
            if not args.check:
                path.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    verb = "out of date" if args.check else "updated"
    print(f"chapter_cells: {len(stale)} chapter(s) {verb}{': ' + ', '.join(stale) if stale else ''}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
