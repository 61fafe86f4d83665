"""Sphinx extension: code and outputs that wrap with a visible continuation (book/assets/css/reading.css).

Every ``<div class="highlight"><pre>`` of a page (cell inputs, outputs, code blocks) gets each of its lines wrapped
in ``<span class="el-line">``, so the stylesheet can wrap a long line with a hanging indent and draw a continuation
mark beside each wrapped piece (under the line's own indentation), on the website and in the PDF printed from it.
The newline stays between the spans, so copying the code gives it back unchanged. Pygments closes its token spans
at each line end; a block whose line does not (its tags do not balance) is left as it was, and still wraps,
without the marks.
"""
from __future__ import annotations

import re

PRE = re.compile(r'(<div class="highlight"><pre>)(.*?)(</pre>)', re.DOTALL)
TAG = re.compile(r"<(/?)span\b[^>]*>")


def _balanced(line: str) -> bool:
    depth = 0
    for match in TAG.finditer(line):
        depth += -1 if match.group(1) else 1
        if depth < 0:
            return False
    return depth == 0


def _line(line: str) -> str:
    """One line in its span; an indented line's wrapped pieces hang under its own indentation (--ind, in ch)."""
    text = TAG.sub("", line)
    indent = min(len(text) - len(text.lstrip(" ")), 40)
    style = f' style="--ind:{indent}"' if indent and text.strip() else ""
    return f'<span class="el-line"{style}>{line}</span>'


def wrap_lines(html: str) -> str:
    """``html`` with each line of every highlighted ``<pre>`` in a ``span.el-line`` (idempotent)."""
    def one(match: re.Match) -> str:
        body = match.group(2)
        if 'class="el-line"' in body:
            return match.group(0)
        lead = ""
        if body.startswith("<span></span>"):  # Pygments' empty first span
            lead, body = "<span></span>", body[len("<span></span>"):]
        trailing = body.endswith("\n")
        lines = body[:-1].split("\n") if trailing else body.split("\n")
        if not all(_balanced(line) for line in lines):
            return match.group(0)
        wrapped = "\n".join(_line(line) for line in lines) + ("\n" if trailing else "")
        return match.group(1) + lead + wrapped + match.group(3)

    return PRE.sub(one, html)


def _on_page(app, pagename, templatename, context, doctree):
    if "body" in context and context["body"]:
        context["body"] = wrap_lines(context["body"])


def setup(app):
    app.connect("html-page-context", _on_page)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
