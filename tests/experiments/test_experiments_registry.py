"""What the experiment modules declare once and the rest of the book reads: each one's chapter (CHAPTER: the
"Run this chapter" boxes, `python -m energylab list`) and its profiles (PROFILES: the profiles a chapter can be
executed at, in setup_notebook and scripts/build_book.py)."""
import json
import pathlib
import re
import sys
import types

import pytest

import energylab
from energylab import experiments
from energylab.__main__ import main
from tests.probes import script

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _code(chapter: str) -> str:
    cells = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_each_experiment_names_the_chapter_that_runs_it(name):
    chapter = experiments.get_experiment(name).CHAPTER
    assert (ROOT / "notebooks" / f"{chapter}.ipynb").exists(), (name, chapter)
    code = _code(chapter)  # code cells only: the "Run this chapter" box is written from CHAPTER itself
    uses = [rf"from energylab\.experiments import [\w, ]*\b{name}\b", rf"experiments\.{name}\b",
            rf"(get_config|load_or_run|run_experiment|load_committed)\(\s*\"{name}\"", rf"energylab run {name}\b"]
    assert any(re.search(pattern, code) for pattern in uses), (name, chapter)


def test_run_boxes_and_list_read_the_chapter_from_the_experiments(capsys):
    boxes = script("chapter_cells").trained()
    assert boxes["08_hyperset.ipynb"] == ("hyperset", "sudoku")  # the registry's order, as the box shows them
    assert {n for names in boxes.values() for n in names} == set(experiments.EXPERIMENTS)
    assert main(["list"]) == 0
    # a wrapped cost continues on indented lines ("forms x 3 seeds" must not read as experiment "forms")
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line and not line.startswith(" ")]
    assert rows[0][:4] == ["experiment", "chapter", "profile", "cost"]
    assert {tuple(r[:3]) for r in rows if r[:1] == ["nt"]} >= {("nt", "5", "quick"), ("nt", "5", "full")}
    assert {r[1] for r in rows if r[:1] == ["forms"]} == {"10"}
    assert main(["list", "--long"]) == 0
    assert "(notebooks/09_jacobians.ipynb)" in capsys.readouterr().out


@pytest.fixture
def quick_only(monkeypatch):
    """A registered experiment that defines only the quick profile."""
    module = types.ModuleType("quick_only_experiment")
    module.PROFILES, module.COST, module.CHAPTER = {"quick": None}, {"quick": "instant"}, "01_free_energy"
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(experiments.EXPERIMENTS, "quick-only", module.__name__)


def test_chapters_run_at_the_profiles_every_experiment_defines(quick_only, monkeypatch):
    assert experiments.common_profiles() == ("quick",)
    with pytest.raises(ValueError, match="profile must be one of 'quick', got 'full'"):
        energylab.setup_notebook(0, "cpu", profile="full")
    build = script("build_book")
    with pytest.raises(SystemExit):  # argparse refuses it before anything is built
        build.main(["--profile", "full"])
    monkeypatch.delitem(experiments.EXPERIMENTS, "quick-only")
    assert experiments.common_profiles() == ("quick", "full")  # medium: not every experiment has one
