"""Reading the book outside the website: cell ids (nbformat 4.5) and `python -m energylab list` in a terminal."""
import copy
import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("add_cell_ids", ROOT / "scripts" / "add_cell_ids.py")
add_cell_ids = importlib.util.module_from_spec(spec)
spec.loader.exec_module(add_cell_ids)
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_cell_has_an_id(path):
    """nbformat 4.5: every cell carries a unique id (scripts/add_cell_ids.py adds the missing ones)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5)
    missing = [i for i, c in enumerate(nb["cells"]) if not add_cell_ids.VALID.match(str(c.get("id", "")))]
    assert not missing, f"{path.name}: cells {missing} have no id (run python scripts/add_cell_ids.py)"
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids), f"{path.name}: duplicate cell ids"


def test_add_cell_ids_is_deterministic_idempotent_and_touches_nothing_else(tmp_path):
    nb = {"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# T"], "id": "keep-me"},
        {"cell_type": "code", "metadata": {}, "source": "x = 1", "execution_count": 1,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["1\n"]}]},
        {"cell_type": "code", "metadata": {}, "source": "x = 1", "execution_count": 2, "outputs": []},
        {"cell_type": "markdown", "metadata": {}, "source": "dup", "id": "keep-me"}]}
    path = tmp_path / "01_x.ipynb"
    path.write_text(add_cell_ids.dumps(nb), encoding="utf-8")
    assert add_cell_ids.process(path) == 3
    first = path.read_text(encoding="utf-8")
    done = json.loads(first)
    ids = [c["id"] for c in done["cells"]]
    assert ids[0] == "keep-me" and len(set(ids)) == 4 and all(add_cell_ids.VALID.match(i) for i in ids)
    assert done["nbformat_minor"] == 5
    strip = lambda n: [{k: v for k, v in c.items() if k != "id"} for c in n["cells"]]  # noqa: E731
    assert strip(done) == strip(nb)  # sources, outputs, counts unchanged
    assert add_cell_ids.process(path) == 0 and path.read_text(encoding="utf-8") == first  # idempotent
    again = tmp_path / "again" / "01_x.ipynb"
    again.parent.mkdir()
    again.write_text(add_cell_ids.dumps(copy.deepcopy(nb)), encoding="utf-8")
    add_cell_ids.process(again)
    assert again.read_text(encoding="utf-8") == first  # deterministic: same name and cells, same ids
    with pytest.raises(TypeError, match="nb"):
        add_cell_ids.add_ids([], "x")


def test_list_fits_a_100_column_terminal(capsys):
    from energylab.__main__ import LIST_WIDTH, main

    assert main(["list"]) == 0
    short = capsys.readouterr().out.splitlines()
    assert main(["list", "--long"]) == 0
    long = capsys.readouterr().out.splitlines()
    assert LIST_WIDTH == 100
    assert max(map(len, short)) <= 100 and max(map(len, long)) <= 100
    assert any(line.endswith("…") for line in short)  # some cost text is long enough to be cut ...
    words = lambda lines: " ".join(" ".join(lines).split())  # noqa: E731
    from energylab import experiments

    for row in experiments.describe():  # ... and --long shows all of it
        assert " ".join(row["cost"].split()) in words(long), row
