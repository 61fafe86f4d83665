"""Processor-independent numerics for the book's committed outputs (imports nothing heavy: no torch, no numpy).

One thread makes a run reproducible on one machine, not across processors: torch (ATen's CPU dispatch picks
default/AVX2/AVX-512 kernels), MKL and OpenBLAS choose their kernels by processor, and their results differ in
the last bits, which long iterations and training amplify. These variables select kernels that run the same
instructions on every x86-64 machine. They act only when set before torch and numpy load, so the processes
that execute or compare notebooks (``conftest.py`` for nbval, ``scripts/execute_notebooks.py`` and
``scripts/build_book.py``) set them in their own environment and every kernel they start inherits it.

A reader's JupyterLab does not need them: without them the last printed digits may differ from the book's.
What each variable changed was measured by executing the chapters with it and comparing without it (nbval cells
that differed on an AMD Zen 4 with AVX-512): ATEN_CPU_CAPABILITY 8, MKL_CBWR 6, oneDNN off 2 (see configure_torch);
their cost in time was within the run-to-run noise of the whole notebook suite (about 2.5 minutes).
"""
from __future__ import annotations

import os
from typing import MutableMapping

# Set wherever notebooks are executed or compared. Each entry was measured to matter (see README, Development).
PINNED_ENV = {
    # one thread: reductions split across threads sum in another order
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    # ATen's scalar ("default") kernels instead of the AVX2/AVX-512 ones chosen per processor
    "ATEN_CPU_CAPABILITY": "default",
    # MKL's conditional numerical reproducibility: the same code path on every x86-64 processor
    "MKL_CBWR": "COMPATIBLE",
}
# Measured and left out: OPENBLAS_CORETYPE (numpy/scipy's BLAS). The chapters gave the same outputs with OpenBLAS's
# SkylakeX, Sandybridge and Nehalem kernels, so it is not pinned; the emulated pass below keeps checking that.

# What CI sets on top of PINNED_ENV to emulate another processor: it lowers the instruction sets that the
# remaining (unpinned) libraries may dispatch on. With the pins in force, committed outputs must not change.
EMULATED_OTHER_PROCESSOR = {
    "MKL_ENABLE_INSTRUCTIONS": "AVX",  # MKL as on a processor without AVX2/AVX-512
    "OPENBLAS_CORETYPE": "Sandybridge",  # OpenBLAS's AVX kernels instead of this machine's choice
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (convolutions) without AVX-512
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",  # numpy's own SIMD at its baseline
    "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX2,-FMA",  # libm's exp/log without their FMA variants
    # the approximate vector math that no variable pins (see APPROXIMATE_OPS): moved by one ulp, as another
    # processor's estimate instructions would move it
    "ENERGYLAB_PERTURB_APPROXIMATE": "1",
}

# Float ops that torch (CPU, float32 and below) hands to MKL's vector-math library (VML) and that are not correctly
# rounded there, so that their last bit depends on the processor even under MKL_CBWR=COMPATIBLE: VML's
# single-precision sqrt starts from the approximate ``rsqrtps`` instruction, whose estimate differs between Intel
# and AMD, and is wrong in the last bit for 19% of inputs (measured on an Intel Xeon, 200,000 inputs); tan 18%,
# acos 9%, atan 8%, asin 6% and log2/log10 are routed the same way. Measured on that Xeon: these ops (and exp, log,
# tanh, logsumexp, which reach VML as well) change their bits with MKL's settings; rsqrt, sin, cos, log1p, expm1,
# sigmoid, softmax, GELU, vector norms and fused AdamW do not (ATen's own kernels). exp, log and tanh are left out:
# SGD runs through them (paper 001's tanh network, 8 seeds, 1,000 epochs) replayed an AMD run bit for bit on the
# Xeon. A pinned path must not call these ops (``exact_sqrt`` is the library's sqrt); ``ENERGYLAB_PERTURB_APPROXIMATE``
# moves their results by one ulp so that the emulated pass sees any call that remains.
APPROXIMATE_OPS = ("sqrt", "sqrt_", "_foreach_sqrt", "_foreach_sqrt_", "tan", "tan_", "acos", "acos_", "asin",
                   "asin_", "atan", "atan_", "log2", "log2_", "log10", "log10_", "erf", "erf_", "erfinv", "erfinv_")
PERTURB_VARIABLE = "ENERGYLAB_PERTURB_APPROXIMATE"


