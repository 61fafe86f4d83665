"""Keep the chapters' code within 88 columns: `python scripts/format_notebooks.py [--check] [NOTEBOOK ...]`.

A reader's JupyterLab does not wrap code, and the website shows 88 columns at a laptop's width, so a longer line
is either cut off or broken by the page. This formats every code cell with ``ruff format --line-length 88`` after one
pre-pass ruff does not do: a trailing comment that pushes its line past the limit moves onto its own line above it
(wrapped when it is itself too long), instead of ruff splitting the statement around it.

Only the code cells' sources change, never an output, so a formatted chapter needs no re-execution (nbval still
compares every output). The notebook is written back in the book's own JSON layout (ruff's own notebook writer
re-prints the numbers inside outputs). Cells with IPython magics are left as they are (the install cell, written by
scripts/chapter_cells.py). With --check nothing is written and the exit status is 1 if a chapter would change; a
line ruff cannot shorten (a long string) is listed in every mode: tests/book/test_code_width.py fails on it.
"""
from __future__ import annotations

import argparse
import io
import json
import pathlib
import shutil
import subprocess
import sys
import textwrap
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]
WIDTH = 88


def _ruff() -> str:
    found = shutil.which("ruff") or str(pathlib.Path(sys.executable).with_name("ruff"))
    return found


def has_magic(source: str) -> bool:
    return any(line.lstrip().startswith(("%", "!")) for line in source.splitlines())


def _wrap_comment(indent: str, comment: str) -> list[str]:
    text = comment.lstrip("#").strip()
    return textwrap.wrap(text, WIDTH - len(indent) - 2, break_long_words=False, break_on_hyphens=False,
                         initial_indent=indent + "# ", subsequent_indent=indent + "# ") or [indent + "#"]


def lift_comments(source: str) -> str:
    """Trailing comments of lines over the limit on their own line(s) above; long comment lines wrapped."""
    lines = source.split("\n")
    moves: dict[int, tuple[int, str]] = {}  # line index -> (column of the comment, its text)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                moves[row - 1] = (col, tok.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return source
    out: list[str] = []
    for i, line in enumerate(lines):
        if i in moves and len(line) > WIDTH:
            col, comment = moves[i]
            code = line[:col].rstrip()
            indent = line[: len(line) - len(line.lstrip())]
            if code.strip():  # a trailing comment: above its line
                out.extend(_wrap_comment(indent, comment))
                out.append(code)
            else:  # a comment line of its own: wrapped
                out.extend(_wrap_comment(indent, comment))
        else:
            out.append(line)
    return "\n".join(out)


def format_source(source: str) -> str:
    if has_magic(source) or not source.strip():
        return source
    lifted = lift_comments(source)
    done = subprocess.run([_ruff(), "format", "--line-length", str(WIDTH), "--no-cache", "--stdin-filename",
                           "cell.py", "-"], input=lifted, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ruff format failed on a cell:\n{source}\n{done.stderr}")
    return done.stdout.rstrip("\n")


def long_lines(nb: dict) -> list[tuple[int, str]]:
    """(cell index, line) for every code line over the limit, magic cells (the install cell's URL) aside."""
    found = []
    for index, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and not has_magic(source):
            found += [(index, line) for line in source.split("\n") if len(line) > WIDTH]
    return found


def format_notebook(nb: dict) -> dict:
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            new = format_source(source)
            if new != source:
                cell["source"] = new.splitlines(keepends=True)
    return nb


def dump(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a chapter would change")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    changed = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        new = dump(format_notebook(json.loads(text)))
        if new != text:
            changed.append(path.name)
            if not args.check:
                path.write_text(new, encoding="utf-8")
        for index, line in long_lines(json.loads(new)):
            print(f"{path.name}: cell {index}: {len(line)} columns: {line.strip()[:70]}…")
    verb = "would change" if args.check else "changed"
    print(f"format_notebooks: {len(changed)} chapter(s) {verb}" + (f": {', '.join(changed)}" if changed else ""))
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
