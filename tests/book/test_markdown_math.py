"""Markdown that breaks the chapters' math or code boxes (issue 54): a line inside an inline $...$ span that starts
like a list item or a quote (Markdown reads it as one, the math comes out as text), and a code fence nested in a
directive fence of the same length (the inner fence closes the outer one and leaves an empty box behind)."""
import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
BLOCK_START = re.compile(r"\n[ \t]*(?:[-*+>]\s|#|\d+[.)]\s)")  # what makes a Markdown line a list, quote or title
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")


def _markdown(path):
    nb = json.loads(path.read_text())
    return [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]


def _outside_code(text: str) -> str:
    """The Markdown text with code and display math blanked out: fenced code, ```{math} and the like, inline code."""
    keep, stack = [], []  # stack: (fence, raw) of the open fences; raw = code or math, not Markdown
    for line in text.split("\n"):
        m = FENCE.match(line)
        if m:
            fence, rest = m.group(1), m.group(2).strip()
            if stack and fence == stack[-1][0] and not rest:
                stack.pop()
            else:
                raw = not rest.startswith("{") or rest.split("}")[0] in ("{math", "{code", "{code-cell")
                stack.append((fence, raw))
            keep.append("")
        elif any(raw for _, raw in stack):
            keep.append("")
        else:
            keep.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(keep)


def broken_math(text: str) -> list[str]:
    """Inline math spans ($...$, not $$) with a line inside that Markdown would start a block with."""
    body = _outside_code(text).replace("$$", "\0\0")
    spans = re.findall(r"(?<![\\$])\$([^$]+)\$", body)
    return [s for s in spans if BLOCK_START.search(s)]


def nested_fences(text: str) -> list[str]:
    """Directive fences (```{name}) that contain an opening fence of the same length: it closes the directive."""
    bad, stack = [], []
    for line in text.split("\n"):
        m = FENCE.match(line)
        if not m:
            continue
        ticks, rest = m.group(1), m.group(2).strip()
        if stack and ticks == stack[-1] and rest and not rest.startswith(":"):
            bad.append(line.strip())
        if rest:
            stack.append(ticks)
        elif stack and ticks == stack[-1]:
            stack.pop()
    return bad


def test_the_checks_can_fail():
    assert broken_math("a $x = y\n- z$ b") == ["x = y\n- z"]
    assert broken_math("a $x = y -\nz$ b and `$p - q$` in code") == []
    assert nested_fences("```{solution} ex\ntext\n```python\nx = 1\n```\n```") == ["```python"]
    assert nested_fences("````{solution} ex\ntext\n```python\nx = 1\n```\n````") == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_math_span_or_code_box_is_broken_by_markdown(path):
    problems = [(i, s) for i, text in _markdown(path) for s in broken_math(text)]
    problems += [(i, s) for i, text in _markdown(path) for s in nested_fences(text)]
    assert not problems, problems
