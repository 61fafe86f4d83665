"""The C tile loops of energylab.kernels.fused_attention (issue 55) against the ATen tiled kernels and autograd.

The tiled kernels are themselves checked against autograd through the catalog's formulas in float64
(tests/layers/test_fast_attention.py); here each fused kernel must give their values (float64, to rounding), their
gradients, and pass ``gradcheck``, with tiles of 3 query rows (so every kernel crosses tile borders), causal and
not, on inputs that are strided views (the heads of a qkv projection, read in place). And: a pinned process keeps
the ATen kernels, the numbers do not depend on the thread count, and a failed build warns once and falls back.
"""
import warnings

import pytest
import torch

from energylab import kernels, portable
from energylab.forms import hyperspherical as hs
from energylab.kernels import attention as fa
from energylab.kernels import fused_attention as fz
from tests.probes import rel, value_and_grads

B, H, N, DH = 2, 3, 11, 5
F64, F32 = torch.float64, torch.float32


@pytest.fixture(autouse=True)
def small_tiles(monkeypatch):
    monkeypatch.setattr(fz, "TILE", 1)
    monkeypatch.setattr(fz, "MIN_ROWS", 3)
    assert fz.rows_per_tile(N) == 3  # tiles of 3, 3, 3, 2 rows


def _randn(seed, *shape, dtype=F64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(dtype)


def _heads(seed, count, dtype=F64):
    """``count`` (B, H, N, d_h) views of one (B, N, count·H·d_h) projection: strided, last dimension contiguous."""
    x = _randn(seed, B, N, count * H * DH, dtype=dtype)
    return [t.unflatten(-1, (H, DH)).transpose(1, 2) for t in x.chunk(count, -1)]


def _flat(t):
    return t.flatten(0, 1)


def _rms(z, eps):
    return hs.rms_normalize(z, eps)


def _per_bh(t):
    return None if t is None else t.expand(B, *t.shape).flatten(0, 1)


def _causal():
    return torch.ones(N, N, dtype=torch.bool).tril()


def _cases(dtype):
    """name: (fused callable, tiled callable, inputs); both callables take the same inputs and give (B, H, N, d_h)."""
    q, k, v = _heads(0, 3, dtype)
    (z,) = _heads(1, 1, dtype)
    T, T2 = (0.5 + _randn(i, H, dtype=dtype).abs() for i in (2, 3))
    W = _randn(4, H, DH, DH, dtype=dtype)
    G, G_inv = W @ W.mT + torch.eye(DH, dtype=dtype), _randn(5, H, DH, DH, dtype=dtype) / DH

    def tiled_expressive(causal, scale):
        return lambda q, k, v: fa.expressive_attention(_flat(q), _flat(k), _flat(v), _causal() if causal else None,
                                                       scale).view(B, H, N, DH)

    def tiled_newton(causal):
        def run(q, k, T, T2, G=None, G_inv=None):
            return fa.newton_direction(_flat(q), _flat(k), _per_bh(T.view(-1, 1, 1)), _per_bh(T2.view(-1, 1, 1)),
                                       _per_bh(G), _per_bh(G_inv), _causal() if causal else None).view(B, H, N, DH)
        return run

    return {
        "expressive": (lambda q, k, v: fz.expressive(q, k, v, False, 0.37), tiled_expressive(False, 0.37), (q, k, v)),
        "expressive-causal": (lambda q, k, v: fz.expressive(q, k, v, True, 1.3), tiled_expressive(True, 1.3),
                              (q, k, v)),
        "sigmoid": (lambda z: fz.sigmoid(z, 0.7), lambda z: fa.sigmoid_attention(_flat(z), 0.7).view_as(z), (z,)),
        "bisoftmax": (lambda z: fz.bisoftmax(z, 0.7), lambda z: fa.bisoftmax_attention(_flat(z), 0.7).view_as(z),
                      (z,)),
        # the rows RMS-normalised inside the kernel (Hyper-SET's projections), against RMSNorm then the tiled kernel
        "sigmoid-rms": (lambda z: fz.sigmoid(z, 0.7, eps=0.3),
                        lambda z: fa.sigmoid_attention(_flat(_rms(z, 0.3)), 0.7).view_as(z), (z,)),
        "bisoftmax-rms": (lambda z: fz.bisoftmax(z, 0.7, eps=0.3),
                          lambda z: fa.bisoftmax_attention(_flat(_rms(z, 0.3)), 0.7).view_as(z), (z,)),
        "newton": (lambda *a: fz.newton(*a), tiled_newton(False), (q, k, T, T2, G, G_inv)),
        "newton-identity-causal": (lambda q, k, T, T2: fz.newton(q, k, T, T2, causal=True), tiled_newton(True),
                                   (q, k, T, T2)),
    }


@pytest.mark.parametrize("name", list(_cases(F64)))
def test_fused_equals_the_tiled_kernel_in_float64(name):
    fused, tiled, inputs = _cases(F64)[name]
    weight = _randn(9, B, H, N, DH)
    y, grads = value_and_grads(fused, inputs, weight)
    y_ref, grads_ref = value_and_grads(tiled, inputs, weight)
    assert rel(y, y_ref) < 1e-13
    assert len(grads) == len(inputs)
    for g, g_ref in zip(grads, grads_ref):
        assert rel(g, g_ref) < 1e-12


@pytest.mark.parametrize("eps", [None, 1e-6])
@pytest.mark.parametrize("n", [1, 2, N])
def test_bisoftmax_in_one_tile_equals_the_tiled_kernel(monkeypatch, n, eps):
    """With all N rows in one tile the C loop takes its other route (the softmax passes along the columns of the
    symmetric scores, giving Aᵀ): same values and gradients, and gradcheck; with and without the RMSNorm inside
    (Hyper-SET's route, at every Sudoku size)."""
    monkeypatch.setattr(fz, "TILE", 2**17)
    assert fz.rows_per_tile(n) >= n
    (z,) = (t[:, :, :n] for t in _heads(1, 1))
    weight = _randn(9, B, H, n, DH)
    norm = (lambda z: z) if eps is None else (lambda z: _rms(z, eps))
    y, (g,) = value_and_grads(lambda z: fz.bisoftmax(z, 0.7, eps), (z,), weight)
    y_ref, (g_ref,) = value_and_grads(lambda z: fa.bisoftmax_attention(_flat(norm(z)), 0.7).view_as(z), (z,), weight)
    assert rel(y, y_ref) < 1e-13 and rel(g, g_ref) < 1e-12
    assert torch.autograd.gradcheck(lambda z: fz.bisoftmax(z, 0.7, eps), [z.detach().clone().requires_grad_(True)])


@pytest.mark.parametrize("kind", ["sigmoid", "bisoftmax"])
def test_the_symmetric_kernels_answer_in_the_layout_of_their_input(kind):
    """The heads of a (B, N, H·d_h) projection go in as a view; the output and the projection's gradient come
    back in that layout, so merging the heads (and the projection's backward) needs no copy."""
    x = _randn(3, B, N, H * DH).requires_grad_(True)
    z = x.view(B, N, H, DH).transpose(1, 2)
    y = getattr(fz, kind)(z, 0.7, 1e-6)
    assert y.shape == z.shape and y.stride() == z.stride()
    (g,) = torch.autograd.grad(y.square().sum(), x)
    assert g.is_contiguous()
    strided = _randn(4, B, N, 2 * H * DH)[..., : H * DH].view(B, N, H, DH).transpose(1, 2)  # not dense: gaps
    y = getattr(fz, kind)(strided, 0.7)
    assert y.transpose(1, 2).is_contiguous()  # dense, in the heads' order of the input
    assert rel(y, getattr(fz, kind)(strided.contiguous(), 0.7)) == 0


@pytest.mark.parametrize("name", list(_cases(F64)))
def test_fused_gradcheck(name):
    fused, _, inputs = _cases(F64)[name]
    assert torch.autograd.gradcheck(fused, [t.detach().clone().requires_grad_(True) for t in inputs])


@pytest.mark.parametrize("name", list(_cases(F64)))
def test_float32_within_the_fast_path_tolerance(name):
    fused, _, inputs = _cases(F32)[name]
    _, tiled, inputs64 = _cases(F64)[name]
    weight = _randn(9, B, H, N, DH)
    y, grads = value_and_grads(fused, inputs, weight)
    y_ref, grads_ref = value_and_grads(tiled, inputs64, weight)
    assert y.dtype == F32 and rel(y, y_ref) < kernels.FAST_PATHS["fused-expressive"].tolerance[F32]
    for g, g_ref in zip(grads, grads_ref):
        assert rel(g, g_ref) < 1e-4


def test_expressive_zero_scores_give_zeros_not_nan():
    q, k, v = _heads(0, 3)
    q = torch.zeros_like(q).requires_grad_(True)
    y = fz.expressive(q, k, v, False, 1.0)
    assert torch.equal(y, torch.zeros_like(y))
    (grad,) = torch.autograd.grad(y.sum(), q)
    assert torch.isfinite(grad).all()


@pytest.mark.parametrize("kernel", ["expressive", "bisoftmax-one-tile"])
def test_numbers_do_not_depend_on_the_thread_count(monkeypatch, kernel):
    q, k, v = (t.detach().requires_grad_(True) for t in _heads(0, 3, F32))
    if kernel == "bisoftmax-one-tile":
        monkeypatch.setattr(fz, "TILE", 2**17)  # all N rows in one tile: the column route
    run = (lambda: fz.expressive(q, k, v, True, 0.5)) if kernel == "expressive" else (lambda: fz.bisoftmax(q, 0.5))
    out = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)  # restored by conftest's torch_process_state
        y = run()
        out[threads] = (y.detach(), torch.autograd.grad(y.square().sum(), (q, k, v), allow_unused=True))
    assert torch.equal(out[1][0], out[2][0])
    assert out[1][1][0] is not None  # bi-softmax reads q only: k's and v's gradients are None at both counts
    assert all(torch.equal(a, b) if a is not None else b is None for a, b in zip(out[1][1], out[2][1]))


