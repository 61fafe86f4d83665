"""Build the book website into _build/html/, fully offline.

    python scripts/build_book.py            # build from the committed (already executed) notebooks
    python scripts/build_book.py --execute  # first re-execute every notebook with papermill (profile=quick)
    python scripts/build_book.py --no-pdf   # skip the whole-book PDF (scripts/build_pdf.py, needs Chromium)

The download (.ipynb) and Colab buttons of each chapter give the reader notebook (scripts/reader_notebooks.py:
the MyST markup as plain Jupyter markdown), also written to _build/reader/.
The sources are copied to _build/src/ (notebooks there are replaced by freshly executed copies with
--execute), so the working tree is never modified. The build adds an execution status page (scripts/status_page.py):
each chapter's profile, wall time, date and result, and the committed results under results/.
Jupyter Book runs with -W -n --keep-going: any warning,
broken reference or failing cell fails the build.
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # book_version, status_page, ... also when a test loads this file by path
from energylab import portable  # noqa: E402 - torch-free
from energylab.notebook import prose  # noqa: E402 - torch-free

SRC = ROOT / "_build" / "src"


def notebooks() -> list[pathlib.Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def with_footer(config: str, footer: str | None = None) -> str:
    """The _config.yml text with html.extra_footer set to the book's version line (scripts/book_version.py), so
    every page's footer says which version of the book it is; the version is not written into _config.yml itself,
    which would be a second source of it."""
    import json
    import re

    import book_version

    footer = book_version.footer_html() if footer is None else footer
    if re.search(r"^\s+extra_footer:", config, re.MULTILINE):
        raise ValueError("_config.yml sets html.extra_footer itself; the build writes it (scripts/build_book.py)")
    new, count = re.subn(r"^html:[ \t]*\n", lambda m: m.group(0) + f"  extra_footer: {json.dumps(footer)}\n", config,
                         count=1, flags=re.MULTILINE)
    if count != 1:
        raise ValueError("_config.yml has no top-level html: section")
    return new


def stage_sources() -> None:
    if SRC.exists():
        shutil.rmtree(SRC)
    SRC.mkdir(parents=True)
    shutil.copy2(ROOT / "_toc.yml", SRC / "_toc.yml")
    (SRC / "_config.yml").write_text(with_footer((ROOT / "_config.yml").read_text(encoding="utf-8")), encoding="utf-8")
    shutil.copytree(ROOT / "book", SRC / "book")
    (SRC / "notebooks").mkdir()
    for nb in notebooks():
        shutil.copy2(nb, SRC / "notebooks" / nb.name)


def execute_notebooks(profile: str) -> list[dict]:
    """Execute every chapter into the staged sources; one record each (a failing chapter is recorded, not fatal
    here: the status page shows it and main() fails the build)."""
    import datetime
    import tempfile

    import nbformat
    import papermill
    from jupyter_client.manager import KernelManager
    from nbclean import clean

    portable.pin_environment()  # the kernels papermill starts inherit the pinned numerics

    runs = []
    for nb in notebooks():
        t0 = time.perf_counter()
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
        print(f"[build] executing {nb.name} (profile={profile}) ...", flush=True)
        # IPC transport with an absolute socket path: TCP kernels were seen to stall for minutes on cells that
        # display a large figure inside an ipywidgets Output; the per-cell timeout turns any hang into an error.
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(pathlib.Path(tempfile.mkdtemp()) / "k"))
        error = None
        try:
            papermill.execute_notebook(str(nb), str(SRC / "notebooks" / nb.name), parameters={"profile": profile},
                                       kernel_name="python3", cwd=str(ROOT / "notebooks"), progress_bar=False,
                                       km=km, execution_timeout=900)
        except Exception as err:  # papermill.PapermillExecutionError and kernel failures alike
            error = " ".join(str(err).split())[:300]
            print(f"[build] {nb.name} FAILED: {error}", flush=True)
        executed = SRC / "notebooks" / nb.name
        book = nbformat.read(executed, as_version=4)
        clean(book)  # papermill's injected cell would show the parameters twice on the page
        if error is None:
            prose.fill(book)  # the prose's {eval} roles show this run's numbers
        nbformat.write(book, executed)
        runs.append({"notebook": nb.name, "profile": profile, "seconds": time.perf_counter() - t0, "date": date,
                     "error": error})
        print(f"[build] {nb.name}: {runs[-1]['seconds']:.1f} s", flush=True)
    return runs


def write_status_page(runs: list[dict]) -> None:
    """The execution status page into the staged sources, and into the staged table of contents."""
    import status_page

    machine = None
    if runs:
        from energylab.engine.committed import machine as describe_machine

        machine = describe_machine()
    (SRC / (status_page.PAGE + ".md")).write_text(
        status_page.render(runs, notebooks(), machine, ROOT / "results"), encoding="utf-8")
    toc = SRC / "_toc.yml"
    toc.write_text(status_page.add_to_toc(toc.read_text(encoding="utf-8")), encoding="utf-8")


def colab_links(page: str, branch: str) -> str:
    """A chapter page's HTML with its Colab launch button opening the notebook on ``branch``, not the branch of
    _config.yml (Jupyter Book builds the button from repository.url and repository.branch)."""
    import re

    return re.sub(r'(href="https://colab\.research\.google\.com/github/[^"]+?/blob/)[^/"]+(/notebooks/)',
                  lambda m: m.group(1) + branch + m.group(2), page)


def publish_reader_notebooks(html: pathlib.Path) -> None:
    """The reader notebooks (scripts/reader_notebooks.py: plain Jupyter markdown, no MyST) into the site and the
    staged tree: each chapter's download button (.ipynb) serves its reader notebook, and its Colab button opens
    the reader notebook on this version's notebooks branch (book_version.notebooks_branch, which scripts/release.py
    creates with the version's tag). The Binder (JupyterLab) button keeps the MyST chapters, which jupyterlab-myst
    renders."""
    import book_version
    import reader_notebooks

    written = reader_notebooks.build(ROOT / "_build" / "reader")
    sources = html / "_sources" / "notebooks"
    for path in written:
        if (sources / path.name).exists():
            shutil.copy2(path, sources / path.name)
    branch = book_version.notebooks_branch()
    changed = 0
    for page in (html / "notebooks").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        new = colab_links(text, branch)
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed += 1
    print(f"[build] {len(written)} reader notebooks (plain Jupyter markdown) behind the download buttons; "
          f"Colab buttons of {changed} chapters open them from the '{branch}' branch", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--execute", action="store_true", help="re-execute notebooks with papermill first")
    from energylab.experiments import common_profiles  # the profiles every chapter's experiments define

    parser.add_argument("--profile", default="quick", choices=common_profiles())
    parser.add_argument("--no-pdf", action="store_true",
                        help="do not print the whole book to _build/html/energylab.pdf")
    args = parser.parse_args(argv)

    subprocess.run([sys.executable, str(ROOT / "scripts" / "vendor_assets.py")], check=True)
    stage_sources()
    runs = execute_notebooks(args.profile) if args.execute else []
    write_status_page(runs)
    failed = [r["notebook"] for r in runs if r["error"] is not None]
    html = ROOT / "_build" / "html"
    if html.exists():
        shutil.rmtree(html)
    jb = shutil.which("jupyter-book", path=str(pathlib.Path(sys.executable).parent)) or "jupyter-book"
    cmd = [jb, "build", str(SRC), "--path-output", str(ROOT), "-W", "-n", "--keep-going"]
    print("[build]", " ".join(cmd), flush=True)
    result = subprocess.run(cmd)
    if result.returncode != 0:
        print("[build] FAILED: see the warnings above", file=sys.stderr)
        return result.returncode
    publish_reader_notebooks(html)
    if not args.no_pdf:
        import build_pdf
        import smoke_site

        if smoke_site.chromium() is None:
            print("[build] no Chromium: the whole-book PDF was not built (Debian: apt-get install chromium)")
        elif build_pdf.main([]) != 0:
            print("[build] FAILED: the whole-book PDF (see [pdf] above)", file=sys.stderr)
            return 1
    if failed:
        print(f"[build] FAILED: {len(failed)} chapter(s) did not execute: {', '.join(failed)} (the site was built "
              "with their error outputs; see book/status.html)", file=sys.stderr)
        return 1
    print(f"\nThe book is built. Open it offline:  {html / 'index.html'}\n"
          "  (e.g. `python -m http.server -d _build/html 8000` and browse to http://127.0.0.1:8000)\n"
          "To run the chapters yourself instead:  jupyter lab notebooks/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
