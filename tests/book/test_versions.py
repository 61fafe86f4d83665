"""The book's version (issue 32): energylab.__version__ is its one source, and everything that names a version
(pyproject.toml, CITATION.cff, CHANGELOG.md, the install cell, how_to_run, the site footer, the status page) agrees."""
import pathlib
import re
import subprocess

import pytest
import yaml

import energylab
from tests.probes import script

ROOT = pathlib.Path(__file__).resolve().parents[2]


bv = script("book_version")
VERSION = energylab.__version__
CITATION = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def test_version_is_a_release_number_and_pyproject_reads_it():
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION)
    from setuptools.config.pyprojecttoml import read_configuration

    project = read_configuration(ROOT / "pyproject.toml")["project"]
    assert "version" in project["dynamic"] and project["version"] == VERSION
    assert not re.search(r'^version\s*=\s*"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)  # no second copy


def test_citation_names_this_version_and_the_license_and_repository():
    assert CITATION["cff-version"] == "1.2.0"
    assert str(CITATION["version"]) == VERSION and bv.release_date() == str(CITATION["date-released"])
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", bv.release_date())
    assert CITATION["authors"] == [{"name": "energylab contributors"}]
    assert (ROOT / "LICENSE").read_text().startswith(f"{CITATION['license']} License")
    cc = script("chapter_cells")
    assert CITATION["repository-code"] == cc.repository_url()
    # the five source papers, each with a title, authors and a year
    assert len(CITATION["references"]) == 5
    assert all(r["title"] and r["authors"] and r["year"] for r in CITATION["references"])


def test_changelog_starts_with_this_version_and_its_date():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## (\S+) \((\d{4}-\d{2}-\d{2})\)", text, re.MULTILINE)
    assert first is not None and first.groups() == (VERSION, bv.release_date())


def test_install_cell_and_how_to_run_install_the_tag_of_this_version():
    cc = script("chapter_cells")
    lines = [ln.strip() for ln in cc.install_source().splitlines()]
    url = next(ln for ln in lines if ln.startswith("url = "))  # the %pip line reads it: {url}
    assert url.endswith(f'@{bv.tag()}"') and bv.tag() == f"v{VERSION}"
    how = (ROOT / "book" / "how_to_run.md").read_text(encoding="utf-8")
    assert url in how and '%pip install -q "energylab[book] @ {url}"' in how  # the page shows the cell's own lines
    assert f"git checkout {bv.tag()}" in how and f"energylab@{bv.tag()}" in how
    assert f"`{bv.notebooks_branch()}`" in how and bv.notebooks_branch() == f"notebooks-v{VERSION}"


def test_the_repository_address_has_one_source():
    """_config.yml's repository.url: every address of a GitHub repository in the book's files is it (tests aside),
    the install cell, CITATION.cff and the reader notebooks' links follow it, and the Colab buttons open this
    version's notebooks branch there."""
    url = bv.repository_url()
    assert url == yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"].rstrip("/")
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    found = {}
    for name in files:
        if name.startswith("tests/") or not (ROOT / name).is_file():
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for match in re.findall(r"https?://github\.com/[\w.-]+/[\w.-]+", text):
            found.setdefault(match.removesuffix(".git"), set()).add(name)
    assert set(found) == {url}, found
    assert {"CITATION.cff", "_config.yml", "book/how_to_run.md", "notebooks/01_free_energy.ipynb"} <= found[url]
    assert script("reader_notebooks").repository_url() == f"{url}/blob/{bv.tag()}"
    bb = script("build_book")
    button = '<a href="https://colab.research.google.com/github/o/r/blob/main/notebooks/x.ipynb">'
    assert bb.colab_links(button, bv.notebooks_branch()) == button.replace("/main/", f"/{bv.notebooks_branch()}/")
    binder = '<a href="https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/notebooks/x.ipynb">'
    assert bb.colab_links(binder, "x") == binder  # Binder opens the MyST chapters on the main branch


def test_repository_url_needs_one(tmp_path):
    (tmp_path / "_config.yml").write_text("title: x\nrepository:\n  branch: main\nhtml:\n  url: https://x.org\n")
    with pytest.raises(ValueError, match="no repository.url"):
        bv.repository_url(tmp_path)
    (tmp_path / "_config.yml").write_text("repository:\n  branch: main\n  url: https://github.com/o/r/\n")
    assert bv.repository_url(tmp_path) == "https://github.com/o/r"


def test_footer_goes_into_the_staged_config_html_section():
    bb = script("build_book")
    config = (ROOT / "_config.yml").read_text(encoding="utf-8")
    staged = yaml.safe_load(bb.with_footer(config, footer='<p>v9 "quoted" &amp;</p>'))
    assert staged["html"]["extra_footer"] == '<p>v9 "quoted" &amp;</p>'
    assert {k: v for k, v in staged["html"].items() if k != "extra_footer"} == yaml.safe_load(config)["html"]
    footer = yaml.safe_load(bb.with_footer(config))["html"]["extra_footer"]
    assert f"energylab {VERSION} (released {bv.release_date()})" in footer
    with pytest.raises(ValueError, match="no top-level html"):
        bb.with_footer("title: x\n")
    with pytest.raises(ValueError, match="extra_footer"):
        bb.with_footer(bb.with_footer(config))


def test_describe_names_version_date_and_commit(tmp_path):
    line = bv.describe(built="2030-01-02")
    assert line.startswith(f"energylab {VERSION} (released {bv.release_date()}); this site built 2030-01-02")
    assert bv.commit(tmp_path) is None  # outside a git checkout the line just leaves the commit out
    (tmp_path / "CITATION.cff").write_text("date-released: 2031-05-06\n")
    assert bv.describe(built="x", root=tmp_path).endswith("(released 2031-05-06); this site built x")


def test_status_page_shows_the_version(tmp_path):
    sp = script("status_page")
    page = sp.render([], [], None, tmp_path / "none", version="energylab 9.9.9 (released 2030-01-01)")
    assert "**Version.** energylab 9.9.9 (released 2030-01-01)." in page.splitlines()[2]
    assert f"energylab {VERSION}" in sp.render([], [], None, tmp_path / "none")
