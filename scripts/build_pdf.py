"""The whole book as one PDF, built offline: `python scripts/build_pdf.py` (after scripts/build_book.py).

Jupyter Book builds the staged sources (_build/src, written by build_book.py) as a single HTML page; headless
Chromium opens it, waits until MathJax has typeset every equation and plotly has drawn every figure (only that:
the smoke test's comparisons, dark mode and solver checks are not run here), and prints it to A4 as
_build/html/energylab.pdf. Every page of it is then seen as an image (smoke_site.check_pdf_pages): the build fails,
naming the pages, if one is blank or ends in an empty framed code box. Every page of the website then
gets a link to it in its download menu. The PDF has the math, the figures (as drawn, vector), the exercises and
the bibliography; the ipywidgets controls (live only with a kernel) are left out. Every document starts on a new
page, so that each chapter is also cut out of it as its own PDF (_build/html/pdf/<chapter>.pdf: poppler's pdfinfo
finds where each starts, pypdf cuts), linked from that chapter's download menu.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import smoke_site  # noqa: E402 - the Chromium driver, the page checks and the printer

SRC = ROOT / "_build" / "src"
SINGLE = ROOT / "_build" / "pdf"
PDF_NAME = "energylab.pdf"
PRINT_WIDTH = 698  # CSS px: A4 less its two 0.5-inch margins at 96 px per inch; the page is laid out as printed
CHAPTER_DIR = "pdf"  # the chapters' own PDFs, _build/html/pdf/<chapter>.pdf
LINK = ('<li><a href="{href}" target="_blank" class="btn btn-sm btn-download-book-pdf-button dropdown-item" '
        'title="The whole book as one PDF" data-bs-placement="left" data-bs-toggle="tooltip">'
        '<span class="btn__icon-container"><i class="fas fa-book"></i></span>'
        '<span class="btn__text-container">book .pdf</span></a></li>')
CHAPTER_LINK = ('<li><a href="{href}" target="_blank" class="btn btn-sm btn-download-chapter-pdf-button dropdown-item" '
                'title="This chapter as a PDF" data-bs-placement="left" data-bs-toggle="tooltip">'
                '<span class="btn__icon-container"><i class="fas fa-file-pdf"></i></span>'
                '<span class="btn__text-container">chapter .pdf</span></a></li>')
# every document of the single page starts on a new page (the span marks where a document begins)
PAGE_BREAKS = '<style>@media print { span[id^="document-"] + section { break-before: page; } }</style>'

MENU = '<div class="dropdown dropdown-download-buttons">'


def build_single_page() -> pathlib.Path:
    """The staged book as one HTML page; its path."""
    if not (SRC / "_toc.yml").exists():
        sys.exit("build_pdf: no staged sources in _build/src; run scripts/build_book.py first")
    if SINGLE.exists():
        shutil.rmtree(SINGLE)
    jb = shutil.which("jupyter-book", path=str(pathlib.Path(sys.executable).parent)) or "jupyter-book"
    subprocess.run([jb, "build", str(SRC), "--builder", "singlehtml", "--path-output", str(SINGLE), "-n",
                    "--keep-going", "-q"], check=True)
    root = SINGLE / "_build" / "singlehtml"
    assembled = max(root.rglob("*.html"), key=lambda p: p.stat().st_size)  # index.html only redirects to it
    # the assembled page sits at the root doc's path (book/intro.html) but links its assets as if it were at the
    # top (_static/...): move it there
    page = root / "book.html"
    html = assembled.read_text(encoding="utf-8")
    # a page has nothing to do with live controls: the single page carries no widget state (myst-nb adds it per
    # chapter page only), so their views are dropped; the search box has no index on a single page
    html = re.sub(r'<script type="application/vnd\.jupyter\.widget-view\+json">.*?</script>', "", html,
                  flags=re.DOTALL)
    html = html.replace('<script src="searchindex.js"></script>', "")
    html = html.replace("</head>", PAGE_BREAKS + "</head>", 1)
    page.write_text(html, encoding="utf-8")
    assembled.unlink()
    return page


def print_book(page: pathlib.Path, out: pathlib.Path) -> list[str]:
    """Render ``page`` in Chromium and print it to ``out``; the problems a reader would see (empty when none)."""
    root = SINGLE / "_build" / "singlehtml"
    server, port = smoke_site.serve(root)
    smoke_site.SITE = root  # expected_content resolves paths against the served folder
    try:
        with smoke_site.browser() as context:
            url = f"http://127.0.0.1:{port}/{page.relative_to(root).as_posix()}"
            return smoke_site.check_page(context, url, page, None, timeout=300, settle=2.0, pdf=out,
                                         width=PRINT_WIDTH, print_only=True)
    finally:
        server.shutdown()


def document_starts(pdf: pathlib.Path, page: pathlib.Path) -> dict[str, int]:
    """{document (e.g. "notebooks/01_free_energy"): the PDF page (1-based) its first section starts on}, in the
    book's order, from the PDF's named destinations (``pdfinfo -dests``: Chromium keeps every linked id)."""
    html = page.read_text(encoding="utf-8")
    sections = re.findall(r'<span id="document-([^"]+)"></span>\s*<section[^>]*\bid="([^"]+)"', html)
    listing = subprocess.run(["pdfinfo", "-dests", str(pdf)], capture_output=True, text=True, check=True).stdout
    dests = {}
    for line in listing.splitlines()[1:]:
        found = re.match(r'\s*(\d+)\s+\[.*\]\s+"(.*)"$', line)
        if found:
            dests.setdefault(found.group(2), int(found.group(1)))
    return {doc: dests[sid] for doc, sid in sections if sid in dests}


def split_chapters(pdf: pathlib.Path, page: pathlib.Path, out_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """Each chapter (a notebooks/ document) of the whole-book PDF as its own PDF in ``out_dir``: its pages up to
    the page before the next document's first (pypdf, which writes the fonts and images those pages share once).
    {chapter stem: path}."""
    from pypdf import PdfReader, PdfWriter

    starts = document_starts(pdf, page)
    docs = list(starts)
    reader = PdfReader(pdf)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    written = {}
    for i, doc in enumerate(docs):
        if not doc.startswith("notebooks/"):
            continue
        first = starts[doc] - 1
        last = (starts[docs[i + 1]] - 1) if i + 1 < len(docs) else len(reader.pages)
        writer = PdfWriter()
        for number in range(first, last):
            writer.add_page(reader.pages[number])
        writer.compress_identical_objects(remove_duplicates=True, remove_unreferenced=True)
        stem = doc.split("/", 1)[1]
        with open(out_dir / f"{stem}.pdf", "wb") as f:
            writer.write(f)
        written[stem] = out_dir / f"{stem}.pdf"
    return written


def link_from_every_page(site: pathlib.Path) -> int:
    """Add the book PDF to every page's download menu, and to a chapter's page its own PDF when there is one; the
    number of pages changed."""
    changed = 0
    for html_file in site.rglob("*.html"):
        html = html_file.read_text(encoding="utf-8")
        if MENU not in html or "btn-download-book-pdf-button" in html:
            continue
        depth = len(html_file.relative_to(site).parts) - 1
        link = LINK.format(href="../" * depth + PDF_NAME)
        own = site / CHAPTER_DIR / (html_file.stem + ".pdf")
        if html_file.parent.name == "notebooks" and own.exists():
            link += CHAPTER_LINK.format(href="../" * depth + f"{CHAPTER_DIR}/{own.name}")
        html = re.sub(r'(<div class="dropdown dropdown-download-buttons">.*?<ul class="dropdown-menu">)',
                      lambda m: m.group(1) + link, html, count=1, flags=re.DOTALL)
        html_file.write_text(html, encoding="utf-8")
        changed += 1
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    site = ROOT / "_build" / "html"
    if not (site / "index.html").exists():
        sys.exit("build_pdf: no site at _build/html; build it first (python scripts/build_book.py)")
    t0 = time.perf_counter()
    page = build_single_page()
    out = site / PDF_NAME
    try:
        problems = print_book(page, out)
    except smoke_site.ChromiumTimeout as err:  # e.g. printing on a machine too busy to finish in PDF_WAIT seconds
        print(f"[pdf] FAILED: timed out printing {page.relative_to(ROOT)}: {err}", file=sys.stderr, flush=True)
        return 1
    if out.exists():
        # every page seen as an image: none blank, none ending in an empty framed box
        page_problems, numbers = smoke_site.check_pdf_pages(out)
        problems += page_problems
        print(f"[pdf] every page checked: {numbers['pages']} pages, {numbers['empty_boxes']} ending in an empty "
              f"box, {numbers['blank']} blank ({numbers['seconds']:.1f} s)", flush=True)
    for p in dict.fromkeys(problems):
        print(f"[pdf]   - {p}")
    chapters = split_chapters(out, page, site / CHAPTER_DIR) if out.exists() else {}
    print(f"[pdf] {len(chapters)} chapter PDFs in {(site / CHAPTER_DIR).relative_to(ROOT)}: "
          + ", ".join(f"{stem[:2]} {smoke_site.pdf_pages(path)} p." for stem, path in chapters.items()), flush=True)
    pages = link_from_every_page(site)
    size = out.stat().st_size / 1e6 if out.exists() else 0
    print(f"[pdf] {out.relative_to(ROOT)}: {smoke_site.pdf_pages(out) if out.exists() else 0} pages, {size:.1f} MB, "
          f"{time.perf_counter() - t0:.0f} s; linked from {pages} pages", flush=True)
    return 1 if problems or not out.exists() else 0


if __name__ == "__main__":
    sys.exit(main())
