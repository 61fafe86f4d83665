"""Euler steps of SA and USA that compute each exponential once for two pairs: the fast path of ``fused=True``.

When every head's score matrix A_h = Q_hᵀK_h is symmetric (the identity, symmetric and antisymmetric presets of
:mod:`energylab.flows`: then ⟨Q_h x_i, K_h x_j⟩ = ⟨Q_h x_j, K_h x_i⟩) and there is no causal mask, the weights

    w_{h,ij} = exp(β x_iᵀ A_h x_j − c_h)

with one shift c_h per head (not per row) form a symmetric matrix, and each exponential serves two pairs: the loop
runs over i ≤ j only and adds w_{h,ij} [V_h x_j, 1] to token i's sums and w_{h,ij} [V_h x_i, 1] to token j's. That
halves the exponentials, which are most of the work once d = 3 (:mod:`energylab.kernels.sphere_fused` spends about 1
ns per ordered pair). The softmax is unchanged by the shift (it cancels in w / Z), so the result
is the same flow up to rounding.

The shift. c_h = β max_i ‖Q_h x_i‖ max_j ‖K_h x_j‖ ≥ β⟨Q_h x_i, K_h x_j⟩ for all pairs (Cauchy–Schwarz), so no
exponential overflows. For unit tokens it is at most β‖Q_h‖₂‖K_h‖₂, while each row's largest score is at least
β⟨Q_h x_i, K_h x_i⟩ ≥ −β‖Q_h‖₂‖K_h‖₂: the gap is at most 2β‖Q_h‖₂‖K_h‖₂, the bound that
:func:`energylab.kernels.sphere_fused.shift_is_safe` checks for the per-row shift, so the same check covers this
one. USA needs no shift (its overflow is reported by the caller).

The kernel. A scatter to token j is not a reduction that ``torch.compile`` can fuse with the row sums (it
materialises the weights instead: measured 0.84 ms per step at 1,024 tokens against 1.04 for the unsymmetric fused
step), so the step is a small C function, written out by :func:`c_source` for the dimension and dtype, compiled
once per process with the system's C compiler (the one ``torch.compile`` needs too; about 0.5 s) and called through
``ctypes``. Its inner loop takes ``ROWS`` rows i at a time against a vector of columns j, so that token j's sums
are read and written once per ``ROWS`` rows. The exponential is computed in base 2, 2^z with z = β log₂(e) s − c:
z = k + f with k the nearest integer (|f| ≤ 1/2), 2^k written into the exponent bits and 2^f = e^{f ln 2} a
Taylor polynomial (degree 6 in float32, 13 in float64: within about one unit of the last place), a dozen
vectorisable instructions without branches. Under SA every exponent lies in [−2 · 0.45 · 87.3 / ln 2, 0] (the
shift, and ``shift_is_safe`` for unit tokens), so no range check is needed; USA's version clamps, returning 0
below the smallest normal number and inf where e^s overflows. The C code must not be compiled with -ffast-math,
which would fold away the rounding z + magic − magic. Where no compiler works, the caller falls back to the
unsymmetric fused step.

Shapes: tokens x (B, d, N) coordinates first, contiguous, on the CPU; Q and K (H, d_h, d); V (H, d, d).
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import shutil
import subprocess
import tempfile

import torch

from energylab import kernels

CHUNK = 1024  # columns j per pass, so that their a, v and sums (40 KB in d = 3, float32) stay in the L2 cache
ROWS = 8  # rows i per pass over the columns j: token j's sums are read and written once per ROWS rows (4: 20% slower)
SYMMETRY_TOL = 64  # A_h counts as symmetric when |A - Aᵀ| <= SYMMETRY_TOL · eps(dtype) · max|A| (rounding of QᵀK)
# -fno-trapping-math lets GCC vectorise float selects (USA's clamped exponential) without AVX-512's masks: measured on
# AVX2 code (x86-64-v3), USA at 1,024 tokens ran 5x faster with it; it changes no value (no reassociation)
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd", "-shared", "-fPIC")
# In a pinned process (energylab.portable: the book's committed outputs) the same code must give the same bits on
# every x86-64 processor: -march=native would pick the vector width (so the order of the SIMD sums) and FMA
# contraction by processor. The x86-64 baseline (SSE2, 128-bit vectors, no FMA) runs identically everywhere.
PINNED_FLAGS = ("-O3", "-march=x86-64", "-mtune=generic", "-ffp-contract=off", "-fno-math-errno",
                "-fopenmp-simd", "-shared", "-fPIC")


# ATen's instruction set (ATEN_CPU_CAPABILITY, as ``python -m energylab.bench --capability`` sets it) -> the
# compiler's target, so that a measurement "with AVX2" runs AVX2 code in the C kernels too
MARCH = {"avx2": "-march=x86-64-v3", "avx512": "-march=x86-64-v4", "default": "-march=x86-64"}


def flags() -> tuple[str, ...]:
    """The compiler flags of this process: :data:`PINNED_FLAGS` under the book's pins, else :data:`FLAGS`, with
    the target of ATEN_CPU_CAPABILITY (:data:`MARCH`) in place of -march=native where that variable is set."""
    from energylab import portable

    if not portable.unpinned():
        return PINNED_FLAGS
    march = MARCH.get(os.environ.get("ATEN_CPU_CAPABILITY", "").lower(), "-march=native")
    return tuple(march if f == "-march=native" else f for f in FLAGS)

# per dtype: C type, integer type of its bits, mantissa bits, exponent bias, degree of the polynomial of 2^f, and
# the base-2 exponents below which the unshifted (USA) exponential returns 0 (at most a smallest normal lost) and
# above which it is infinite anyway
_TYPES = {
    torch.float32: ("float", "int32_t", 23, 127, 6, (-125.0, 128.5), "f"),
    torch.float64: ("double", "int64_t", 52, 1023, 13, (-1021.0, 1024.5), ""),
}


def symmetric_scores(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor | None:
    """The heads' score matrices A_h = Q_hᵀK_h (H, d, d), symmetrised, when each is symmetric to rounding; else None."""
    A = Q.double().transpose(1, 2) @ K.double()
    tol = SYMMETRY_TOL * torch.finfo(Q.dtype).eps * float(A.abs().max().clamp_min(torch.finfo(torch.float64).tiny))
    if float((A - A.transpose(1, 2)).abs().max()) > tol:
        return None
    return ((A + A.transpose(1, 2)) / 2).to(Q.dtype)


