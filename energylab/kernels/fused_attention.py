"""The tiled attention kernels with their tile loops in C: the CPU fast path of the expressive, sigmoid and
bi-softmax layers outside the book's pinned processes (issue 55).

:mod:`energylab.kernels.attention` loops over score tiles in Python, with one ATen op per elementwise step. On an
Intel Xeon with AVX-512 that left the layers at 1.4-1.9x SDPA, whose fused kernel does each tile's elementwise
work in one pass while the tile is in the cache (profile, one thread, N = 1,024: matrix products 39% of the
expressive layer's time, the tile's elementwise passes 29%, the Python loop 23%). The C functions of
``fused_attention.c`` keep the matrix products (the BLAS gemm PyTorch itself calls: MKL's ``sgemm_``/``dgemm_``,
found in libtorch_cpu) and fuse the rest: one pass over the tile per elementwise step of the derivation, no
Python per tile, and the inputs read in place through their strides (the heads of the qkv projection need no
copy).

Where it runs: float32 and float64 on the CPU, with no mask or the causal one, when the process is not pinned
(:func:`energylab.portable.unpinned`). A pinned process (the book's notebooks, their comparison) keeps the ATen
tiled kernels, whose bits are pinned on every processor; this kernel is compiled with ``-march=native``, so the
order of its vector sums follows the processor. The exponential is the base-2 polynomial of
:mod:`energylab.kernels.sphere_symmetric` (within about one unit in the last place). Both passes are checked
against the tiled kernels and by ``gradcheck`` in float64 (``tests/layers/test_fused_attention.py``), and listed
as fast paths ``"fused-expressive"``, ``"fused-bisoftmax"``, ``"fused-sigmoid"`` and ``"fused-newton"`` of
:data:`energylab.kernels.FAST_PATHS`.

Bi-softmax with all N rows in one tile (N up to a few hundred: every Sudoku board) takes a second route: its score
matrix is symmetric, so row i's max and sum are column i's, and the softmax passes run along the rows of memory,
a vector of columns at a time, giving Aᵀ in place of A (at N = 16, d_h = 16 the per-row horizontal sums of the
first route had cost more than the matrix products: 1.08 ms against 0.63 ms forward and backward for 256 heads).

The symmetric forms (sigmoid, bi-softmax) can take their rows un-normalised and RMS-normalise them inside the kernel
(``eps``), writing their output and input gradient in the input's layout: Hyper-SET's projections, heads of one
(B, N, d) tensor, then need neither ATen's RMSNorm nor a copy between layouts. Measured here (Sapphire Rapids, one
thread, in one process): ATen's RMSNorm of the (B, N, H, d_h) projection and its backward through the transposed
gradient had cost about 0.58 ms of a Hyper-SET iteration's 7.6 ms at the 4x4 Sudoku size (B = 64, N = 16, d = 64);
``results/bench/hyperset-*.json`` has the iteration against the Transformer block.

Threads: the batch is split into as many slices as torch has threads, each run by the C code on a thread of its
own with a one-thread gemm (the batch elements are independent, so the numbers do not depend on the thread count).
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import os
import platform

import torch

from energylab import kernels
from energylab._checks import check_positive
from energylab.kernels import sphere_symmetric

__all__ = ["TILE", "MIN_ROWS", "compile_flags", "rows_per_tile", "gemm_address", "library", "problem", "usable",
           "expressive", "sigmoid", "bisoftmax", "newton"]

TILE = 2**17  # elements of one score tile; two or three buffers of them (0.5 MiB each in float32) stay in L2
MIN_ROWS = 16  # the fewest query rows per tile (fewer starve the gemm)
_SOURCE = os.path.join(os.path.dirname(__file__), "fused_attention.c")
_DTYPES = {torch.float32: ("float", "sgemm_", ctypes.c_float), torch.float64: ("double", "dgemm_", ctypes.c_double)}


def rows_per_tile(n: int) -> int:
    """Query rows of one score tile against n keys: about TILE elements, at least 16 rows (fewer starve the gemm)."""
    return max(MIN_ROWS, min(n, TILE // max(1, n)))


@functools.cache
def _libtorch() -> ctypes.CDLL:
    """libtorch_cpu, already loaded by torch: the BLAS (MKL) that torch links lives in it."""
    return ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))


@functools.cache
def gemm_address(dtype: torch.dtype) -> int:
    """The address of the BLAS gemm PyTorch links (``sgemm_`` or ``dgemm_`` in libtorch_cpu); raises if absent."""
    name = _DTYPES[dtype][1]
    try:
        return ctypes.cast(getattr(_libtorch(), name), ctypes.c_void_p).value
    except AttributeError:
        raise RuntimeError(f"this PyTorch build exports no {name} (no MKL)") from None


_P, _I = ctypes.c_void_p, ctypes.c_int
# name: argument types after (gemm, B, H, N, d_h); r = the dtype's real
_SIGNATURES = {
    "expressive_forward": lambda r: [_I, r, _I] + [_P] * 6 + [_P, _P, r, _P],
    "expressive_backward": lambda r: [_I, r, _I] + [_P] * 6 + [_P, _P, _P, _P, r, _P, _P, _P, _P],
    "sigmoid_forward": lambda r: [r, _I, _P, _P, _I, r] + [_P] * 5,
    "sigmoid_backward": lambda r: [r, _I] + [_P] * 8,
    "bisoftmax_forward": lambda r: [r, _I, _P, _P, _I, r] + [_P] * 6,
    "bisoftmax_backward": lambda r: [r, _I] + [_P] * 9,
    "newton_forward": lambda r: [_I, _I] + [_P] * 12,
    "newton_backward": lambda r: [_I, _I] + [_P] * 19,
}


def c_source(dtype: torch.dtype) -> str:
    """The C file for ``dtype``: its real type, the exponential of :mod:`sphere_symmetric`, fused_attention.c."""
    ctype = _DTYPES[dtype][0]
    with open(_SOURCE, encoding="utf-8") as f:
        body = f.read()
    return (f"#include <stdint.h>\n#include <string.h>\ntypedef {ctype} real;\n"
            f"{sphere_symmetric.exp2_functions(dtype)}\n{body}")


def compile_flags() -> tuple[str, ...]:
    """The C compiler's flags: :func:`sphere_symmetric.flags` (the pinned baseline in a pinned process; else the
    processor's, or the target of ATEN_CPU_CAPABILITY), 512-bit vectors preferred on x86-64 (measured here,
    Sapphire Rapids: GCC's default of 256 bits left bi-softmax's exponentials 7% slower at N = 1,024), and no
    trapping math, which lets GCC vectorise the exponential's float selects without AVX-512's masks (with AVX2
    code the sigmoid pass had stayed scalar: 1.81x SDPA at N = 1,024, 1.01x with it)."""
    flags = list(sphere_symmetric.flags())
    if platform.machine() in ("x86_64", "AMD64"):
        flags.append("-mprefer-vector-width=512")
    if "-fno-trapping-math" not in flags:
        flags.append("-fno-trapping-math")
    return tuple(flags)


@functools.cache
def library(dtype: torch.dtype) -> ctypes.CDLL:
    """The compiled kernels for ``dtype`` (once per process, about a second); raises if they cannot be built."""
    gemm_address(dtype)  # no BLAS: nothing to build
    loaded = sphere_symmetric.build(c_source(dtype), compile_flags())
    real = _DTYPES[dtype][2]
    for name, args in _SIGNATURES.items():
        fn = getattr(loaded, name)
        fn.argtypes = [_P, _I, _I, _I, _I] + args(real)
        fn.restype = None
    return loaded


_FAILED: dict[torch.dtype, str] = {}  # why the library could not be built, per dtype (then never retried)


def problem(x: torch.Tensor, name: str = "fused-expressive") -> str | None:
    """Why fast path ``name`` (one of the four ``fused-*`` rows of :data:`energylab.kernels.FAST_PATHS`) cannot
    serve ``x`` here, or None: the dtype, the device, or a failed build (which warns once)."""
    reason = kernels.unsupported(name, x)
    if reason is not None:
        return reason
    if x.dtype not in _FAILED:
        try:
            library(x.dtype)
        except Exception as err:  # noqa: BLE001 - any build failure: the tiled kernels compute the same numbers
            _FAILED[x.dtype] = f"{type(err).__name__}: {err}"
            kernels.fall_back(name, f"it could not be built ({_FAILED[x.dtype]})",
                              instead="the ATen tiled kernels", stacklevel=4)
    return _FAILED.get(x.dtype)


def usable(x: torch.Tensor, name: str = "fused-expressive") -> bool:
    """Whether the layers hand ``x`` to fast path ``name``: :func:`kernels.tiled`, a process that is not pinned
    (see the module docstring), and :func:`problem` None."""
    from energylab import portable

    return kernels.tiled(x) and bool(portable.unpinned()) and problem(x, name) is None


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


def _strides(t: torch.Tensor):
    """The (batch, head, row) strides of a (B, H, N, d_h) tensor, as a C long[3] (kept alive by the caller)."""
    if t.stride(-1) != 1:
        raise ValueError("the fused kernels need a contiguous last dimension")
    return (ctypes.c_long * 3)(*t.stride()[:3])


def _head_views(*ts):
    """Each (B, H, N, d_h) tensor as it is when its last dimension is contiguous, else a contiguous copy."""
    return [t if t.stride(-1) == 1 else t.contiguous() for t in ts]


@functools.cache
def _threads_setter():
    """MKL's ``MKL_Set_Num_Threads_Local`` (this thread's gemm threads), or None where libtorch_cpu has none."""
    fn = getattr(_libtorch(), "MKL_Set_Num_Threads_Local", None)  # the C entry (the lowercase one is Fortran)
    if fn is not None:
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
    return fn


@functools.cache
def _pool(workers: int, pid: int) -> concurrent.futures.ThreadPoolExecutor:
    """A pool per process (``pid``): a forked child inherits the parent's pool object but none of its threads."""
    return concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="energylab-fused")


