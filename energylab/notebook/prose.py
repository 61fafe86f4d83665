"""Numbers the prose quotes, computed where the chapter computes them.

A chapter keeps one :class:`Numbers` (``N = prose.Numbers()``), adds each number its text states where the code
produces it (``N.add("board_T", acc, ".3f")``), and writes ``{eval}`N.board_T``` in the markdown. The same
text then appears in three places:

* JupyterLab with jupyterlab-myst evaluates the role in the reader's kernel when the cell renders (a fresh run shows
  fresh numbers) and stores the result in the cell's ``metadata.user_expressions``;
* ``scripts/execute_notebooks.py`` stores the same metadata when it executes a chapter, so a notebook opened
  without a kernel, the website and the PDF (``book/_ext/prose_numbers.py``) show the committed values;
* the chapter's last cell prints ``N``: every quoted number with its value, an output that nbval compares on
  every CI run (a rerun that changes a quoted number fails there), and ``tests/book/test_prose_numbers.py``
  checks the stored markdown values against it.

A name is set once: adding it again with another text is an error, so evaluating every role at the end of the
chapter gives what the reader saw at the role's place.
"""
from __future__ import annotations

import math
import numbers
import re

__all__ = ["Shown", "Numbers", "format_number", "ROLE", "TAG", "HEADER", "role_expressions", "table_of", "fill"]

ROLE = re.compile(r"(?<!`)\{eval\}`([^`]*)`")  # an inline expression of MyST (jupyterlab-myst, myst-nb)
TAG = "prose-numbers"  # the tag of the chapter's last cell, which prints its Numbers
HEADER = "the text quotes"  # first line of a Numbers table


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class Shown(str):
    """A number as the prose shows it: a string whose ``repr`` is the string itself (the kernel's ``text/plain``
    of an expression is its repr; a plain ``str`` would arrive in quotes)."""

    def __repr__(self) -> str:
        return str(self)


def format_number(value, spec: str = "") -> str:
    """``value`` formatted by ``spec``: a format spec (``".3f"``, ``",d"``, ``".1%"``), or one of

    * ``"pct"`` / ``"pct1"``: a fraction as a percentage with 0 / 1 decimals, sign ``%`` included (0.293 -> 29%);
    * ``"min"``: seconds as minutes with one decimal (1416 -> 23.6);
    * ``"int"``: rounded to an integer with thousands separators (8992.0 -> 8,992);
    * ``"sci"``: scientific with one decimal, as typeset (5.4e-05 -> 5.4·10⁻⁵; 1e-10 -> 10⁻¹⁰).

    Strings pass through unchanged (a verdict word the code computed); booleans are refused (say what they mean).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"a prose number must be a real number or a string, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"a prose number must be finite, got {value}")
    if spec in ("pct", "pct1"):
        return f"{100 * value:.{1 if spec == 'pct1' else 0}f}%"
    if spec == "min":
        return f"{value / 60:.1f}"
    if spec == "int":
        return f"{round(value):,d}"
    if spec == "sci":
        mantissa, exponent = f"{value:.1e}".split("e")
        power = "10" + str(int(exponent)).translate(_SUPERSCRIPT)
        return power if mantissa in ("1.0", "-1.0") and mantissa[0] != "-" else f"{mantissa}·{power}"
    return format(value, spec)


class Numbers:
    """The numbers one chapter's prose quotes: ``N.add(name, value, spec)``, then ``N.<name>`` is the text."""

    def __init__(self):
        object.__setattr__(self, "_texts", {})
        object.__setattr__(self, "_values", {})

    def add(self, name: str, value, spec: str = "") -> None:
        """Record ``value`` under ``name``, formatted by :func:`format_number` (``N.<name>`` is then the text).
        ValueError if ``name`` already holds another text. Returns None, so that a cell ending in ``N.add`` shows
        nothing."""
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise ValueError(f"name must be a Python identifier not starting with '_', got {name!r}")
        text = Shown(format_number(value, spec))
        if name in self._texts and self._texts[name] != text:
            raise ValueError(f"{name} is already {self._texts[name]!r}; a quoted number is set once (got {text!r})")
        self._texts[name] = text
        self._values[name] = value

    def value(self, name: str):
        """The unformatted value behind ``name``."""
        return self._values[name]

    def names(self) -> list[str]:
        return list(self._texts)

    def __getattr__(self, name: str) -> Shown:
        try:
            return self._texts[name]
        except KeyError:
            raise AttributeError(f"no quoted number {name!r}; add it with N.add({name!r}, value, spec)") from None

    def __setattr__(self, name, value):
        raise AttributeError("use N.add(name, value, spec): a quoted number is formatted once, where it is computed")

    def __len__(self) -> int:
        return len(self._texts)

    def __repr__(self) -> str:
        if not self._texts:
            return "Numbers()"
        width = max(len(k) for k in self._texts)
        lines = [f"{HEADER:<{width}}  as"] + [f"{k:<{width}}  {v}" for k, v in self._texts.items()]
        return "\n".join(lines)


# ------------------------------------------------------------------------------ stored values in the notebook


def role_expressions(markdown: str) -> list[str]:
    """The expressions of the ``{eval}`...``` roles in ``markdown``, in order."""
    return [m.strip() for m in ROLE.findall(markdown)]


def _text(source) -> str:
    return source if isinstance(source, str) else "".join(source)


def table_of(nb) -> dict[str, str] | None:
    """{name: text} printed by the cell tagged :data:`TAG` of a notebook (an nbformat node or its JSON dict), or
    None if it has no such cell or the cell has no Numbers table in its outputs."""
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or TAG not in cell.get("metadata", {}).get("tags", []):
            continue
        for out in cell.get("outputs", []):
            text = _text(out.get("data", {}).get("text/plain", "")) or _text(out.get("text", ""))
            lines = text.splitlines()
            if lines and lines[0].startswith(HEADER):
                rows = [re.match(r"(\w+) {2,}(.*)$", line) for line in lines[1:]]
                if not all(rows):
                    raise ValueError(f"cannot read the Numbers table of the {TAG!r} cell: {text!r}")
                return {m.group(1): m.group(2) for m in rows}
    return None


def fill(nb) -> int:
    """Store in every markdown cell's ``metadata.user_expressions`` (jupyterlab-myst's format) the value of each of
    its ``{eval}`N.<name>``` roles, read from the chapter's Numbers table (:func:`table_of`); cells without roles
    lose stale entries. Returns the number of roles filled. ValueError for an expression that is not ``N.<name>``
    or a name the table does not hold (the chapter must compute it)."""
    table = table_of(nb)
    filled = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        expressions = role_expressions(_text(cell["source"]))
        meta = cell.setdefault("metadata", {})
        if not expressions:
            meta.pop("user_expressions", None)
            continue
        if table is None:
            raise ValueError(f"the notebook has {{eval}} roles but no executed cell tagged {TAG!r} printing N")
        stored = []
        for expr in dict.fromkeys(expressions):
            m = re.fullmatch(r"N\.(\w+)", expr)
            if m is None:
                raise ValueError(f"{{eval}}`{expr}`: quote a computed number as N.<name> "
                                 "(energylab.notebook.prose.Numbers)")
            if m.group(1) not in table:
                raise ValueError(f"{{eval}}`{expr}`: the chapter never adds {m.group(1)!r} to N")
            stored.append({"expression": expr, "result": {"status": "ok", "data": {"text/plain": table[m.group(1)]},
                                                          "metadata": {}}})
        meta["user_expressions"] = stored
        filled += len(expressions)
    return filled
