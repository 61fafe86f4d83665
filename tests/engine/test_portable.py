"""The machinery that makes committed notebook outputs the same on every processor: environment pins, figure
rounding, and the clean-up of executed notebooks."""
import json
import pathlib
import subprocess
import sys

import nbformat
import pytest

from energylab import portable

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import nbclean  # noqa: E402


def test_portable_imports_neither_torch_nor_numpy():
    # the pins act only if set before torch/numpy load, so the module that sets them must not load them
    code = "import sys, energylab.portable; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]


def test_pin_environment_sets_pins_and_emulation():
    env = {"ATEN_CPU_CAPABILITY": "avx512", "HOME": "/x"}
    values = portable.pin_environment(env)
    assert env["ATEN_CPU_CAPABILITY"] == "default" and env["MKL_CBWR"] == "COMPATIBLE" and env["HOME"] == "/x"
    assert "MKL_ENABLE_INSTRUCTIONS" not in env and values == portable.PINNED_ENV
    assert portable.unpinned(env) == []
    portable.pin_environment(env, emulate_other=True)
    assert env["MKL_ENABLE_INSTRUCTIONS"] == "AVX"
    assert portable.unpinned({}) == list(portable.PINNED_ENV)


def test_pins_reach_a_child_process():
    # what a notebook kernel started by nbval sees: this pytest process was pinned by conftest.py
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "DEFAULT"


def test_book_renderer_rounds_away_the_last_bits():
    import plotly.graph_objects as go

    from energylab import viz

    renderer = viz.BookRenderer()
    a = go.Figure(go.Scatter(x=[0, 1, 2], y=[0.123456789012, 2879000147.1984, -1e-9 * 1.23456789]))
    b = go.Figure(go.Scatter(x=[0, 1, 2], y=[0.123456789013, 2879000147.1985, -1e-9 * 1.234567891]))
    bundle = renderer.to_mimebundle(a.to_dict())
    assert bundle == renderer.to_mimebundle(b.to_dict())
    assert bundle["application/vnd.plotly.v1+json"]["data"][0]["y"] == [0.123457, 2879000000.0, -1.23457e-09]
    assert viz.rounded({"k": [1.0 / 3, 7, "s", float("inf")]}) == {"k": [0.333333, 7, "s", float("inf")]}


def _notebook(cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    return nb


def test_clean_merges_streams_and_drops_the_injected_cell():
    params = nbformat.v4.new_code_cell('profile = "quick"  # quick or full\nseed = 0',
                                       metadata={"tags": ["parameters"]})
    injected = nbformat.v4.new_code_cell('# Parameters\nprofile = "full"\n',
                                         metadata={"tags": ["injected-parameters"], "papermill": {"duration": 1}})
    body = nbformat.v4.new_code_cell("print(1); print(2)")
    body.outputs = [nbformat.v4.new_output("stream", name="stdout", text="a\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="b\n"),
                    nbformat.v4.new_output("stream", name="stderr", text="warn\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="c\n")]
    body.metadata["execution"] = {"iopub.status.idle": "2026-01-01"}
    nb = _notebook([params, injected, body])
    nb.metadata["papermill"] = {"parameters": {}}
    nbclean.clean(nb)
    assert len(nb.cells) == 2
    assert nb.cells[0].source == 'profile = "full"  # quick or full\nseed = 0'
    assert [(o["name"], o["text"]) for o in nb.cells[1].outputs] == [("stdout", "a\nb\n"), ("stderr", "warn\n"),
                                                                      ("stdout", "c\n")]
    assert "execution" not in nb.cells[1].metadata and "papermill" not in nb.metadata


def test_setup_notebook_rejects_unknown_profiles():
    import energylab

    with pytest.raises(ValueError, match="profile must be one of 'quick', 'full', got 'bogus'"):
        energylab.setup_notebook(0, "cpu", profile="bogus")
    with pytest.raises(ValueError, match="profile"):
        energylab.setup_notebook(0, "cpu", profile="medium")  # no chapter offers medium unless it says so


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_every_uncompared_cell_says_why(nb):
    # a cell whose output nbval does not compare states the reason on the next line
    for cell in json.loads(nb.read_text())["cells"]:
        lines = "".join(cell["source"]).splitlines()
        for i, line in enumerate(lines):
            if line.strip() == "# NBVAL_IGNORE_OUTPUT":
                nxt = lines[i + 1] if i + 1 < len(lines) else ""
                assert nxt.startswith("# ") and len(nxt) > 12, f"{nb.name}: '{line}' must be followed by '# why ...'"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_no_split_streams_or_injected_cells(nb):
    for cell in json.loads(nb.read_text())["cells"]:
        assert "injected-parameters" not in cell.get("metadata", {}).get("tags", [])
        outs = cell.get("outputs", [])
        for a, b in zip(outs, outs[1:]):
            assert not (a["output_type"] == b["output_type"] == "stream" and a["name"] == b["name"]), nb.name


def test_configure_torch_switches_off_onednn_only_when_pinned():
    code = ("import torch, energylab.portable as p; print(p.configure_torch(), torch.backends.mkldnn.enabled)")
    pinned = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert pinned.stdout.split() == ["True", "False"]
    env = {k: v for k, v in __import__("os").environ.items() if k != "ATEN_CPU_CAPABILITY"}
    free = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert free.stdout.split() == ["False", "True"]