def _same_kind(**tensors) -> None:
    """The C code reads every tensor as the first one's dtype, on the CPU: anything else is refused, not misread."""
    given = {k: t for k, t in tensors.items() if t is not None}
    first_name, first = next(iter(given.items()))
    for name, t in given.items():
        if t.dtype != first.dtype or t.device.type != "cpu" or t.dtype not in _DTYPES:
            raise ValueError(f"the fused kernels take float32 or float64 CPU tensors of one dtype; {name} is "
                             f"{t.dtype} on {t.device}, {first_name} {first.dtype} on {first.device}")


def _shapes(heads: dict, per_head: dict | None = None) -> None:
    """Every tensor of ``heads`` (B, H, N, d_h), all of one shape; ``per_head``: name -> (tensor or None, the shape
    it must have). The C code trusts these sizes, so a wrong one is refused here rather than read out of bounds."""
    (first_name, first), *_ = heads.items()
    if first.dim() != 4:
        raise ValueError(f"{first_name} must be (B, H, N, d_h), got shape {tuple(first.shape)}")
    for name, t in heads.items():
        if t.shape != first.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, {first_name} {tuple(first.shape)}; they must match")
    for name, (t, shape) in (per_head or {}).items():
        if t is not None and tuple(t.shape) != shape:
            raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")


