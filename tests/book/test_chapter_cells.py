"""scripts/chapter_cells.py: every chapter has the Colab install cell and, when it trains, the "Run this chapter"
box, both current (written from _config.yml and the experiments' PROFILES/COST)."""
import importlib.util
import json
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "chapter_cells.py"
spec = importlib.util.spec_from_file_location("chapter_cells", SCRIPT)
cc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cc)


def test_every_chapter_is_current(capsys):
    assert cc.main(["--check"]) == 0, capsys.readouterr().out + " (run: python scripts/chapter_cells.py)"


def test_install_cell_uses_the_configured_repository_and_is_first():
    import yaml

    import energylab

    url = yaml.safe_load((SCRIPT.parents[1] / "_config.yml").read_text())["repository"]["url"]
    assert cc.repository_url() == url and url.startswith("https://github.com/")
    # the book's own version (its git tag), not the moving main branch; then the new package is importable
    assert cc.install_source().endswith(f'    url = "git+{url}@v{energylab.__version__}"\n'
                                        '    %pip install -q "energylab[book] @ {url}"\n'
                                        "    importlib.invalidate_caches()  # the next cells import what pip just "
                                        "installed")
    assert max(len(line) for line in cc.install_source().splitlines()) <= 88  # the chapters' code width
    for path in cc.chapters():
        nb = json.loads(path.read_text())
        first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert cc.INSTALL_TAG in first_code["metadata"]["tags"] and first_code["outputs"] == [], path.name


def test_update_inserts_replaces_and_is_idempotent():
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# 5. T"]},
                    {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ["profile = 1"],
                     "execution_count": 1, "outputs": []}]}
    new = cc.update(nb, "05_expressive_attention.ipynb")
    assert [c["metadata"].get("tags") for c in new["cells"]] == [None, [cc.BOX_TAG], [cc.INSTALL_TAG], ["parameters"]]
    box = "".join(new["cells"][1]["source"])
    assert [c.get("id") for c in new["cells"][1:3]] == [cc.BOX_TAG, cc.INSTALL_TAG]  # new cells get ids (nbformat 4.5)
    assert "| `nt` | quick |" in box and "python -m energylab run nt --profile full --device cuda" in box
    assert cc.update(new, "05_expressive_attention.ipynb") == new and len(nb["cells"]) == 2
    stale = json.loads(json.dumps(new))
    stale["cells"][1]["source"] = ["old"]
    assert cc.update(stale, "05_expressive_attention.ipynb") == new
    executed = json.loads(json.dumps(new))  # a committed install cell: only its source may change
    executed["cells"][2].update(id="abc123", execution_count=1, source=["old install line"])
    refreshed = cc.update(executed, "05_expressive_attention.ipynb")["cells"][2]
    assert refreshed["id"] == "abc123" and refreshed["execution_count"] == 1 and refreshed["outputs"] == []
    assert "".join(refreshed["source"]) == cc.install_source()
    untrained = cc.update(new, "01_free_energy.ipynb")  # a chapter that trains nothing loses a stray box
    assert [c["metadata"].get("tags") for c in untrained["cells"]] == [None, [cc.INSTALL_TAG], ["parameters"]]


def test_a_rewritten_box_keeps_its_cell_id():
    """Regenerating the run box after a COST change dropped the cell's id once (nbformat 4.5 requires one)."""
    path = next(p for p in cc.chapters() if p.name.startswith("08_"))
    nb = json.loads(path.read_text())
    i = next(k for k, c in enumerate(nb["cells"]) if cc.BOX_TAG in c.get("metadata", {}).get("tags", []))
    before = nb["cells"][i]["id"]
    nb["cells"][i]["source"] = ["out of date\n"]
    after = cc.update(nb, path.name)
    box = next(c for c in after["cells"] if cc.BOX_TAG in c.get("metadata", {}).get("tags", []))
    assert box["id"] == before and "".join(box["source"]) != "out of date\n"
