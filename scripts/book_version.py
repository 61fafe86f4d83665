"""The book's version and address as the scripts show them: `python scripts/book_version.py` prints the version
with its release date.

The version has one source, ``energylab.__version__`` (pyproject.toml reads it too); the release date is
CITATION.cff's ``date-released``; the repository's address has one source too, ``repository.url`` of _config.yml
(:func:`repository_url`; Jupyter Book's launch buttons read it there). tests/book/test_versions.py checks that
CITATION.cff, CHANGELOG.md and the pages agree with them. scripts/build_book.py puts :func:`footer_html` into every
page's footer and points the Colab buttons at :func:`notebooks_branch`, scripts/status_page.py shows
:func:`describe`, scripts/chapter_cells.py pins the install cell to :func:`tag` of :func:`repository_url`,
scripts/reader_notebooks.py links into the repository at :func:`tag`, and scripts/release.py creates the tag and the
notebooks branch.
"""
from __future__ import annotations

import datetime
import html
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def version() -> str:
    import energylab  # torch-free: submodules load on first attribute access

    return energylab.__version__


def tag(version_: str | None = None) -> str:
    """The git tag that marks this version (or ``version_``; the install cell installs from it)."""
    return f"v{version_ or version()}"


def notebooks_branch(version_: str | None = None) -> str:
    """The branch that holds this version's (or ``version_``'s) reader notebooks (scripts/reader_notebooks.py), which
    the Colab buttons open: one per version, like the tag, so that an older page opens the notebooks of its own
    version."""
    return f"notebooks-{tag(version_)}"


def repository_url(root: pathlib.Path = ROOT) -> str:
    """repository.url of _config.yml, the book's repository (read without a YAML library: one key, one line)."""
    text = (root / "_config.yml").read_text(encoding="utf-8")
    match = re.search(r"^repository:[ \t]*\n(?:[ \t]+.*\n)*?[ \t]+url:[ \t]*(\S+)", text, re.MULTILINE)
    if match is None:
        raise ValueError("_config.yml has no repository.url")
    return match.group(1).rstrip("/")


def release_date(root: pathlib.Path = ROOT) -> str:
    """CITATION.cff's date-released (YYYY-MM-DD), read without a YAML library."""
    match = re.search(r"^date-released:\s*['\"]?(\d{4}-\d{2}-\d{2})", (root / "CITATION.cff").read_text("utf-8"),
                      re.MULTILINE)
    if match is None:
        raise ValueError("CITATION.cff has no date-released")
    return match.group(1)


def commit(root: pathlib.Path = ROOT) -> str | None:
    """The short hash of the checked-out commit, with '+' when the tree has local changes; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+" if dirty else "")


def describe(built: str | None = None, root: pathlib.Path = ROOT) -> str:
    """One line of plain text: version, release date, and when and from which commit this copy was built."""
    built = built or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    sha = commit(root)
    source = f" from commit {sha}" if sha else ""
    return f"energylab {version()} (released {release_date(root)}); this site built {built}{source}"


def footer_html(built: str | None = None, root: pathlib.Path = ROOT) -> str:
    """The footer line of every page (sphinx-book-theme's extra_footer), with a pointer to how to cite it."""
    return (f'<p class="energylab-version">{html.escape(describe(built, root))}. '
            f'Cite this version with the repository\'s CITATION.cff; older versions: see How to run.</p>')


if __name__ == "__main__":
    print(f"{version()} {release_date()}")