def _launch(name: str, dtype: torch.dtype, shape, args, work_numel: int) -> None:
    """C function ``name`` over the batch, split into as many slices as torch has threads (at most B).

    ``args`` follow (gemm, B, H, N, d_h) in the C signature, without the final work buffer: a tensor stands for its
    batch slice's pointer (its first dimension is the batch), anything else is passed as it is. Each slice runs on a
    thread of its own with its own work buffer and one gemm thread (ctypes releases the GIL); the batch elements
    are independent, so the numbers do not depend on the number of threads."""
    B, H, N, dh = shape
    fn, gemm = getattr(library(dtype), name), gemm_address(dtype)

    def run(b0: int, b1: int) -> None:
        # batch slice b0 by pointer arithmetic: a view per tensor cost more than the kernel at N = 17, d_h = 8
        values = [a.data_ptr() + b0 * a.stride(0) * a.element_size() if isinstance(a, torch.Tensor) else a
                  for a in args]
        work = torch.empty(work_numel, dtype=dtype)  # named: it must outlive the call
        fn(gemm, b1 - b0, H, N, dh, *values, work.data_ptr())

    workers = min(B, torch.get_num_threads())
    if workers <= 1:
        return run(0, B)
    setter = _threads_setter()

    def one_gemm_thread(bounds):
        previous = setter(1) if setter is not None else None
        try:
            run(*bounds)
        finally:
            if setter is not None:
                setter(previous)

    cuts = [B * i // workers for i in range(workers + 1)]
    list(_pool(workers, os.getpid()).map(one_gemm_thread, zip(cuts[:-1], cuts[1:])))


class _Expressive(torch.autograd.Function):
    """:class:`energylab.kernels.attention._Expressive` (its derivation) with the tile loop in C."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale):
        q, k, v = _head_views(q, k, v)
        B, H, N, dh = q.shape
        rows = rows_per_tile(N)
        y, norm = q.new_empty(B, H, N, dh), q.new_empty(B, H, N)
        _launch("expressive_forward", q.dtype, q.shape,
                [int(causal), scale, rows, q, _strides(q), k, _strides(k), v, _strides(v), y, norm,
                 torch.finfo(q.dtype).tiny], rows * N)
        ctx.causal, ctx.scale = causal, scale
        ctx.save_for_backward(q, k, v, y, norm)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        q, k, v, y, norm = ctx.saved_tensors
        (grad,) = _head_views(grad)
        B, H, N, dh = q.shape
        rows = rows_per_tile(N)
        dq, dk, dv = (torch.empty_like(y) for _ in range(3))
        _launch("expressive_backward", q.dtype, q.shape,
                [int(ctx.causal), ctx.scale, rows, q, _strides(q), k, _strides(k), v, _strides(v), y, norm, grad,
                 _strides(grad), torch.finfo(q.dtype).tiny, dq, dk, dv], 2 * rows * N + rows * dh + rows)
        return dq, dk, dv, None, None


# the work buffer of each symmetric kernel, in reals: (rows, N, d_h, backward) -> size
_SYMMETRIC_WORK = {
    "sigmoid": lambda rows, N, dh, backward: 2 * rows * N + N * dh if backward else rows * N,
    "bisoftmax": lambda rows, N, dh, backward: (2 * rows * N + rows * dh + rows + 2 * N + N * dh if backward
                                                 else (rows + 2) * N),
}


class _Symmetric(torch.autograd.Function):
    """A symmetric form of Hyper-SET through its C tile loop (``kind``: "sigmoid", as
    :class:`energylab.kernels.attention._Sigmoid`; "bisoftmax", as ``_BiSoftmax``, which also saves A Z), its
    input rows optionally RMS-normalised inside the kernel. The output and the input gradient take the input's
    layout (``empty_like``): for the heads of a (B, N, d) projection, merging them back is a view, not a copy."""

    @staticmethod
    def forward(ctx, z, beta, eps, kind):
        (z,) = _head_views(z)
        N, dh = z.shape[2:]
        rows = rows_per_tile(N)
        rms = eps is not None  # eps None: the rows as they are; else normalised (zn and r saved for the backward)
        zn, rinv = (z.new_empty(z.shape), z.new_empty(z.shape[:3])) if rms else (None, None)
        y = torch.empty_like(z)
        az = z.new_empty(z.shape) if kind == "bisoftmax" else None  # A Z, saved for the backward
        args = [beta, rows, z, _strides(z), int(rms), eps or 0.0, zn, rinv, y, _strides(y)]
        args += [az] if az is not None else []
        _launch(f"{kind}_forward", z.dtype, z.shape, args, _SYMMETRIC_WORK[kind](rows, N, dh, False))
        ctx.beta, ctx.kind, ctx.layout = beta, kind, y.stride()  # y's strides: dense, whatever z's were
        ctx.save_for_backward(zn if rms else z, az, rinv)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        z, az, rinv = ctx.saved_tensors
        (grad,) = _head_views(grad)
        N, dh = z.shape[2:]
        rows = rows_per_tile(N)
        dz = torch.empty_strided(z.shape, ctx.layout, dtype=z.dtype)
        args = ([ctx.beta, rows, z, _strides(z)] + ([az] if az is not None else [])
                + [grad, _strides(grad), rinv, dz, _strides(dz)])
        _launch(f"{ctx.kind}_backward", z.dtype, z.shape, args, _SYMMETRIC_WORK[ctx.kind](rows, N, dh, True))
        return dz, None, None, None


def _opt(t):
    return None if t is None else t.data_ptr()


class _Newton(torch.autograd.Function):
    """:class:`energylab.kernels.attention._Newton` with the tile loop in C; T, T2 (H,), G, G_inv (H, d_h, d_h)."""

    @staticmethod
    def forward(ctx, q, k, T, T2, G, G_inv, causal):
        q, k = _head_views(q, k)
        B, H, N, dh = q.shape
        rows = rows_per_tile(N)
        T, T2, G, G_inv = (None if t is None else t.detach().contiguous() for t in (T, T2, G, G_inv))
        out, kbar, s1 = (torch.empty(B, H, N, dh, dtype=q.dtype) for _ in range(3))
        _launch("newton_forward", q.dtype, q.shape,
                [int(causal), rows, q, _strides(q), k, _strides(k), _ptr(T), _ptr(T2), _opt(G), _opt(G_inv), out,
                 kbar, s1], 2 * rows * N + 2 * rows * dh)
        ctx.causal = causal
        ctx.save_for_backward(q, k, T, T2, G, G_inv, kbar, s1)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        q, k, T, T2, G, G_inv, kbar, s1 = ctx.saved_tensors
        (grad,) = _head_views(grad)
        B, H, N, dh = q.shape
        rows = rows_per_tile(N)
        dq, dk = torch.empty_like(kbar), torch.empty_like(kbar)
        dT, dT2 = q.new_empty(B, H), q.new_empty(B, H)
        dG = None if G is None else q.new_empty(B, H, dh, dh)
        dG_inv = None if G_inv is None else q.new_empty(B, H, dh, dh)
        _launch("newton_backward", q.dtype, q.shape,
                [int(ctx.causal), rows, q, _strides(q), k, _strides(k), _ptr(T), _ptr(T2), _opt(G), _opt(G_inv),
                 kbar, s1, grad, _strides(grad), dq, dk, dT, dT2, dG, dG_inv], 4 * rows * N + 7 * rows * dh + 3 * rows)
        per_head = lambda t: None if t is None else t.sum(0)  # noqa: E731 - the heads' parameters serve every b
        return dq, dk, per_head(dT), per_head(dT2), per_head(dG), per_head(dG_inv), None


def newton(q, k, T, T2, G=None, G_inv=None, causal: bool = False):
    """MHA2nd1st's per-head direction (q − k̄) + b (:func:`energylab.kernels.attention.newton_direction`): q, k
    (B, H, N, d_h) in float32 or float64 on the CPU, any strides; T, T2 (H,) temperatures; G, G_inv (H, d_h, d_h)
    or None (the identity); causal or no mask -> (B, H, N, d_h) contiguous, with gradients for every tensor."""
    _same_kind(q=q, k=k, T=T, T2=T2, G=G, G_inv=G_inv)
    H, dh = q.shape[1], q.shape[-1]
    _shapes({"q": q, "k": k}, {"T": (T, (H,)), "T2": (T2, (H,)), "G": (G, (H, dh, dh)), "G_inv": (G_inv, (H, dh, dh))})
    return _Newton.apply(q, k, T, T2, G, G_inv, bool(causal))


def expressive(q, k, v, causal: bool, scale: float):
    """EA's Σ_k a_mk v_k with a = expressive_weights(scale · q kᵀ) (causal: the lower triangle), q, k, v
    (B, H, N, d_h) in float32 or float64 on the CPU, any strides -> (B, H, N, d_h) contiguous."""
    _same_kind(q=q, k=k, v=v)
    _shapes({"q": q, "k": k, "v": v})
    return _Expressive.apply(q, k, v, bool(causal), float(scale))


def _symmetric(kind: str, z, beta, eps):
    _same_kind(z=z)
    _shapes({"z": z})
    if eps is not None:
        eps = check_positive("eps", eps, allow_zero=True, scalar=True)
    return _Symmetric.apply(z, float(beta), eps, kind)


def sigmoid(z, beta: float, eps: float | None = None):
    """σ'(β Z Zᵀ) Z per head, z (B, H, N, d_h) -> (B, H, N, d_h) in z's layout (as
    :func:`attention.sigmoid_attention`). eps: None, Z as it is; a number ≥ 0, Z = RMSNorm(z) with that ε
    (u/√(mean u² + ε) over d_h), normalised inside the kernel, and the gradient is z's."""
    return _symmetric("sigmoid", z, beta, eps)


def bisoftmax(z, beta: float, eps: float | None = None):
    """(A + Aᵀ) Z, A = softmax_row(β Z Zᵀ) per head, z (B, H, N, d_h) -> (B, H, N, d_h) in z's layout. eps: as
    for :func:`sigmoid`."""
    return _symmetric("bisoftmax", z, beta, eps)
