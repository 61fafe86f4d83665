"""Release the book's current version: its git tag and its notebooks branch, made together.

    python scripts/release.py                   # creates tag v<version> and branch notebooks-v<version> here
    python scripts/release.py --push origin     # ... and pushes both to the remote, in one atomic push
    python scripts/release.py --repo PATH       # releases another clone (the tests release a temporary one)

The version is ``energylab.__version__`` of the repository released (read from its energylab/__init__.py). The
tag ``v<version>`` (annotated) marks its HEAD: the chapters' install cell installs the library from it
(scripts/chapter_cells.py). The branch ``notebooks-v<version>`` (scripts/book_version.py) is one commit on top of
HEAD whose tree is HEAD's with every chapter replaced by its reader notebook (scripts/reader_notebooks.py: plain
Jupyter markdown, figures that draw in Colab): the website's Colab buttons open the chapters there. Both refs are
written in one transaction (``git update-ref --stdin``): both are made or neither. The working tree, the index and
HEAD are not touched.

It refuses (exit status 2, one line ``error: ...``), before writing anything, when the tree has uncommitted or
untracked changes, when the tag or the branch exists (here, or on the remote given to --push), when CHANGELOG.md
does not start with this version and CITATION.cff's date (an "Unreleased" section is work not yet given a version:
bump ``__version__`` first), when CITATION.cff names another version, or when a chapter's install cell is out of
date (scripts/chapter_cells.py --check).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import book_version  # noqa: E402 - torch-free


class Refused(Exception):
    """Why the release cannot be made; nothing was written."""


def git(repo: pathlib.Path, *args: str, env: dict | None = None, stdin: str | None = None) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, input=stdin,
                         env=None if env is None else {**os.environ, **env})
    if out.returncode:
        raise RuntimeError(f"git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def version_of(repo: pathlib.Path) -> str:
    """``__version__`` of the repository's energylab/__init__.py (read as text: this may be another checkout)."""
    init = repo / "energylab" / "__init__.py"
    if not init.is_file():
        raise Refused(f"{repo} is not a checkout of the book (no energylab/__init__.py)")
    text = init.read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise Refused(f"{repo}/energylab/__init__.py sets no __version__")
    return match.group(1)