def test_pinned_processes_keep_the_aten_tiled_kernels(monkeypatch):
    """The book's pinned processes must not take the C loops (compiled for this processor's vector width)."""
    x = torch.zeros(1, 2, 3)
    monkeypatch.setattr(portable, "unpinned", lambda environ=None: [])
    assert not fz.usable(x)
    monkeypatch.setattr(portable, "unpinned", lambda environ=None: ["ATEN_CPU_CAPABILITY"])
    assert fz.usable(x)
    assert not fz.usable(x.half()) and not fz.usable(x.to("meta"))
    with kernels.reference_paths():
        assert not fz.usable(x)


def test_compile_flags_follow_the_instruction_set_asked_for(monkeypatch):
    """Both C kernels (these and the sphere flows') are built for the instruction set a bench run asks for."""
    from energylab.kernels import sphere_symmetric

    monkeypatch.setattr(portable, "unpinned", lambda environ=None: ["OMP_NUM_THREADS"])
    for capability, march in (("avx2", "-march=x86-64-v3"), ("avx512", "-march=x86-64-v4")):
        monkeypatch.setenv("ATEN_CPU_CAPABILITY", capability)
        for flags in (fz.compile_flags(), sphere_symmetric.flags()):
            assert march in flags and "-march=native" not in flags and "-fno-trapping-math" in flags
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    assert "-march=native" in fz.compile_flags() and sphere_symmetric.flags() == sphere_symmetric.FLAGS
    monkeypatch.setattr(portable, "unpinned", lambda environ=None: [])  # pinned: the baseline, whatever is asked
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert sphere_symmetric.flags() == sphere_symmetric.PINNED_FLAGS


