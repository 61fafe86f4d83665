"""The website's execution status page, written by scripts/build_book.py into the staged sources.

One row per chapter: its profile, wall time, date and result in this build (QuantEcon's status page is the model),
the machine it ran on, and below it every committed medium/full result under results/ (energylab.engine.committed) with
its machine, date and commit. Without ``--execute`` the chapters show their committed outputs, and the page says so.
"""
from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # book_version, also when a test loads this file by path

PAGE = "book/status"  # docname in the staged sources (added to the staged _toc.yml's back matter)


def chapter_title(path: pathlib.Path) -> str:
    """The notebook's first '# ' heading (its chapter title), or its file name."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return path.stem


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def chapter_table(runs: list[dict], notebooks: list[pathlib.Path]) -> list[str]:
    """Markdown rows: chapter (linked), profile, wall time, date, result; chapters not executed say so."""
    by_name = {r["notebook"]: r for r in runs}
    lines = ["| Chapter | Profile | Wall time | Date (UTC) | Result |", "|---|---|---|---|---|"]
    for nb in notebooks:
        link = f"[{_cell(chapter_title(nb))}](../notebooks/{nb.stem}.ipynb)"
        run = by_name.get(nb.name)
        if run is None:
            lines.append(f"| {link} | committed outputs | not executed in this build | | |")
        else:
            result = "passed" if run["error"] is None else f"failed: {_cell(run['error'])}"
            lines.append(f"| {link} | {run['profile']} | {run['seconds']:.1f} s | {run['date']} | {result} |")
    return lines


def committed_table(root: pathlib.Path) -> list[str]:
    """Markdown rows for every results/<experiment>/<name>.json, newest code first within an experiment."""
    from energylab.engine.committed import load_committed

    files = sorted(root.glob("*/*.json"))
    if not files:
        return ["No medium or full results are committed yet."]
    lines = ["| Experiment | Results | Date (UTC) | Machine | Commit | Wall time | Command |",
             "|---|---|---|---|---|---|---|"]
    for path in files:
        _, prov = load_committed(path.parent.name, path.stem, root=str(root))
        m = prov["machine"]
        where = m.get("accelerator") or f"{m.get('processor', '?')} ({m.get('torch_threads', '?')} thread(s))"
        took = "" if prov.get("seconds") is None else f"{prov['seconds'] / 60:.1f} min"
        commit = (prov.get("commit") or "?")[:10] + (" (+ local changes)" if prov.get("dirty") else "")
        lines.append(f"| {path.parent.name} | `results/{path.parent.name}/{path.name}` | {prov['date'][:16]} | "
                     f"{_cell(where)} | `{commit}` | {took} | `{_cell(prov.get('command', ''))}` |")
    return lines


def render(runs: list[dict], notebooks: list[pathlib.Path], machine: dict | None, results_root: pathlib.Path,
           version: str | None = None) -> str:
    """The status page as MyST markdown; ``version`` is the book's version line (scripts/book_version.py's
    describe() when not given)."""
    if version is None:
        import book_version

        version = book_version.describe()
    if runs:
        m = machine or {}
        where = (f"This build executed every chapter with papermill, at the profile shown, on "
                 f"{m.get('processor', '?')} ({m.get('cores', '?')} cores, one thread per kernel, torch "
                 f"{m.get('torch', '?')}), with the pinned numerics of `energylab.portable`.")
    else:
        where = ("This build did not execute the chapters (`python scripts/build_book.py` without `--execute`): "
                 "the pages show the outputs committed with the notebooks, which the test suite checks are "
                 "reproduced by re-executing them.")
    return "\n".join([
        "# Execution status", "",
        f"**Version.** {version}. How to cite it, and how to get an older version: see "
        "[How to run](how_to_run.md).", "",
        where, "",
        *chapter_table(runs, notebooks), "",
        "## Committed medium and full results", "",
        "Longer runs (the papers' protocols at a small scale, or slices of their full scale) are run once and "
        "committed under `results/` with the machine, date and commit that produced them; the chapters show them "
        "beside their live quick runs, and tests check every claim made about them "
        "(see [How to run](how_to_run.md)).", "",
        *committed_table(results_root), ""])


def add_to_toc(toc: str) -> str:
    """The staged _toc.yml with the status page as the last page of its last part (the back matter)."""
    if f"file: {PAGE}" in toc:
        return toc
    return toc.rstrip("\n") + f"\n      - file: {PAGE}\n"
