"""Sphinx extension: the book's ``{eval}`` role reads the value stored in the notebook, so the website and the PDF show
the numbers the last execution computed, without a kernel.

A chapter writes a number of its runs into the prose as ``{eval}`N.board_T``` (``N`` an
:class:`energylab.notebook.prose.Numbers` filled by the chapter's code). ``scripts/execute_notebooks.py`` evaluates
every such expression after the chapter ran and stores the result in the markdown cell's
``metadata.user_expressions``, in the format jupyterlab-myst writes when a reader renders the cell in JupyterLab
(where it shows the same value, or a fresh one from the reader's kernel). myst-nb's own ``eval`` role needs a kernel
during the build (execution mode "inline"); the book is built from its committed outputs, so this role replaces it. A
missing value is a build error naming the expression: the notebook was edited and not re-executed.
"""
from __future__ import annotations

import ast
import json
import pathlib

from docutils import nodes

STORE = "user_expressions"


def stored_values(path: str) -> dict[str, str]:
    """{expression: text} over every markdown cell of the notebook at ``path`` (its stored ``text/plain``; a quoted
    Python string is shown without its quotes)."""
    nb = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    out = {}
    for cell in nb.get("cells", []):
        for item in cell.get("metadata", {}).get(STORE, []):
            data = item.get("result", {}).get("data", {})
            text = data.get("text/plain")
            if text is None:
                continue
            if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
                text = ast.literal_eval(text)
            out[item["expression"]] = text
    return out


def eval_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    document = inliner.document
    source = document.get("source", "")
    cache = document.settings.env.temp_data.setdefault("prose_numbers", {})
    if source not in cache:
        cache[source] = stored_values(source) if source.endswith(".ipynb") else {}
    value = cache[source].get(text.strip())
    if value is None:
        msg = inliner.reporter.error(f"{{eval}}`{text}`: no stored value in {source} (re-execute the notebook with "
                                     f"scripts/execute_notebooks.py)", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    return [nodes.inline(rawtext, value, classes=["prose-number"])], []


def _register(app):
    app.add_role("eval", eval_role, override=True)  # after myst-nb's setup registered its kernel-bound one


def setup(app):
    app.connect("builder-inited", _register)
    _register(app)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