def pin_environment(environ: MutableMapping[str, str] | None = None, *, emulate_other: bool = False) -> dict:
    """Write :data:`PINNED_ENV` (and, with ``emulate_other``, :data:`EMULATED_OTHER_PROCESSOR`) into ``environ``.

    ``environ`` defaults to ``os.environ``; child processes (notebook kernels) inherit it. Returns the variables
    that were set. Call it before torch or numpy is imported in the process whose children must be pinned.
    """
    environ = os.environ if environ is None else environ
    values = dict(PINNED_ENV)
    if emulate_other:
        values.update(EMULATED_OTHER_PROCESSOR)
    environ.update(values)
    return values


def configure_torch() -> bool:
    """In a pinned process, route the ops torch gives to oneDNN (GELU, for one) through ATen's pinned kernels.

    oneDNN generates its code per processor and no environment variable makes it processor-independent; measured
    here, capping it at AVX2 changed chapter 7's denoising curve in the 4th digit. Called by ``setup_notebook``;
    does nothing (and returns False) in a process without the pins, so readers keep the fast paths.
    """
    if unpinned():
        return False
    import torch

    torch.backends.mkldnn.enabled = False
    return True


def exact_sqrt(x):
    """√x correctly rounded on every processor: a float32 (or narrower) CPU tensor goes through float64, whose sqrt
    is the IEEE instruction's, and is rounded once (exact: 53 ≥ 2·24 + 2 bits, so the double rounding is harmless);
    anything else is ``torch.sqrt``. Autograd goes through both casts. The library's sqrt in training paths, where
    VML's approximate float32 sqrt (see APPROXIMATE_OPS) would make the run depend on the processor."""
    import torch

    if x.device.type == "cpu" and x.is_floating_point() and x.dtype != torch.float64:
        return torch.sqrt(x.double()).to(x.dtype)
    return torch.sqrt(x)


def _is_approximate(func, args) -> bool:
    import torch

    name = func.overloadpacket.__name__
    if name in ("pow", "pow_") and len(args) > 1 and isinstance(args[1], (int, float)) and args[1] == 0.5:
        return True  # ATen turns x ** 0.5 into VML's sqrt
    if name not in APPROXIMATE_OPS:
        return False
    first = args[0][0] if isinstance(args[0], (list, tuple)) and args[0] else args[0]
    return (isinstance(first, torch.Tensor) and first.device.type == "cpu" and first.is_floating_point()
            and first.dtype != torch.float64)


def approximate_math_mode(action: str = "perturb"):
    """A TorchDispatchMode over every aten op. ``action="perturb"``: the result of each approximate-math call
    (APPROXIMATE_OPS on CPU in float32 or narrower) moves up by one ulp, as another processor's estimate would move
    it; ``action="record"``: the names of those calls are collected in the mode's ``calls`` list, the results kept.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    if action not in ("perturb", "record"):
        raise ValueError(f"action must be 'perturb' or 'record', got {action!r}")

    def up(t):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            with torch.no_grad():
                t.copy_(torch.nextafter(t, torch.full_like(t, float("inf"))))
        return t

    class ApproximateMath(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if _is_approximate(func, args):
                self.calls.append(func.overloadpacket.__name__)
                if action == "perturb":
                    for t in (out if isinstance(out, (list, tuple)) else [out]):
                        up(t)
                    if out is None and func.overloadpacket.__name__.endswith("_"):  # in-place foreach: no result
                        for t in args[0]:
                            up(t)
            return out

    return ApproximateMath()


_PERTURBING = []


def perturb_if_asked(environ: MutableMapping[str, str] | None = None) -> bool:
    """In a process with ``ENERGYLAB_PERTURB_APPROXIMATE=1`` (the emulated pass), enter the perturbing mode of
    :func:`approximate_math_mode` for the rest of the process (once); return whether it is on. Called by
    ``setup_notebook``, so every chapter kernel of the emulated pass perturbs (the pytest process itself does not)."""
    environ = os.environ if environ is None else environ
    if environ.get(PERTURB_VARIABLE) != "1":
        return False
    if not _PERTURBING:
        mode = approximate_math_mode("perturb")
        mode.__enter__()
        _PERTURBING.append(mode)
    return True


def unpinned(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Names of :data:`PINNED_ENV` variables whose value in ``environ`` differs from the pinned one."""
    environ = os.environ if environ is None else environ
    return [k for k, v in PINNED_ENV.items() if environ.get(k) != v]


__all__ = ["PINNED_ENV", "EMULATED_OTHER_PROCESSOR", "APPROXIMATE_OPS", "PERTURB_VARIABLE", "pin_environment",
           "configure_torch", "unpinned", "exact_sqrt", "approximate_math_mode", "perturb_if_asked"]