def check(repo: pathlib.Path, version: str, remote: str | None) -> None:
    """Raise :class:`Refused` unless ``repo`` may be released as ``version``."""
    try:
        status = git(repo, "status", "--porcelain")
    except RuntimeError:
        raise Refused(f"{repo} is not a git repository") from None
    if status:
        raise Refused(f"the tree has uncommitted or untracked changes ({len(status.splitlines())} path(s), first: "
                      f"{status.splitlines()[0].strip()}); commit or remove them first")
    tag, branch = book_version.tag(version), book_version.notebooks_branch(version)
    for ref in (f"refs/tags/{tag}", f"refs/heads/{branch}"):
        try:
            git(repo, "rev-parse", "-q", "--verify", ref)
        except RuntimeError:
            continue  # no such ref
        raise Refused(f"{ref} exists already: version {version} was released; bump energylab.__version__")
    try:
        git(repo, "var", "GIT_COMMITTER_IDENT")
    except RuntimeError:
        raise Refused("git knows no committer (the tag names one): set user.name and user.email") from None
    if remote is not None:
        found = git(repo, "ls-remote", remote, f"refs/tags/{tag}", f"refs/heads/{branch}")
        if found:
            raise Refused(f"{remote} has {found.split()[-1]} already: version {version} was released there")
    date = book_version.release_date(repo)
    text = (repo / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## (.+)$", text, re.MULTILINE)
    if first is None or first.group(1).strip() != f"{version} ({date})":
        raise Refused(f"CHANGELOG.md starts with '## {first.group(1).strip() if first else '(no section)'}', not "
                      f"'## {version} ({date})' (the version and CITATION.cff's date-released): give the unreleased "
                      f"work its version first")
    cited = re.search(r"^version:\s*['\"]?([^'\"\s]+)", (repo / "CITATION.cff").read_text(encoding="utf-8"),
                      re.MULTILINE)
    if cited is None or cited.group(1) != version:
        raise Refused(f"CITATION.cff names version {cited.group(1) if cited else None}, not {version}")
    cells = subprocess.run([sys.executable, str(repo / "scripts" / "chapter_cells.py"), "--check"],
                           capture_output=True, text=True, cwd=repo)
    if cells.returncode:
        raise Refused(f"a chapter's install cell is out of date: {cells.stdout.strip()} "
                      "(run python scripts/chapter_cells.py and commit)")


def notebooks_commit(repo: pathlib.Path, version: str) -> str:
    """A commit on top of HEAD: HEAD's tree with every chapter replaced by its reader notebook; its hash. Only
    objects are written (a temporary index, no ref, nothing in the working tree)."""
    with tempfile.TemporaryDirectory(prefix="energylab-release-") as tmp:
        out = pathlib.Path(tmp) / "reader"
        subprocess.run([sys.executable, str(repo / "scripts" / "reader_notebooks.py"), "--out", str(out)],
                       check=True, cwd=repo, capture_output=True, text=True)
        index = {"GIT_INDEX_FILE": str(pathlib.Path(tmp) / "index")}
        git(repo, "read-tree", "HEAD", env=index)
        chapters = sorted(out.glob("*.ipynb"))
        tracked = set(git(repo, "ls-files", "notebooks").splitlines())
        missing = [p.name for p in chapters if f"notebooks/{p.name}" not in tracked]
        if not chapters or missing:
            raise RuntimeError(f"reader notebooks without a committed chapter: {missing or 'none written'}")
        for path in chapters:
            blob = git(repo, "hash-object", "-w", str(path))
            git(repo, "update-index", "--cacheinfo", f"100644,{blob},notebooks/{path.name}", env=index)
        tree = git(repo, "write-tree", env=index)
    message = (f"Reader notebooks of energylab {version}: the chapters of {book_version.tag(version)} as plain "
               f"Jupyter markdown (scripts/reader_notebooks.py), for Colab and classic Jupyter")
    return git(repo, "commit-tree", tree, "-p", "HEAD", "-m", message)


def release(repo: pathlib.Path = ROOT, remote: str | None = None) -> dict:
    """Create (and with ``remote``, push) the tag and the notebooks branch of ``repo``'s version; what was made."""
    repo = repo.resolve()
    version = version_of(repo)
    check(repo, version, remote)
    tag, branch = book_version.tag(version), book_version.notebooks_branch(version)
    head = git(repo, "rev-parse", "HEAD")
    commit = notebooks_commit(repo, version)
    tagger = git(repo, "var", "GIT_COMMITTER_IDENT")
    tag_object = git(repo, "mktag", stdin=f"object {head}\ntype commit\ntag {tag}\ntagger {tagger}\n\n"
                                           f"energylab {version} ({book_version.release_date(repo)})\n")
    # one transaction: "create" fails if a ref exists meanwhile, and then neither is written
    git(repo, "update-ref", "--stdin", stdin=f"start\ncreate refs/tags/{tag} {tag_object}\n"
                                             f"create refs/heads/{branch} {commit}\nprepare\ncommit\n")
    made = {"version": version, "tag": tag, "commit": head, "branch": branch, "notebooks_commit": commit,
            "pushed": None}
    if remote is not None:
        git(repo, "push", "--atomic", remote, f"refs/tags/{tag}", f"refs/heads/{branch}")
        made["pushed"] = remote
    return made


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=pathlib.Path, default=ROOT, help="the clone to release (default: this one)")
    parser.add_argument("--push", metavar="REMOTE", help="push the tag and the branch there (atomically)")
    args = parser.parse_args(argv)
    try:
        made = release(args.repo, args.push)
    except Refused as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    url = book_version.repository_url(args.repo.resolve())
    print(f"[release] energylab {made['version']}: tag {made['tag']} at {made['commit'][:10]}, branch "
          f"{made['branch']} at {made['notebooks_commit'][:10]} (the reader notebooks)")
    if made["pushed"]:
        print(f"[release] pushed both to {made['pushed']}")
    else:
        print(f"[release] publish both: git push --atomic origin {made['tag']} {made['branch']}")
    print(f"[release] Colab opens e.g. https://colab.research.google.com/github/"
          f"{url.removeprefix('https://github.com/')}/blob/{made['branch']}/notebooks/01_free_energy.ipynb")
    return 0


if __name__ == "__main__":
    sys.exit(main())
