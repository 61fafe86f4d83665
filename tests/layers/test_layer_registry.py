"""One registry of looped-layer names, complete in a fresh process (issue 39).

`python -m energylab run sudoku --set layer=NAME` and `experiments.sudoku.make_model` must accept every name the
book documents whatever was imported before, and an unknown name's error must list every valid one. A fresh
interpreter imports the CLI and the sudoku experiment only, then forks one child per (name, route): each child
checks one name through the CLI's argument checking (no training: ``--device`` names no device, so the run stops
right after the config is checked) or through ``make_model``. Importing any part of :mod:`energylab.layers`
imports every family, so the registry is complete however a program reaches it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ("10_design_your_own.ipynb", "11_atlas.ipynb")  # the chapters that document form-/derived-

_CHILD = r"""
import contextlib, io, json, os, sys, tempfile
import energylab.__main__ as cli
from energylab.experiments import sudoku
names, out = json.loads(sys.argv[1]), {}
tmp = tempfile.mkdtemp()


def cli_check(name):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(["run", "sudoku", "--set", f"layer={name}", "--device", "nodevice",
                       "--out", os.path.join(tmp, "run")])
    return rc, err.getvalue()


def build(name):
    model = sudoku.make_model(sudoku.Config(layer=name, dim=16, heads=2))
    return 0, type(model.layer).__name__


for name in names:
    for route, check in (("cli", cli_check), ("make_model", build)):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the registry as a fresh process has it
            os.close(read)
            try:
                result = check(name)
            except Exception as e:  # noqa: BLE001 - reported to the parent
                result = (-1, f"{type(e).__name__}: {e}")
            os.write(write, json.dumps(result).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as f:
            data = f.read()
        os.waitpid(pid, 0)
        out[f"{route}:{name}"] = json.loads(data)
print(json.dumps(out))
"""


def _documented() -> set[str]:
    """Every layer name chapters 10 and 11 write out (form-* and derived-*)."""
    names = set()
    for chapter in CHAPTERS:
        text = (ROOT / "notebooks" / chapter).read_text(encoding="utf-8")
        names |= set(re.findall(r"\b((?:form|derived)-[a-z][a-z0-9_]*)\b", text))
    return names


def _run_children(names: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(names)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_documented_name_is_registered_in_a_fresh_process():
    from energylab.layers import derived
    from energylab.layers.registry import layer_names

    documented = _documented()
    assert documented == set(derived.LAYER_NAMES)  # the chapters name every form-/derived- layer, and only those
    registered = layer_names()
    assert set(derived.LAYER_NAMES) <= set(registered)
    assert {"transformer", "itrsa", "akorn", "hyperset"} <= set(registered)
    results = _run_children(sorted(set(registered) | documented))
    for key, (rc, message) in results.items():
        route, name = key.split(":", 1)
        if route == "cli":  # exit 2 on the device, which run_experiment checks right after the config
            assert rc == 2 and "device='nodevice'" in message and "unknown layer" not in message, (key, message)
        else:
            assert rc == 0, (key, message)


def test_unknown_layer_lists_every_valid_name():
    from energylab.layers.registry import layer_names

    results = _run_children(["no-such-layer"])
    rc, message = results["cli:no-such-layer"]
    assert rc == 2 and "unknown layer 'no-such-layer'" in message
    listed = message.split("registered layers: ", 1)[1].strip().split(", ")
    assert listed == layer_names()  # every name, the families not imported yet included
    rc, message = results["make_model:no-such-layer"]
    assert rc == -1 and message.startswith("ValueError") and message.endswith(", ".join(layer_names()))


def test_registry_mapping_is_complete_before_any_family_import():
    """``LAYERS`` itself (``in``, lookup, iteration), reached through the registry module alone."""
    code = ("import json\nfrom energylab.layers.registry import LAYERS\n"
            "first = 'form-ea' in LAYERS\nbuilt = type(LAYERS['derived-cauchy'](16, 2, 2)).__name__\n"
            "print(json.dumps([first, built, sorted(LAYERS)]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    first, built, names = json.loads(done.stdout.strip().splitlines()[-1])
    assert first is True and built == "PreNormBlock"
    assert {"form-ea", "derived-softmax", "hyperset", "itrsa", "akorn"} <= set(names)


@pytest.mark.parametrize("experiment, field, value", [("sudoku", "layer", "no-such"),
                                                      ("forms", "layers", ("form-ea", "nope")),
                                                      ("hyperset", "layers", ("hyperset", "nope"))])
def test_config_fields_naming_layers_are_checked(experiment, field, value):
    from energylab.experiments import get_config

    with pytest.raises(ValueError, match=f"config field '{field}' of experiment '{experiment}': unknown layer"):
        get_config(experiment, "quick", **{field: value})
    assert getattr(get_config(experiment, "quick"), field)  # the profiles' own names pass
