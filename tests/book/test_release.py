"""scripts/release.py on temporary clones (issue 54): the tag and the notebooks branch are made together, the branch
holds the reader notebooks, and a dirty tree, an unreleased changelog or a version released already is refused.
Nothing is pushed anywhere but a bare repository in the same temporary folder."""
import json
import re
import subprocess

import pytest

from tests.probes import ROOT, script

rel = script("release")
bv = script("book_version")
IDENTITY = {"GIT_AUTHOR_NAME": "Release Test", "GIT_AUTHOR_EMAIL": "release@example.invalid",
            "GIT_COMMITTER_NAME": "Release Test", "GIT_COMMITTER_EMAIL": "release@example.invalid"}


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A clone of this repository's HEAD, as at a release: its CHANGELOG starts with the current version."""
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    git(repo, "remote", "remove", "origin")  # nothing may reach the repository the clone came from
    changelog = (repo / "CHANGELOG.md").read_text(encoding="utf-8")
    if "\n## Unreleased" in changelog:  # between releases: the unreleased section goes, as a release renames it
        start = changelog.index("\n## Unreleased") + 1
        end = start + re.search(r"^## \d", changelog[start:], re.MULTILINE).start()
        (repo / "CHANGELOG.md").write_text(changelog[:start] + changelog[end:], encoding="utf-8")
        git(repo, "commit", "-q", "-am", "CHANGELOG: this version")
    return repo


def test_refuses_unreleased_work_and_a_dirty_tree(clone):
    changelog = (clone / "CHANGELOG.md").read_text(encoding="utf-8")
    first = changelog.index("\n## ") + 1
    (clone / "CHANGELOG.md").write_text(changelog[:first] + "## Unreleased\n\n- more\n\n" + changelog[first:])
    with pytest.raises(rel.Refused, match="uncommitted or untracked changes"):
        rel.release(clone)
    git(clone, "commit", "-q", "-am", "unreleased work")
    with pytest.raises(rel.Refused, match=r"CHANGELOG.md starts with '## Unreleased', not '## \d"):
        rel.release(clone)
    git(clone, "reset", "-q", "--hard", "HEAD^")
    (clone / "scratch.txt").write_text("untracked")
    with pytest.raises(rel.Refused, match="uncommitted or untracked changes"):
        rel.release(clone)
    assert git(clone, "tag", "--list") == "" and "notebooks-" not in git(clone, "branch", "--list")


def test_makes_the_tag_and_the_notebooks_branch_together_once(clone, tmp_path):
    head = git(clone, "rev-parse", "HEAD")
    remote = tmp_path / "published.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(clone, "remote", "add", "published", str(remote))
    made = rel.release(clone, remote="published")
    version = rel.version_of(clone)
    tag, branch = f"v{version}", f"notebooks-v{version}"
    assert (made["tag"], made["branch"], made["commit"], made["pushed"]) == (tag, branch, head, "published")
    assert branch == bv.notebooks_branch(version)  # the name the website's Colab buttons open
    assert git(clone, "cat-file", "-t", tag) == "tag" and git(clone, "rev-parse", f"{tag}^{{commit}}") == head
    assert git(clone, "rev-parse", f"{branch}^") == head  # one commit on top of the tagged one
    changed = git(clone, "diff", "--name-only", head, branch).splitlines()
    chapters = sorted(p.name for p in (clone / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert changed == [f"notebooks/{name}" for name in chapters] and len(chapters) >= 12
    for name in chapters[:2] + chapters[-1:]:
        nb = json.loads(git(clone, "show", f"{branch}:notebooks/{name}"))
        assert nb["metadata"]["energylab_reader"]["source"] == f"notebooks/{name}"
        markdown = "".join(c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                           for c in nb["cells"] if c["cell_type"] == "markdown")
        assert "```{math}" not in markdown and "{cite}`" not in markdown and "$$" in markdown
        install = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
        assert f"git+{bv.repository_url(clone)}@{tag}" in install
    # the clone is as it was (HEAD, its branch, a clean tree); both refs reached the remote
    assert git(clone, "rev-parse", "HEAD") == head and git(clone, "status", "--porcelain") == ""
    published = git(remote, "show-ref")
    assert f"refs/tags/{tag}" in published and f"refs/heads/{branch}" in published

    with pytest.raises(rel.Refused, match=f"refs/tags/{re.escape(tag)} exists already"):
        rel.release(clone)
    git(clone, "tag", "-d", tag)  # the branch alone also stops it
    with pytest.raises(rel.Refused, match=f"refs/heads/{re.escape(branch)} exists already"):
        rel.release(clone)
    git(clone, "branch", "-D", branch)  # ... and so does a remote that has them
    with pytest.raises(rel.Refused, match="published has refs/"):
        rel.release(clone, remote="published")


def test_main_refuses_with_one_line(tmp_path, capsys):
    assert rel.main(["--repo", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path.resolve()} is not a checkout of the book (no " \
                                      "energylab/__init__.py)\n"