def exp2_functions(dtype: torch.dtype) -> str:
    """C functions 2^z: ``exp2_shifted`` for z in [-bias + 1, 0] (SA: the shift and :func:`sphere_fused.shift_is_safe`
    keep every exponent there), ``exp2_any`` for any z (USA): 0 below, inf above the dtype's range."""
    ctype, itype, mant, bias, degree, (lo, hi), sfx = _TYPES[dtype]
    poly = f"{math.log(2) ** degree / math.factorial(degree)!r}{sfx}"
    for k in range(degree - 1, -1, -1):  # Horner with the Taylor coefficients ln2^k / k!: one multiply-add a degree
        poly = f"{math.log(2) ** k / math.factorial(k)!r}{sfx} + f * ({poly})"
    magic = 1.5 * 2.0 ** mant  # z + magic rounds z to an integer k, which the low bits of the sum then hold

    def body(bias_k: int) -> str:  # 2^(k + bias_k - bias) from the bits of z + magic + bias_k, times the polynomial
        return f"""{ctype} t = z + {magic + bias_k!r}{sfx};
    {ctype} f = z - (t - {magic + bias_k!r}{sfx});  /* z = k + f, |f| <= 1/2 */
    {itype} bits;
    memcpy(&bits, &t, sizeof bits);
    bits <<= {mant};
    {ctype} scale;
    memcpy(&scale, &bits, sizeof scale);
    {ctype} p = {poly};"""

    return f"""
static inline {ctype} exp2_shifted({ctype} z) {{
    {body(bias)}
    return p * scale;
}}

static inline {ctype} exp2_any({ctype} z0) {{
    {ctype} z = z0 < {lo}{sfx} ? {lo}{sfx} : (z0 > {hi}{sfx} ? {hi}{sfx} : z0);
    {body(bias - 1)}  /* scale = 2^(k - 1), so that k = bias + 1 (overflow) still has bits */
    {ctype} e = p * scale * 2;
    return z0 < {lo}{sfx} ? 0 : e;
}}
"""


