"""Every fallback of a fast path falls back (issue 39): one FastPathWarning, the reference path's numbers.

Builds are per process (the C kernel and torch.compile's graphs are cached in memory, inductor's kernels on disk),
so each broken environment runs in a fresh interpreter with its own empty TORCHINDUCTOR_CACHE_DIR: no compiler
on the PATH, a compiler that fails, cache folders that cannot be written. Unsupported dtypes and devices run here.
"""
import contextlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from energylab import flows, kernels
from energylab.sphere import random_tokens

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import json, sys, tempfile, warnings
if sys.argv[1]:
    tempfile.tempdir = sys.argv[1]  # the folder every temporary file goes to (the C kernel's build included)
import torch
from energylab import flows, kernels
from energylab.sphere import random_tokens
out = {}
for preset in ("identity", "random"):  # fused_way: "symmetric" (the C kernel), "fused" (torch.compile)
    x0 = random_tokens(1, 6, 3, seed=0, dtype=torch.float32)
    w = flows.preset_weights(preset, 3, dtype=torch.float32)
    cfg = flows.FlowConfig(beta=1.5, steps=3, fused=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = flows.simulate(x0, w, cfg).x
    want = flows.simulate(x0, w, flows.FlowConfig(beta=1.5, steps=3)).x
    out[preset] = {"way": flows.fused_way(x0, w, cfg), "equal": torch.equal(got, want),
                   "err": float((got - want).abs().max()),
                   "said": [str(c.message) for c in caught if issubclass(c.category, kernels.FastPathWarning)]}
if "ensemble" in sys.argv[2:]:
    from torch import nn
    from energylab.engine.ensemble import train_ensemble
    from energylab.engine.train import TrainConfig

    def batches(step, seed):
        g = torch.Generator().manual_seed(100 * seed + step)
        return torch.randn(4, 3, generator=g), torch.randn(4, 2, generator=g)

    def loss_fn(model, batch):
        return ((model(batch[0]) - batch[1]) ** 2).mean(), {}

    def run(compile):
        cfg = TrainConfig(steps=3, lr=0.1, log_every=1, progress=False, compile=compile, device="cpu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = train_ensemble(lambda s: nn.Linear(3, 2), loss_fn, batches, cfg, [0, 1], vmapped=True)
        said = [str(c.message) for c in caught if issubclass(c.category, kernels.FastPathWarning)]
        return [h.curves["loss"] for h in result.histories], said

    (got, said), (want, _) = run(True), run(False)
    out["ensemble"] = {"equal": got == want, "said": said}
print(json.dumps(out))
"""


def _run(tmp_path, env_changes: dict, tempdir: str = "", *extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}  # empty: no kernel built by an earlier run
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    done = subprocess.run([sys.executable, "-c", _SCRIPT, tempdir, *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _fell_back(result: dict, *causes: str) -> None:
    """One warning naming every cause, and bit for bit the reference path's tokens."""
    assert result["equal"], result
    assert len(result["said"]) == 1, result["said"]
    assert all(cause in result["said"][0] for cause in causes), result["said"]


def test_no_compiler(tmp_path):
    bare = tmp_path / "bin"  # a PATH without cc, gcc, g++, clang (the interpreter is called by its full path)
    bare.mkdir()
    out = _run(tmp_path, {"PATH": str(bare), "CC": None, "CXX": None}, "", "ensemble")
    assert out["identity"]["way"] == "symmetric" and out["random"]["way"] == "fused"
    _fell_back(out["identity"], "no C compiler", "torch.compile could not build")
    _fell_back(out["random"], "torch.compile could not build")
    _fell_back(out["ensemble"], "'ensemble-compiled'", "torch.compile failed")


def test_broken_compiler(tmp_path):
    out = _run(tmp_path, {"CC": "/bin/false", "CXX": "/bin/false"})
    _fell_back(out["identity"], "/bin/false failed", "torch.compile could not build")
    _fell_back(out["random"], "torch.compile could not build")


def test_unwritable_cache_folders(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = _run(tmp_path, {"TORCHINDUCTOR_CACHE_DIR": str(blocker / "inductor"), "TMPDIR": str(blocker / "tmp")},
               str(blocker / "tmp"))
    _fell_back(out["identity"], "symmetric sphere step could not be built", "TORCHINDUCTOR_CACHE_DIR")
    _fell_back(out["random"], "TORCHINDUCTOR_CACHE_DIR")


def test_unwritable_inductor_cache_alone_keeps_the_c_kernel(tmp_path):
    """A TMPDIR that is no folder is skipped by tempfile (torch and the C build use the next candidate): the C
    kernel still runs, silently; only the compiled step falls back."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = _run(tmp_path, {"TORCHINDUCTOR_CACHE_DIR": str(blocker / "inductor"), "TMPDIR": str(blocker / "tmp")})
    assert out["identity"]["said"] == [] and out["identity"]["err"] < 1e-5  # the C kernel ran: its own rounding
    _fell_back(out["random"], "TORCHINDUCTOR_CACHE_DIR")


@pytest.mark.parametrize("dtype", [torch.float16])  # bfloat16 tokens are off the sphere by 4e-3: refused before
def test_unsupported_dtype_runs_the_reference_step(dtype):
    x0 = random_tokens(1, 6, 3, seed=1).to(dtype)
    w = flows.preset_weights("identity", 3).to(x0)
    cfg = flows.FlowConfig(beta=1.0, steps=3, fused=True)
    assert flows.fused_way(x0, w, cfg) == "unfused"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = flows.simulate(x0, w, cfg).x
    said = [c for c in caught if issubclass(c.category, kernels.FastPathWarning)]
    assert len(said) == 1 and str(dtype) in str(said[0].message)
    assert torch.equal(got, flows.simulate(x0, w, flows.FlowConfig(beta=1.0, steps=3)).x)


def test_unsupported_device_is_routed_before_any_kernel():
    """No second device here: the routing decision itself, on a meta tensor (what fused_way consults first)."""
    x = torch.zeros(1, 4, 3, device="meta")
    assert "meta" in kernels.unsupported("sphere-fused", x)
    assert "meta" in kernels.unsupported("sphere-symmetric", x)
    assert "cpu" in kernels.unsupported("flex-expressive", torch.zeros(1))


def test_autograd_routes_to_the_reference_step_with_one_warning():
    x0 = random_tokens(1, 5, 3, seed=2).requires_grad_(True)
    w = flows.preset_weights("identity", 3)
    cfg = flows.FlowConfig(beta=1.0, steps=4, fused=True)
    assert flows.fused_way(x0, w, cfg) == "unfused" and flows.fused_way(x0.detach(), w, cfg) == "symmetric"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (g,) = torch.autograd.grad(flows.simulate(x0, w, cfg).x[-1][..., 0].sum(), x0)
    assert len([c for c in caught if issubclass(c.category, kernels.FastPathWarning)]) == 1
    (want,) = torch.autograd.grad(flows.simulate(x0, w, flows.FlowConfig(beta=1.0, steps=4)).x[-1][..., 0].sum(), x0)
    assert torch.equal(g, want) and float(want.abs().max()) > 0.1  # a real gradient, not the identity's


def test_cache_problem_names_the_folder(monkeypatch, tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(blocker / "x"))
    assert "TORCHINDUCTOR_CACHE_DIR" in kernels.cache_problem()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "ok"))
    assert kernels.cache_problem() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kernels.unsupported("sphere-fused", torch.zeros(1)) is None


def test_compiled_kernels_are_cached_per_instruction_set(monkeypatch, tmp_path):
    """Inductor's cache is not keyed on ATEN_CPU_CAPABILITY (a pinned run's scalar kernels were reused unpinned, an
    AVX2 run's crashed an AVX-512 one): each instruction set gets its own folder, unless the user named one."""
    capability = torch.backends.cpu.get_cpu_capability().lower()
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    kernels.use_capability_cache()
    chosen = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert chosen.endswith(f"-{capability}") and "torchinductor" in chosen
    assert kernels.inductor_cache_dir("avx2") == chosen + "-avx2"  # the variable is set now: a folder beside it
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    kernels.use_capability_cache()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")  # the user's folder is kept
    assert kernels.inductor_cache_dir("avx2") == str(tmp_path / "mine") + "-avx2"
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    assert kernels.cache_problem() is None and os.environ["TORCHINDUCTOR_CACHE_DIR"].endswith(f"-{capability}")


def test_flex_route_falls_back_to_the_tiled_kernel_once(monkeypatch):
    """ExpressiveAttention's CUDA route when flex cannot be built: one warning, then the tiled kernel's numbers
    (the row's device list is widened to the CPU so that the route is taken here)."""
    import dataclasses

    from energylab import layers as M
    from energylab.kernels import attention as fa

    torch.manual_seed(0)
    layer, x = M.ExpressiveAttention(6, 2, causal=True), torch.randn(2, 5, 6)
    want = layer(x)  # CPU: the tiled kernel
    row = dataclasses.replace(kernels.FAST_PATHS["flex-expressive"], devices=("cpu",))
    monkeypatch.setitem(kernels.FAST_PATHS, "flex-expressive", row)
    monkeypatch.setattr(fa, "_FLEX_FAILED", [])

    def no_flex():
        raise RuntimeError("no Triton here")

    monkeypatch.setattr(fa, "_compiled_flex", no_flex)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = layer(x), layer(x)  # the second call does not try again
    said = [str(c.message) for c in caught if issubclass(c.category, kernels.FastPathWarning)]
    assert len(said) == 1 and "no Triton here" in said[0] and "'tiled-expressive'" in said[0]
    assert torch.equal(first, want) and torch.equal(second, want)


# ----------------------------------------------------------------------------- float16 (issue 47)
def _float16_layer(cls, seed=1, **kwargs):
    from energylab import layers as M

    torch.manual_seed(seed)
    return getattr(M, cls)(64, 4, **kwargs)


def test_expressive_attention_in_float16_falls_back_to_the_finite_reference_path():
    """Scores above 256 (paper 001's scale 1, tokens of norm ~130) overflowed s² in the tiled kernel: NaN values
    and gradients where the reference path, which clamps s², is finite. Now one warning and the reference path."""
    layer = _float16_layer("ExpressiveAttention", causal=True, scale=1.0).half()
    x = (16 * torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(0))).half().requires_grad_(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = layer(x)
    said = [str(c.message) for c in caught if issubclass(c.category, kernels.FastPathWarning)]
    assert len(said) == 1 and "'tiled-expressive'" in said[0] and "not torch.float16" in said[0]
    with kernels.reference_paths():
        want = layer(x)
    assert torch.equal(y, want) and bool(torch.isfinite(y).all())
    (grad,) = torch.autograd.grad(y.float().sum(), x)
    assert bool(torch.isfinite(grad).all())


def test_tiled_expressive_kernel_refuses_dtypes_it_cannot_serve():
    from energylab.kernels import attention as fa

    q = torch.ones(1, 2, 2)
    with pytest.raises(ValueError, match=r"^q has dtype torch.float16, .*accepted dtypes: torch.bfloat16, "
                                         r"torch.float32, torch.float64$"):
        fa.expressive_attention(q.half(), q.half(), q.half())
    with pytest.raises(ValueError, match=r"^v has dtype torch.int64"):
        fa.expressive_attention(q, q, q.long())
    assert torch.equal(fa.expressive_attention(q, q, q), q)  # the float32 kernel as before


@pytest.mark.parametrize("cls", ["MHA2nd1st", "MHA2nd1stCorrected"])
def test_mha2nd1st_in_float16_is_finite_on_both_routes(cls):
    """b_h is cubic in q and k: in float16 it overflowed to NaN on both routes, without a message. Now the direction
    is computed in float32; the layer's values are float32's up to float16's rounding of the projections."""
    x = 16 * torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(0))
    layer = _float16_layer(cls)
    with torch.no_grad():
        want = layer(x)
        layer.half()
        fast = layer(x.half())
        with kernels.reference_paths():
            plain = layer(x.half())
    assert fast.dtype == torch.float16 and torch.equal(fast, plain)
    assert float((fast.float() - want).norm() / want.norm()) < 0.03


def test_mha2nd1st_direction_beyond_float16_is_refused_with_a_message():
    x = (128 * torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(0))).half()
    layer = _float16_layer("MHA2nd1st").half()
    for route in (contextlib.nullcontext(), kernels.reference_paths()):
        with route, pytest.raises(ValueError, match=r"^x: MHA2nd1st's direction .* beyond float16's largest value "
                                                   r"65504; run the layer in float32, float64 or bfloat16$"):
            layer(x)
