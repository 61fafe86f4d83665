"""The prose check: a number typed into a chapter's text must be computed, cited, or one of a short list of kinds
that need neither (tests/book/test_prose_numbers.py runs it on every chapter and the landing page).

Computed: an ``{eval}`N.<name>``` role (:mod:`energylab.notebook.prose`). Cited: the sentence holding the number cites
its source (a ``{cite}`` role, or names the paper: "paper 003", "the paper's", "Table 2", "Fig. 3b", "Sec. 4.3").
Neither is needed for what this module strips or skips, the documented list:

* mathematics and code: ``$$...$$``, math and code blocks, inline code, indented code (solutions), and inline
  ``$...$`` except the decimals in it (a measured number typed as math is still a typed number);
* the numbering of the book and of papers: headings, "section 8.5", "§9.11", "chapter 8", "Eq. (3)",
  "Theorem 1", "Lemma 2", "exercise 3", "issue 51", "paper 003" and labels, links and MyST role targets;
* years (1900–2099), software versions ("Python 3.11", "torch 2.11", "CUDA 13"), and words that hold digits
  (float64, H100, MHA2nd1st, 2nd);
* sizes that define a setup: board and box sizes written ``4×4``, and integers from 0 to 12 (counts of seeds,
  heads, layers, steps of a derivation: small enough to be read at a glance and part of how the setup is named).

Everything else (a decimal, a percentage, a time, an integer above 12) is reported with its sentence.

Not checked here: the generated "Run this chapter" box (cells tagged :data:`GENERATED`), written by
scripts/chapter_cells.py from each experiment's ``COST``, the experiment's own statement of its scale and time (one
home per experiment; deriving its times from the committed runs' provenance is still to do).
"""
from __future__ import annotations

import re

__all__ = ["strip_markup", "sentences", "typed_numbers", "prose_cells", "NUMBER", "GENERATED"]

GENERATED = "run-this-chapter"  # the tag of the run box that scripts/chapter_cells.py writes

NUMBER = re.compile(r"(?<![\w.,−-])[−-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][−-]?\d+)?%?(?![\w])")
CITED = re.compile(r"\{cite(?::\w+)?\}|\bpapers? 00\d|paper's|\bTables? \d|\bTab\. \d|\bFig(?:ure|\.)? \d|\bSec\. \d|"
                   r"\bAppendix\b|\bapp\. [A-Z]|\bauthors'|\bthe authors\b")
NUMBERING = re.compile(
    r"(?:§|\bsections?|\bchapters?|\bEqs?\.|\bequations?|\bTheorem|\bLemma|\bProposition|\bCorollary|"
    r"\bDefinition|\bexercises?|\bissues?|\bpapers?|\bitems?|\bsteps? \(|\bAssumption|\bRemark)"
    r"\s*\(?\s*$", re.IGNORECASE)
VERSION = re.compile(r"(?:\bPython|\btorch|\bCUDA|\bversion|\bv)\s*$", re.IGNORECASE)
SMALL = 12


def strip_markup(markdown: str) -> str:
    """``markdown`` without what the check skips (math, code, roles' targets, links, directive options, headings,
    HTML); the text that remains is what a reader reads as prose."""
    # fenced blocks: a fence closes only on a line holding the same fence, so a ````{solution} block with a ```python
    # block inside is skipped whole (matching the first ``` would leave the inner code as prose)
    text = re.sub(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", " ", markdown, flags=re.S | re.M)
    text = re.sub(r"```.*?```|~~~.*?~~~", " ", text, flags=re.S)
    text = re.sub(r"^(?: {4}|\t).*$", " ", text, flags=re.M)  # indented code (in exercise solutions)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    # inline math: formulas are skipped, but a decimal in one is a measured number typed as math ($5.4\cdot10^{-5}$)
    text = re.sub(r"(?<!\\)\$([^$]*?)(?<!\\)\$", lambda m: " " + " ".join(re.findall(r"\d+\.\d+", m.group(1))) + " ",
                  text, flags=re.S)
    text = re.sub(r"(?<!`)\{eval\}`[^`]*`", " COMPUTED ", text)
    text = re.sub(r"(\{cite(?::\w+)?\})`[^`]*`", r"\1", text)  # keep the citation mark, drop its keys
    text = re.sub(r"\{[\w:-]+\}`[^`]*`", " ", text)  # other roles: ref, numref, eq, doc, ...
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    text = re.sub(r"<[^>]+>", " ", text)  # HTML tags
    text = re.sub(r"^\s*:[\w-]+:.*$", " ", text, flags=re.M)  # directive options (:label:, :class:)
    text = re.sub(r"^#+ .*$", " ", text, flags=re.M)  # headings carry section numbers
    text = re.sub(r"\(\w+-[\w-]+\)=", " ", text)  # MyST targets (label)=
    return text


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?:;])\s+(?=[A-Z(*_])|\n\s*\n|\n\s*[-*|] ?", text) if s.strip()]


def _allowed(token: str, before: str, after: str) -> bool:
    bare = token.rstrip("%").lstrip("−-").replace(",", "")
    if "%" not in token and re.fullmatch(r"\d+", bare):
        value = int(bare)
        if value <= SMALL or (1900 <= value <= 2099 and "," not in token):
            return True
    if re.search(r"[×x]\s*$", before) or re.match(r"\s*[×x]\s*\d", after):  # 4×4, 2 x 3 boxes
        return True
    return bool(NUMBERING.search(before) or VERSION.search(before))


def typed_numbers(markdown: str) -> list[tuple[str, str]]:
    """(number, sentence) for every number in ``markdown`` that is neither computed nor cited nor of a kind listed
    in the module docstring."""
    found = []
    for sentence in sentences(strip_markup(markdown)):
        if CITED.search(sentence):
            continue
        for m in NUMBER.finditer(sentence):
            if not _allowed(m.group(), sentence[max(0, m.start() - 16):m.start()], sentence[m.end():m.end() + 4]):
                found.append((m.group(), " ".join(sentence.split())))
    return found


def prose_cells(nb) -> list[str]:
    """The markdown of a notebook (its JSON dict) that the check reads: every markdown cell but the generated ones."""
    return ["".join(c["source"]) for c in nb["cells"]
            if c["cell_type"] == "markdown" and GENERATED not in c.get("metadata", {}).get("tags", [])]