def _pairs_function(name: str, exp2: str, d: int, rows: int, ctype: str) -> str:
    """C function ``name``: acc (d + 1, n) += Σ over i <= j of w_ij [v_j, 1] at i and, for i < j, w_ij [v_i, 1] at j,
    with w_ij = 2^(⟨bx_i, a_j⟩ - c) (bx = β log2(e) x, c the shift in base 2). Rows go ``rows`` at a time against
    a chunk of columns, unrolled; the small triangles inside each block of rows and the last rows one pair at a time.
    """
    e, r_, k_ = d + 1, range(rows), range(d)
    lines = []
    put = lines.append
    for r in r_:
        for k in k_:
            put(f"{ctype} bx{r}_{k} = beta * x[{k} * n + i0 + {r}], vi{r}_{k} = v[{k} * n + i0 + {r}];")
    sums = [f"s{r}_{k}" for r in r_ for k in range(e)]
    put(f"{ctype} {' = 0, '.join(sums)} = 0;")
    put(f"#pragma omp simd reduction(+:{', '.join(sums)})")
    put("for (int j = start; j < j1; j++) {")
    for k in k_:
        put(f"    {ctype} a{k} = a[{k} * n + j], v{k} = v[{k} * n + j];")
    for r in r_:
        score = " + ".join(f"bx{r}_{k} * a{k}" for k in k_)
        put(f"    {ctype} w{r} = {exp2}({score} - c);")
        put("    " + " ".join(f"s{r}_{k} += w{r} * v{k};" for k in k_) + f" s{r}_{d} += w{r};")
    for k in k_:
        put(f"    acc[{k} * n + j] += " + " + ".join(f"w{r} * vi{r}_{k}" for r in r_) + ";")
    put(f"    acc[{d} * n + j] += " + " + ".join(f"w{r}" for r in r_) + ";")
    put("}")
    for r in r_:
        put(" ".join(f"acc[{k} * n + i0 + {r}] += s{r}_{k};" for k in range(e)))
    block = "\n            ".join(lines)
    return f"""
static void {name}_row(int n, int i, int end, const real* x, const real* a, const real* v, real beta, real c,
                       real* acc) {{  /* the pairs (i, j), i <= j < end, one at a time */
    for (int j = i; j < end; j++) {{
        real z = -c;
        for (int k = 0; k < D; k++) z += beta * x[k * n + i] * a[k * n + j];
        real w = {exp2}(z);
        for (int k = 0; k < D; k++) acc[k * n + i] += w * v[k * n + j];
        acc[D * n + i] += w;
        if (j == i) continue;
        for (int k = 0; k < D; k++) acc[k * n + j] += w * v[k * n + i];
        acc[D * n + j] += w;
    }}
}}

static void {name}(int n, const real* x, const real* a, const real* v, real beta, real c, real* acc) {{
    int blocks = n / ROWS * ROWS;  /* rows [0, blocks) go ROWS at a time, the rest one by one */
    for (int i0 = 0; i0 < blocks; i0 += ROWS)
        for (int i = i0; i < i0 + ROWS; i++) {name}_row(n, i, i0 + ROWS, x, a, v, beta, c, acc);
    for (int i = blocks; i < n; i++) {name}_row(n, i, n, x, a, v, beta, c, acc);
    for (int j0 = 0; j0 < n; j0 += CHUNK) {{  /* columns in chunks whose a, v and sums stay in the L1 cache */
        int j1 = j0 + CHUNK < n ? j0 + CHUNK : n;
        for (int i0 = 0; i0 < blocks && i0 + ROWS < j1; i0 += ROWS) {{
            int start = i0 + ROWS > j0 ? i0 + ROWS : j0;
            {block}
        }}
    }}
}}
"""


