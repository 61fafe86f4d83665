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


# ------------------------------------------------------------------ approximate vector math (issue 46)

def test_exact_sqrt_is_correctly_rounded_in_float32():
    import torch

    x = torch.rand(100_000, generator=torch.Generator().manual_seed(0)) * 10 + 1e-3
    rounded = torch.sqrt(x.double()).float()  # float64's sqrt is IEEE's: rounding it once is exact for float32
    assert torch.equal(portable.exact_sqrt(x), rounded)
    assert portable.exact_sqrt(x).dtype == torch.float32
    x64 = x.double().requires_grad_(True)
    portable.exact_sqrt(x64).sum().backward()
    assert torch.allclose(x64.grad, 0.5 / x64.detach().sqrt(), rtol=0, atol=0)


def test_perturbing_mode_moves_approximate_math_by_one_ulp_and_nothing_else():
    import torch

    x = torch.rand(1000, generator=torch.Generator().manual_seed(1)) + 0.5
    plain = {"sqrt": x.sqrt(), "pow": x.pow(0.5), "tan": x.tan(), "exp": x.exp(), "rsqrt": x.rsqrt(),
             "exact": portable.exact_sqrt(x), "sqrt64": x.double().sqrt()}
    with portable.approximate_math_mode("perturb"):
        moved = {"sqrt": x.sqrt(), "pow": x.pow(0.5), "tan": x.tan(), "exp": x.exp(), "rsqrt": x.rsqrt(),
                 "exact": portable.exact_sqrt(x), "sqrt64": x.double().sqrt()}
        inplace = x.clone().sqrt_()
        foreach = torch._foreach_sqrt([x, x + 1])
    up = lambda t: torch.nextafter(t, torch.full_like(t, float("inf")))  # noqa: E731
    for name in ("sqrt", "pow", "tan"):
        assert torch.equal(moved[name], up(plain[name])), name
    assert torch.equal(inplace, up(plain["sqrt"])) and torch.equal(foreach[0], up(plain["sqrt"]))
    for name in ("exp", "rsqrt", "exact", "sqrt64"):  # not approximate math: untouched
        assert torch.equal(moved[name], plain[name]), name


def test_emulated_pass_perturbs_and_setup_notebook_enters_the_mode():
    assert portable.EMULATED_OTHER_PROCESSOR[portable.PERTURB_VARIABLE] == "1"
    assert portable.PERTURB_VARIABLE not in portable.PINNED_ENV  # the native pass runs the real kernels
    code = ("import torch, energylab; energylab.setup_notebook(0, 'cpu'); x = torch.tensor([2.0]); "
            "print(bool(x.sqrt() == torch.sqrt(x.double()).float()))")
    env = {**__import__("os").environ, portable.PERTURB_VARIABLE: "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    assert out.stdout.split()[-1] == "False"  # moved by one ulp in the kernel of the emulated pass
    env[portable.PERTURB_VARIABLE] = "0"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    assert out.stdout.split()[-1] == "True"


def _training_calls():
    """The approximate-math calls of one short run of each training path the book pins: AdamW with gradient
    clipping, the vmapped ensemble with per-member clipping, the attractor net's norm fix, a looped Sudoku model."""
    import torch

    from energylab.engine.ensemble import train_ensemble
    from energylab.engine.train import TrainConfig, train
    from energylab.experiments import sudoku
    from energylab.models.attractor import AttractorConfig, BareSelfAttention

    def make(seed=0):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))

    X, Y = torch.randn(16, 4), torch.randn(16, 1)
    loss = lambda m, b: (((m(b[0]) - b[1]) ** 2).mean(), {})  # noqa: E731
    cfg = TrainConfig(steps=2, lr=1e-2, grad_clip=0.5, progress=False, device="cpu")
    with portable.approximate_math_mode("record") as mode:
        train(make(), loss, lambda step: (X, Y), cfg)
        train_ensemble(make, loss, lambda step, seed: (X, Y), cfg, [0, 1])
        net = BareSelfAttention(AttractorConfig())
        net.fix_norm_()
        looped = sudoku.make_model(sudoku.Config(dim=16, heads=2, iterations=2, layer="hyperset"))
        tokens = torch.randint(0, 5, (3, 16))
        opt = torch.optim.AdamW(looped.parameters(), fused=True)
        looped(tokens).sum().backward()
        opt.step()
    return mode.calls


def test_pinned_training_paths_call_no_approximate_math():
    assert _training_calls() == []


def test_the_recorder_sees_the_default_adamw_sqrt():
    # the check above can fail: torch's default AdamW (before the fix: make_optimizer's) calls VML's sqrt
    import torch

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    with portable.approximate_math_mode("record") as mode:
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
    assert "sqrt" in mode.calls


def test_the_c_sphere_kernel_is_built_for_the_x86_64_baseline_in_pinned_processes():
    from energylab.kernels import sphere_symmetric as ss

    assert ss.flags() == ss.PINNED_FLAGS  # this test process is pinned (conftest.py)
    assert "-march=native" not in ss.PINNED_FLAGS and "-ffp-contract=off" in ss.PINNED_FLAGS
    code = "from energylab.kernels import sphere_symmetric as ss; print(ss.flags() == ss.FLAGS)"
    env = {k: v for k, v in __import__("os").environ.items() if k not in portable.PINNED_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    assert out.stdout.strip() == "True"  # a reader's process keeps -march=native


def test_the_c_sphere_kernel_built_for_this_processor_and_for_avx2_gives_the_reference_flow():
    """Unpinned, the symmetric kernel is built with -march=native (or AVX2 code) and -fno-trapping-math, which
    vectorises USA's clamped exponential; its flow must still be the float64 reference flow to float32 rounding."""
    code = """
import torch
from energylab.flows import FlowConfig, preset_weights, simulate
from energylab.sphere import random_tokens
x = random_tokens(1, 300, 3, seed=0)
err = 0.0
for normalized in (True, False):
    cfg = dict(beta=1.0, normalized=normalized, step=0.01, steps=50)
    a = simulate(x.float(), preset_weights("identity", 3, dtype=torch.float32), FlowConfig(**cfg, fused=True)).x[-1]
    b = simulate(x, preset_weights("identity", 3), FlowConfig(**cfg)).x[-1]
    err = max(err, float((a.double() - b).abs().max()))
print(err)
"""
    base = {k: v for k, v in __import__("os").environ.items() if k not in portable.PINNED_ENV}
    for extra in ({}, {"ATEN_CPU_CAPABILITY": "avx2"}):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                             env={**base, **extra})
        assert float(out.stdout.strip()) < 1e-5, (extra, out.stdout)
