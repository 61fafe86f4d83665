"""Give every notebook cell an id (nbformat 4.5), in place: `python scripts/add_cell_ids.py [NOTEBOOK ...]`.

Without arguments it treats every chapter (notebooks/NN_*.ipynb). Cells that have an id keep it; a cell without one
gets 8 hex digits of the SHA-256 of (notebook file name, cell position, cell source), lengthened on a clash, so a
rerun gives the same ids (and changes nothing the second time). Nothing else changes: sources, outputs and
metadata are written back as nbformat writes them (sorted keys, one-space indent, a final newline), and the file
is rewritten only when a cell got an id or the format minor version was raised to 5.
Prints one line per notebook changed; exit status 0.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
VALID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")  # nbformat 4.5's schema for a cell id


def _new_id(name: str, index: int, source: str, taken: set[str]) -> str:
    digest = hashlib.sha256(f"{name}\n{index}\n{source}".encode()).hexdigest()
    for length in range(8, len(digest) + 1):
        if digest[:length] not in taken:
            return digest[:length]
    raise RuntimeError(f"{name}: no free id for cell {index}")  # 64 hex digits all taken: cannot happen


def add_ids(nb: dict, name: str) -> int:
    """Give the cells of the notebook ``nb`` (its JSON) that lack a valid id one; the number of cells changed."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError(f"nb must be a notebook's JSON object with a 'cells' list, got {type(nb).__name__}")
    taken = {c["id"] for c in nb["cells"] if isinstance(c.get("id"), str) and VALID.match(c["id"])}
    seen: set[str] = set()
    changed = 0
    for index, cell in enumerate(nb["cells"]):
        cell_id = cell.get("id")
        if isinstance(cell_id, str) and VALID.match(cell_id) and cell_id not in seen:
            seen.add(cell_id)
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        cell["id"] = _new_id(name, index, source, taken)
        taken.add(cell["id"])
        seen.add(cell["id"])
        changed += 1
    if nb.get("nbformat") == 4 and nb.get("nbformat_minor", 0) < 5:
        nb["nbformat_minor"] = 5
        changed = changed or 1
    return changed


def dumps(nb: dict) -> str:
    """The notebook as nbformat.write lays it out."""
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def process(path: pathlib.Path) -> int:
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = add_ids(nb, path.name)
    if changed:
        path.write_text(dumps(nb), encoding="utf-8")
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        changed = process(path)
        if changed:
            print(f"{path}: {changed} change(s) (cell ids added, format 4.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