def c_source(d: int, dtype: torch.dtype, rows: int = ROWS, chunk: int = CHUNK) -> str:
    """C source of ``euler_steps`` for tokens of dimension d in ``dtype`` (inner loop: ``rows`` rows, ``chunk``
    columns)."""
    ctype = _TYPES[dtype][0]
    return f"""#include <stdint.h>
#include <string.h>
#include <math.h>
#define D {d}
#define ROWS {rows}
#define CHUNK {chunk}
typedef {ctype} real;
{exp2_functions(dtype)}{_pairs_function("pairs_sa", "exp2_shifted", d, rows, ctype)}\
{_pairs_function("pairs_usa", "exp2_any", d, rows, ctype)}{_STEPS}"""


# `steps` Euler steps x <- N(x + h P_x y), y_i = sum_h (sum_j w_hij V_h x_j) / Z_hi (SA) or / n (USA), in place
_STEPS = """
static real max_norm(int n, int dh, const real* M, const real* x) {  /* max_i |M x_i|, M (dh, D) */
    real best = 0;
    for (int i = 0; i < n; i++) {
        real s = 0;
        for (int r = 0; r < dh; r++) {
            real t = 0;
            for (int k = 0; k < D; k++) t += M[r * D + k] * x[k * n + i];
            s += t * t;
        }
        if (s > best) best = s;
    }
    return sqrt(best);
}

static void apply(int n, const real* M, const real* x, real* out) {  /* out = M x, M (D, D) */
    for (int r = 0; r < D; r++) {
        for (int i = 0; i < n; i++) out[r * n + i] = 0;
        for (int k = 0; k < D; k++)
            for (int i = 0; i < n; i++) out[r * n + i] += M[r * D + k] * x[k * n + i];
    }
}

void euler_steps(int batch, int n, int heads, int dh, int steps, real* x, const real* A, const real* V,
                 const real* Q, const real* K, real beta, real h, int normalized, real* work) {
    real *a = work, *v = a + D * n, *acc = v + D * n, *y = acc + (D + 1) * n;
    for (int s = 0; s < steps; s++)
        for (int b = 0; b < batch; b++) {
            real* xb = x + (long)b * D * n;
            for (int i = 0; i < D * n; i++) y[i] = 0;
            for (int hd = 0; hd < heads; hd++) {
                apply(n, A + hd * D * D, xb, a);
                apply(n, V + hd * D * D, xb, v);
                for (int i = 0; i < (D + 1) * n; i++) acc[i] = 0;
                real beta2 = beta * (real)1.4426950408889634;  /* e^(beta s) = 2^(beta log2(e) s) */
                if (normalized)  /* the shift: beta2 max_i |Q_h x_i| max_j |K_h x_j| >= every exponent */
                    pairs_sa(n, xb, a, v, beta2,
                             beta2 * max_norm(n, dh, Q + hd * dh * D, xb) * max_norm(n, dh, K + hd * dh * D, xb), acc);
                else
                    pairs_usa(n, xb, a, v, beta2, 0, acc);
                for (int i = 0; i < n; i++) {
                    real z = normalized ? acc[D * n + i] : (real)n;
                    for (int k = 0; k < D; k++) y[k * n + i] += acc[k * n + i] / z;
                }
            }
            for (int i = 0; i < n; i++) {
                real radial = 0, norm = 0, m[D];
                for (int k = 0; k < D; k++) radial += y[k * n + i] * xb[k * n + i];
                for (int k = 0; k < D; k++) {
                    m[k] = xb[k * n + i] + h * (y[k * n + i] - radial * xb[k * n + i]);
                    norm += m[k] * m[k];
                }
                norm = sqrt(norm);
                for (int k = 0; k < D; k++) xb[k * n + i] = m[k] / norm;
            }
        }
}
"""


