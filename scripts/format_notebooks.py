"""Keep the chapters' code within 88 columns: `python scripts/format_notebooks.py [--check] [NOTEBOOK ...]`.

A reader's JupyterLab does not wrap code, and the website shows 88 columns at a laptop's width, so a longer line
is either cut off or broken by the page. This formats every code cell with ``ruff format --line-length 88`` after two
passes ruff does not do: a trailing comment that pushes its line past the limit moves onto its own line above it
(wrapped when it is itself too long), instead of ruff splitting the statement around it; and a string literal alone
on a line past the limit is split at spaces into adjacent literals (Python joins them into the same string).

Only the code cells' sources change, never an output, so a formatted chapter needs no re-execution (nbval still
compares every output). The notebook is written back in the book's own JSON layout (ruff's own notebook writer
re-prints the numbers inside outputs). Cells with IPython magics are left as they are (the install cell, written by
scripts/chapter_cells.py). With --check nothing is written and the exit status is 1 if a chapter would change; a
line ruff cannot shorten (a long string) is listed in every mode: tests/book/test_code_width.py fails on it.
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]
WIDTH = 88
# code in a markdown cell sits in a solution's dropdown or an admonition, narrower than a code cell: lines of 82
# columns wrapped there at 1366 px (scripts/smoke_site.py counts wrapped code), 80 fit
MARKDOWN_WIDTH = 80


def _ruff() -> str:
    found = shutil.which("ruff") or str(pathlib.Path(sys.executable).with_name("ruff"))
    return found


MAGIC = re.compile(r"^\s*(%{1,2}|!)[A-Za-z_]")  # %pip, %%time, !ls; not a line that continues "x % (y)"


def has_magic(source: str) -> bool:
    return any(MAGIC.match(line) for line in source.splitlines())


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


# a line holding one string literal: indentation, an optional keyword, the literal, closing commas or brackets
STRING_LINE = re.compile(r"""^(?P<head>\s*(?:\w+=)?)(?P<prefix>[fr]?)(?P<quote>["'])(?P<body>.*)(?P=quote)"""
                         r"""(?P<tail>[,)]*)$""")


def _split_points(body: str) -> list[int]:
    """Indices just after a space of ``body`` that lies outside every {replacement field} and after no backslash."""
    points, depth = [], 0
    for i, ch in enumerate(body):
        if ch in "{}" and body[i + 1: i + 2] == ch and depth == 0:
            continue  # {{ or }} is a literal brace
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == " " and depth == 0 and i + 1 < len(body) and body[i - 1: i] != "\\":
            points.append(i + 1)
    return points


def split_strings(source: str) -> str:
    """A string literal alone on a line past the limit, split at spaces into adjacent literals of the same kind (the
    same string: Python joins them); kept only where the cell still parses to the same tree."""
    lines, changed = source.split("\n"), False
    out: list[str] = []
    for line in lines:
        match = STRING_LINE.match(line) if len(line) > WIDTH else None
        if match is None or "\\" in match["body"] or match["quote"] in match["body"]:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))
        head, prefix, quote, body = match["head"], match["prefix"], match["quote"], match["body"]
        pieces, start, first = [], 0, True
        while len(indent) + len(prefix) + len(body) - start + 2 + len(match["tail"]) + (len(head) - len(indent)
                                                                                        if first else 0) > WIDTH:
            room = WIDTH - len(indent) - len(prefix) - 2 - ((len(head) - len(indent)) if first else 0)
            fits = [p for p in _split_points(body) if start < p <= start + room]
            if not fits:
                break
            pieces.append(body[start:fits[-1]])
            start, first = fits[-1], False
        if not pieces:
            out.append(line)
            continue
        pieces.append(body[start:])
        for k, piece in enumerate(pieces):
            lead = head if k == 0 else indent
            end = match["tail"] if k == len(pieces) - 1 else ""
            kind = prefix if "{" in piece or "}" in piece or prefix != "f" else ""
            out.append(f"{lead}{kind}{quote}{piece}{quote}{end}")
        changed = True
    if not changed:
        return source
    new = "\n".join(out)
    try:
        same = ast.dump(ast.parse(new)) == ast.dump(ast.parse(source))
    except SyntaxError:
        same = False
    return new if same else source


def format_source(source: str) -> str:
    if has_magic(source) or not source.strip():
        return source
    lifted = split_strings(lift_comments(source))
    done = subprocess.run([_ruff(), "format", "--line-length", str(WIDTH), "--no-cache", "--stdin-filename",
                           "cell.py", "-"], input=lifted, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ruff format failed on a cell:\n{source}\n{done.stderr}")
    return done.stdout.rstrip("\n")


FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\S*)")
CODE_FENCES = ("python", "py", "ipython", "ipython3", "{code-block}")


def markdown_code_lines(text: str) -> list[str]:
    """The lines of code a Markdown text shows, as the page shows them: those of ```python fences and of indented
    (4-space) blocks, such as the worked solutions' code (ruff does not format them: they are kept by hand)."""
    out, lines, i, fence, after_blank = [], text.split("\n"), 0, None, True
    while i < len(lines):
        line = lines[i]
        opened = FENCE.match(line.strip())
        if fence is None and opened and opened.group(2) in CODE_FENCES:
            fence = opened.group(1)
        elif fence is not None:
            if line.strip() == fence:
                fence = None
            else:
                out.append(line)
        elif line.startswith("    ") and line.strip() and after_blank:
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                if lines[i].strip():
                    out.append(lines[i][4:])
                i += 1
            after_blank = False
            continue
        else:
            after_blank = not line.strip() or bool(FENCE.match(line.strip())) or line.startswith(":")
        i += 1
    return out


def long_lines(nb: dict) -> list[tuple[int, str]]:
    """(cell index, line) for every line of code over its limit: :data:`WIDTH` in code cells (magic cells aside),
    :data:`MARKDOWN_WIDTH` in the code blocks of markdown cells."""
    found = []
    for index, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and not has_magic(source):
            found += [(index, line) for line in source.split("\n") if len(line) > WIDTH]
        elif cell["cell_type"] == "markdown":
            found += [(index, line) for line in markdown_code_lines(source) if len(line) > MARKDOWN_WIDTH]
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
