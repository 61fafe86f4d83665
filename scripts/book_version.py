"""The book's version as the scripts show it: `python scripts/book_version.py` prints it with its release date.

The version has one source, ``energylab.__version__`` (pyproject.toml reads it too); the release date is
CITATION.cff's ``date-released``. tests/book/test_versions.py checks that CITATION.cff and CHANGELOG.md agree with both.
scripts/build_book.py puts :func:`footer_html` into every page's footer, scripts/status_page.py shows
:func:`describe`, and scripts/chapter_cells.py pins the install cell to :func:`tag`.
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


def tag() -> str:
    """The git tag that marks this version (the install cell installs from it)."""
    return f"v{version()}"


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
