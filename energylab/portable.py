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
}


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


def unpinned(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Names of :data:`PINNED_ENV` variables whose value in ``environ`` differs from the pinned one."""
    environ = os.environ if environ is None else environ
    return [k for k, v in PINNED_ENV.items() if environ.get(k) != v]


__all__ = ["PINNED_ENV", "EMULATED_OTHER_PROCESSOR", "pin_environment", "configure_torch", "unpinned"]