def test_a_failed_build_warns_once_and_the_layer_runs_the_tiled_kernel(monkeypatch):
    from energylab.layers import SigmoidAttention

    def broken(dtype):
        raise RuntimeError("cc failed: no such thing")

    monkeypatch.setattr(fz, "library", broken)
    monkeypatch.setattr(fz, "_FAILED", {})
    monkeypatch.setattr(portable, "unpinned", lambda environ=None: ["OMP_NUM_THREADS"])
    layer = SigmoidAttention(6, 2).double()
    x = _randn(7, 1, N, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y, y_again = layer(x), layer(x)
    said = [str(w.message) for w in caught if issubclass(w.category, kernels.FastPathWarning)]
    assert len(said) == 1 and "cc failed" in said[0] and "fused-sigmoid" in said[0]
    with kernels.reference_paths():
        want = layer(x)
    assert rel(y, want) < 1e-13 and torch.equal(y, y_again)


@pytest.mark.parametrize("module, cls", [("hyperspherical", "BiSoftmaxAttention"),
                                         ("hyperspherical", "SigmoidAttention"), ("expressive", "ExpressiveAttention"),
                                         ("newton", "MHA2nd1st"), ("hyperset", "HyperSETLayer")])
def test_each_layer_takes_the_c_loop_unpinned_with_the_same_numbers(monkeypatch, module, cls):
    """Unpinned, the layers route through the C loops (a spy counts the calls), and their values and gradients
    equal those of their pinned route (the ATen tiled kernels; Hyper-SET's one-exponential bi-softmax)."""
    import importlib

    layer_cls = getattr(importlib.import_module(f"energylab.layers.{module}"), cls)
    torch.manual_seed(0)
    layer = layer_cls(12, 3).double()
    x = _randn(8, 2, N, 12).requires_grad_(True)
    call = (lambda: layer(x, None, t=2, x0=x.detach())) if cls == "HyperSETLayer" else (lambda: layer(x))

    def run(unpinned):
        monkeypatch.setattr(portable, "unpinned", lambda environ=None: ["OMP_NUM_THREADS"] if unpinned else [])
        layer.zero_grad()
        y = call()
        grads = torch.autograd.grad(y.square().sum(), [x, *layer.parameters()], allow_unused=True)
        return y.detach(), grads

    calls = []
    for name in ("expressive", "sigmoid", "bisoftmax", "newton"):
        original = getattr(fz, name)
        monkeypatch.setattr(fz, name, lambda *a, _f=original, **k: calls.append(1) or _f(*a, **k))
    if getattr(layer_cls, "_fused", None) is not None:  # the hyperspherical layers hold theirs as a class attribute
        original = layer_cls._fused
        monkeypatch.setattr(layer_cls, "_fused", staticmethod(lambda *a, _f=original: calls.append(1) or _f(*a)))
    y_fused, g_fused = run(True)
    assert calls, "the layer did not take the C loop"
    calls.clear()
    y_pinned, g_pinned = run(False)
    assert not calls
    assert rel(y_fused, y_pinned) < 1e-12
    for a, b in zip(g_fused, g_pinned):
        if b is not None and b.norm() > 0:
            assert rel(a, b) < 1e-10


def test_bad_inputs_are_refused_before_the_c_code_reads_them():
    q, k, v = _heads(0, 3)
    with pytest.raises(ValueError, match="one dtype"):
        fz.expressive(q, k.float(), v, False, 1.0)
    with pytest.raises(ValueError, match="must match"):
        fz.expressive(q, k[:, :, :5], v, False, 1.0)
    with pytest.raises(ValueError, match=r"\(B, H, N, d_h\)"):
        fz.sigmoid(q[0], 1.0)
    with pytest.raises(ValueError, match="T must have shape"):
        fz.newton(q, k, torch.ones(H + 1, dtype=F64), torch.ones(H, dtype=F64))
    with pytest.raises(ValueError, match="float32 or float64"):
        fz.bisoftmax(q.half(), 1.0)