def compiler() -> str | None:
    """The C compiler: $CC, else cc, gcc or clang on the PATH (None when there is none)."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build(source: str, compile_flags: tuple[str, ...]) -> ctypes.CDLL:
    """C ``source`` compiled with ``compile_flags`` into a shared library in a temporary folder, and loaded (the
    file may go once loaded); raises RuntimeError without a compiler or when it fails. The C kernels' one build."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (set CC)")
    with tempfile.TemporaryDirectory(prefix="energylab-") as tmp:
        src, lib = os.path.join(tmp, "kernel.c"), os.path.join(tmp, "kernel.so")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        done = subprocess.run([cc, *compile_flags, src, "-o", lib, "-lm"], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{cc} failed: {done.stderr.strip()[:500]}")
        return ctypes.CDLL(lib)


@functools.cache
def library(d: int, dtype: torch.dtype) -> ctypes.CDLL:
    """``euler_steps`` for dimension d and ``dtype``, compiled once per process (about 0.5 s); raises if it cannot."""
    loaded = build(c_source(d, dtype), flags())
    real = ctypes.c_float if dtype == torch.float32 else ctypes.c_double
    # euler_steps(batch, n, heads, dh, steps, x, A, V, Q, K, beta, h, normalized, work)
    loaded.euler_steps.argtypes = [ctypes.c_int] * 5 + [ctypes.c_void_p] * 5 + [real, real, ctypes.c_int,
                                                                                 ctypes.c_void_p]
    loaded.euler_steps.restype = None
    return loaded


def stepper(x0: torch.Tensor, A: torch.Tensor, V: torch.Tensor, Q: torch.Tensor, K: torch.Tensor, beta: float,
            step: float, normalized: bool):
    """A function ``xt -> xt'`` making one Euler step on tokens xt (B, d, N) (a new tensor; xt is not changed).
    It records no gradients: a RuntimeError if autograd would record one (tokens or weights requiring grad).

    Preconditions (the caller's): A = :func:`symmetric_scores` (Q, K) is not None, no causal mask, CPU tokens in
    float32 or float64, and for SA the shift passes :func:`energylab.kernels.sphere_fused.shift_is_safe`.
    """
    batch, n, d = x0.shape
    heads, dh, _ = Q.shape
    fn = library(d, x0.dtype).euler_steps
    weights = [w.to(x0.dtype).contiguous() for w in (A, V, Q, K)]
    ptrs = [w.data_ptr() for w in weights]
    work = torch.empty((4 * d + 1) * n, dtype=x0.dtype)  # A x, V x, the sums, the velocity: (4 d + 1, N)

    def one_step(xt: torch.Tensor) -> torch.Tensor:
        if kernels.records_grad(xt, *weights):  # the C code writes `out` behind autograd's back: refuse, never lie
            raise RuntimeError("kernels.sphere_symmetric's C kernel records no gradients, and the tokens or weights "
                               "require grad; flows.simulate(..., FlowConfig(fused=True)) then integrates with the "
                               "reference step (energylab.kernels.FAST_PATHS['sphere-symmetric'])")
        out = xt.clone(memory_format=torch.contiguous_format)  # (B, d, N), stepped in place
        fn(batch, n, heads, dh, 1, out.data_ptr(), *ptrs, beta, step, int(normalized), work.data_ptr())
        return out

    one_step.keep = (weights, work)  # the buffers the pointers refer to live as long as the function
    return one_step


__all__ = ["ROWS", "SYMMETRY_TOL", "FLAGS", "PINNED_FLAGS", "MARCH", "flags", "symmetric_scores", "exp2_functions",
           "c_source", "compiler", "build", "library", "stepper"]
