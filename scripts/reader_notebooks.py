"""Reader notebooks for Colab and plain Jupyter: the chapters with their MyST markup turned into plain markdown.

    python scripts/reader_notebooks.py [--out DIR]      # default: _build/reader/

JupyterLab renders the chapters' MyST with jupyterlab-myst (requirements.txt); Colab and a plain Jupyter cannot. This
writes a copy of every chapter in which
- ``{math}`` directives become ``$$ ... \\tag{n} $$`` (numbered across the book, as on the website) and ``{eq}`` roles
  their ``(n)``;
- exercises become headings (``#### Exercise n: title``), each solution a collapsed ``<details>`` block;
- theorems, lemmas, propositions and proofs become bold-titled paragraphs, admonitions block quotes;
- ``{cite}`` roles become author–year citations, with the chapter's references listed at its end;
- ``{prf:ref}``, ``{ref}`` and ``{doc}`` roles and relative links become plain text or links to the repository;
- ``{eval}`N.<name>``` roles (numbers the prose quotes, :mod:`energylab.notebook.prose`) become the value the
chapter's last
  run printed.
Code cells are copied unchanged, and so are their outputs but one part: a stored plotly figure's HTML twin (which
draws with the website's plotly.js) becomes a document that loads plotly.js itself (energylab.viz.isolated_html), so
that Colab, which shows each output alone in its own frame, draws the figures before the chapter is run; the plotly
JSON that JupyterLab draws is kept. scripts/build_book.py builds these into the website (its download and Colab
buttons use them); scripts/release.py commits them to the notebooks branch of a version. Exit status 0; it raises
on markup it does not know, so nothing is left raw.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # book_version, also when a test loads this file by path
import book_version  # noqa: E402 - torch-free

from energylab.notebook import prose  # noqa: E402 - torch-free
from energylab.viz import isolated_html  # noqa: E402 - plotly, no torch

OUT = ROOT / "_build" / "reader"
FENCE = re.compile(r"^(\s*)(`{3,}|:{3,})\{([\w:-]+)\}[ \t]*(.*)$")
PRF_KINDS = {"prf:theorem": "Theorem", "prf:lemma": "Lemma", "prf:proposition": "Proposition",
             "prf:definition": "Definition", "prf:corollary": "Corollary", "prf:proof": "Proof"}
# what may not survive the conversion: roles, directives, directive options, targets
LEFTOVER = re.compile(r"(?<!`)\{[\w:-]+\}`|^\s*(`{3,}|:{3,})\{[\w:-]+\}|^\s*:(label|class|nonumber):"
                      r"|^\([\w-]+\)=\s*$", re.M)


def repository_url() -> str:
    """Where a reader notebook's links into the repository point: its files at this version's tag (the reader
    notebooks are published with it, scripts/release.py)."""
    return f"{book_version.repository_url()}/blob/{book_version.tag()}"


def _blocks(text: str) -> list:
    """Split markdown into plain strings and directive dicts {name, arg, options, body} (nested fences handled)."""
    lines = text.split("\n")
    out, plain, i = [], [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            plain.append(lines[i])
            i += 1
            continue
        indent, fence, name, arg = m.groups()
        j = i + 1
        close = re.compile(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        body = []
        while j < len(lines) and not close.match(lines[j]):
            body.append(lines[j])
            j += 1
        if j == len(lines):
            raise ValueError(f"unclosed {fence}{{{name}}} directive")
        options = {}
        while body and re.match(r"^\s*:[\w-]+:", body[0]):
            key, _, value = body.pop(0).strip()[1:].partition(":")
            options[key] = value.strip()
        if plain:
            out.append("\n".join(plain))
            plain = []
        out.append({"name": name, "arg": arg.strip(), "options": options, "body": "\n".join(body).strip("\n")})
        i = j + 1
    if plain:
        out.append("\n".join(plain))
    return out


class Book:
    """Numbers and labels across all chapters (the website numbers equations, exercises and theorems book-wide)."""

    def __init__(self, notebooks: list[pathlib.Path], bib: pathlib.Path):
        self.labels: dict[str, str] = {}  # label -> "(3)", "Exercise 4", "Lemma 1"
        self.titles: dict[str, str] = {}  # exercise label -> its title
        self.bib = parse_bib(bib)
        self.repo = repository_url()
        counts: dict[str, int] = {}
        for path in notebooks:
            for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
                if cell["cell_type"] == "markdown":
                    self._number(_blocks(_source(cell)), counts)

    def _number(self, blocks: list, counts: dict) -> None:
        for block in blocks:
            if isinstance(block, str):
                continue
            kind = block["name"]
            label = block["options"].get("label")
            if kind == "math" and label:  # Sphinx numbers the labelled equations only
                counts["math"] = counts.get("math", 0) + 1
                self.labels[label] = f"({counts['math']})"
            elif kind == "exercise" or (kind in PRF_KINDS and kind != "prf:proof"):
                word = "Exercise" if kind == "exercise" else PRF_KINDS[kind]
                counts[word] = counts.get(word, 0) + 1
                if label:
                    self.labels[label] = f"{word} {counts[word]}"
                    self.titles[label] = block["arg"]
            self._number(_blocks(block["body"]), counts)

    def ref(self, label: str, role: str) -> str:
        label = label.strip()
        explicit = re.match(r"^(.*?)\s*<([^>]+)>$", label)  # {ref}`text <label>`
        if explicit:
            return explicit.group(1)
        if label not in self.labels:
            raise ValueError(f"{{{role}}}`{label}`: no such label in the book")
        return self.labels[label]


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def parse_bib(path: pathlib.Path) -> dict[str, dict]:
    """key -> {author (list of last names), year, title, note, ...} from a BibTeX file (the fields the book uses)."""
    from pybtex.database import parse_file

    entries = {}
    for key, entry in parse_file(str(path)).entries.items():
        fields = {k.lower(): _untex(v) for k, v in entry.fields.items()}
        people = entry.persons.get("author", [])
        fields["authors"] = [_untex(" ".join(p.last_names)) or _untex(str(p)) for p in people]
        fields["full_authors"] = [_untex(str(p)) for p in people]
        entries[key] = fields
    return entries


def _untex(text: str) -> str:
    return re.sub(r"[{}]", "", str(text)).replace("\\&", "&").replace("--", "–").strip()


def author_year(entry: dict) -> str:
    names = entry["authors"]
    who = (names[0] if len(names) == 1 else f"{names[0]} and {names[1]}" if len(names) == 2
           else f"{names[0]} et al.") if names else entry.get("title", "?")
    return f"{who}, {entry.get('year', 'n.d.')}"


def reference_line(entry: dict) -> str:
    authors = "; ".join(entry["full_authors"]) or "Anonymous"
    parts = [f"{authors} ({entry.get('year', 'n.d.')}). *{entry.get('title', '')}*."]
    for field in ("journal", "booktitle", "publisher", "note"):
        if entry.get(field):
            parts.append(entry[field].rstrip(".") + ".")
    if entry.get("doi"):
        parts.append(f"https://doi.org/{entry['doi']}")
    elif entry.get("url"):
        parts.append(entry["url"])
    return " ".join(parts)


class Converter:
    def __init__(self, book: Book, chapter: pathlib.Path):
        self.book = book
        self.chapter = chapter
        self.cited: list[str] = []
        # the numbers the prose quotes ({eval}`N.<name>`), as the chapter's last run printed them
        # (energylab.notebook.prose)
        self.numbers = (prose.table_of(json.loads(chapter.read_text(encoding="utf-8"))) if chapter.exists() else
                        None) or {}

    def markdown(self, text: str) -> str:
        return "\n".join(self._block(b) for b in _blocks(text))

    def _block(self, block) -> str:
        if isinstance(block, str):
            return self.inline(block)
        kind, arg, body, opts = block["name"], block["arg"], block["body"], block["options"]
        if kind == "math":
            number = self._number_of(opts.get("label"))
            tex = body.strip()
            if "\\\\" in tex and "\\begin" not in tex:  # as Sphinx does for a multi-line math directive
                tex = "\\begin{split}" + tex + "\\end{split}"
            tag = f" \\tag{{{number}}}" if number else ""
            return f"$$\n{tex}{tag}\n$$"
        inner = self.markdown(body)
        if kind == "exercise":
            title = f"{self.book.labels.get(opts.get('label'), 'Exercise')}" + (f": {self.inline(arg)}" if arg else "")
            return f"#### {title}\n\n{inner}"
        if kind == "solution":
            target = self.book.ref(arg, "solution") if arg else "the exercise"
            title = self.book.titles.get(arg.strip())
            summary = f"Solution to {target}" + (f" ({self.inline(title)})" if title else "")
            return f"<details>\n<summary>{summary}</summary>\n\n{inner}\n\n</details>"
        if kind in PRF_KINDS:
            name = self.book.labels.get(opts.get("label"), PRF_KINDS[kind]) if kind != "prf:proof" else "Proof"
            head = f"**{name}" + (f" ({self.inline(arg)})" if arg else "") + ".**"
            end = " ∎" if kind == "prf:proof" else ""
            return f"{head} {inner}{end}" if not inner.startswith(("$$", "-", "*", "1.")) else f"{head}\n\n{inner}{end}"
        if kind in ("admonition", "note", "tip", "warning", "important", "hint", "seealso", "caution"):
            title = self.inline(arg) if arg else kind.capitalize()
            quoted = "\n".join("> " + line if line else ">" for line in inner.split("\n"))
            return f"> **{title}**\n>\n{quoted}"
        raise ValueError(f"{self.chapter.name}: no plain-markdown form for the directive {{{kind}}}")

    def _number_of(self, label):
        return self.book.labels.get(label, "").strip("()") if label else ""

    def inline(self, text: str) -> str:
        def role(m: re.Match) -> str:
            name, content = m.group(1), m.group(2)
            if name == "eq":
                return self.book.ref(content, name)
            if name in ("prf:ref", "ref", "numref"):
                return self.book.ref(content, name)
            if name.startswith("cite"):
                keys = [k.strip() for k in content.split(",") if k.strip()]
                for k in keys:
                    if k not in self.book.bib:
                        raise ValueError(f"{self.chapter.name}: {{cite}}`{k}` is not in book/references.bib")
                    if k not in self.cited:
                        self.cited.append(k)
                inner = "; ".join(author_year(self.book.bib[k]) for k in keys)
                return inner if name == "cite:t" else f"({inner})"
            if name == "doc":
                explicit = re.match(r"^(.*?)\s*<([^>]+)>$", content)
                text, target = (explicit.group(1), explicit.group(2)) if explicit else (None, content)
                page = (self.chapter.parent / target).resolve()
                source = page.with_suffix(".md") if page.with_suffix(".md").exists() else page.with_suffix(".ipynb")
                title = text or _title(source) or page.name
                return self._repo_link(title, source)
            if name in ("math",):
                return f"${content}$"
            if name == "eval":  # Colab renders no MyST: the value the chapter's run stored
                key = content.strip().removeprefix("N.")
                if key not in self.numbers:
                    raise ValueError(f"{self.chapter.name}: {{eval}}`{content}` has no value in the chapter's "
                                     f"printed table of numbers (re-execute it)")
                return self.numbers[key]
            raise ValueError(f"{self.chapter.name}: no plain-markdown form for the role {{{name}}}")

        text = re.sub(r"(?<!`)\{([\w:-]+)\}`([^`]*)`", role, text)  # not a role quoted as code

        def link(m: re.Match) -> str:  # relative links point into the repository
            label, target = m.group(1), m.group(2)
            if re.match(r"^[a-z]+:|^#", target):
                return m.group(0)
            path, _, anchor = target.partition("#")
            return self._repo_link(label, (self.chapter.parent / path).resolve(), anchor)

        return re.sub(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)", link, text)

    def _repo_link(self, label: str, path: pathlib.Path, anchor: str = "") -> str:
        try:
            rel = path.relative_to(ROOT).as_posix()
        except ValueError:
            return label
        return f"[{label}]({self.book.repo}/{rel}{'#' + anchor if anchor else ''})" if self.book.repo else label

    def references(self) -> str:
        lines = ["## References", ""] + [f"- {reference_line(self.book.bib[k])}" for k in
                                         sorted(self.cited, key=lambda k: author_year(self.book.bib[k]))]
        return "\n".join(lines)


def _title(path: pathlib.Path) -> str | None:
    if not path.exists():
        return None
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = next((_source(c) for c in cells if c["cell_type"] == "markdown"), "")
    else:
        text = path.read_text(encoding="utf-8")
    m = re.search(r"^#\s+(.+)$", text, re.M)
    return m.group(1).strip() if m else None


PLOTLY_JSON = "application/vnd.plotly.v1+json"


def self_contained_figures(cell: dict) -> int:
    """Give every plotly output of ``cell`` an HTML twin that loads plotly.js itself (in place); how many."""
    count = 0
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if PLOTLY_JSON not in data:
            continue
        found = re.search(r'id="(fig-[0-9a-f]+)"', "".join(data.get("text/html", "")))
        div_id = found.group(1) if found else "fig-" + hashlib.sha1(
            json.dumps(data[PLOTLY_JSON], sort_keys=True).encode()).hexdigest()[:12]
        data["text/html"] = isolated_html(data[PLOTLY_JSON], div_id)
        count += 1
    return count


def convert(path: pathlib.Path, book: Book) -> dict:
    """The reader notebook (JSON) for the chapter at ``path``."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    conv = Converter(book, path)
    out = copy.deepcopy(nb)
    for cell in out["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = conv.markdown(_source(cell))
        elif cell["cell_type"] == "code":
            self_contained_figures(cell)
    if conv.cited:
        out["cells"].append({"cell_type": "markdown", "id": "reader-references", "metadata": {},
                             "source": conv.references()})
    out.setdefault("metadata", {})["energylab_reader"] = {
        "source": f"notebooks/{path.name}",
        "note": "generated by scripts/reader_notebooks.py: plain Jupyter markdown for Colab and classic Jupyter"}
    return out


def leftovers(nb: dict) -> list[str]:
    """MyST markup left in a notebook's markdown cells (empty when none)."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            found += [f"cell {i}: {m.group(0).strip()}" for m in LEFTOVER.finditer(_source(cell))]
    return found


def chapters() -> list[pathlib.Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def build(out: pathlib.Path = OUT) -> list[pathlib.Path]:
    """Write every chapter's reader notebook into ``out``; their paths."""
    book = Book(chapters(), ROOT / "book" / "references.bib")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in chapters():
        nb = convert(path, book)
        left = leftovers(nb)
        if left:
            raise ValueError(f"{path.name}: MyST left after conversion: {left[:5]}")
        target = out / path.name
        target.write_text(json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(target)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    args = parser.parse_args(argv)
    written = build(args.out)
    print(f"[reader] {len(written)} reader notebooks in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
