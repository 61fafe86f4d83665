"""The contract every fast path keeps: drop-in for its reference path, or the reference path itself (issue 39).

A fast path is a faster route to numbers that a reference path (plain PyTorch, autograd-transparent) computes:
the symmetric C kernel and the compiled fused step of the sphere flows, the tiled attention kernels with their
hand-written backward and their tile loops in C, flex attention for EA on CUDA, SDPA for softmax attention, the
compiled seed ensemble.
:data:`FAST_PATHS` states for each one, in one table,

- ``grad``: what it does under autograd. ``"autograd"``: it records gradients equal to the reference path's with
  respect to every input and parameter (``torch.autograd.gradcheck`` in float64 at small sizes checks it);
  ``"reference"``: its kernel writes outside autograd's view, so whenever a gradient would be recorded (grad mode
  on and an input or parameter requiring grad) the reference path runs instead, with one warning;
- ``dtypes`` and ``devices`` it runs on (None: any); on anything else the reference path runs, with one warning;
- ``tolerance``: the largest relative error of its values against the reference path's, per dtype (float64
  tolerances are rounding; float32 ones what the kernels' own rounding measured, with a margin).

And every fast path that must be built first (a C compiler, ``torch.compile``, their cache folders) catches any
failure of the build, warns once (:class:`FastPathWarning`, naming the cause) and runs the reference path: no
compiler, a broken one and unwritable cache folders (the temporary folder where the C kernel is built, and
torch's TORCHINDUCTOR_CACHE_DIR) end the same way.
``tests/layers/test_fast_paths.py`` checks every row of the table; a new kernel is covered by adding its row here and
its case there.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from dataclasses import dataclass, field

import torch

from energylab._checks import value_checks_off

__all__ = ["FastPathWarning", "FastPath", "FAST_PATHS", "enabled", "tiled", "softmax_attention_backend",
           "reference_paths", "records_grad", "unsupported", "fall_back", "inductor_cache_dir", "use_capability_cache",
           "cache_problem"]

_F32, _F64 = torch.float32, torch.float64


# ----------------------------------------------------------------------------- the one switch
_switched_on = True


def enabled() -> bool:
    """Whether the layers of :mod:`energylab.layers` and :mod:`energylab.models` take their fast paths now: the
    switch is on (see :func:`reference_paths`) and no torch.func transform (the vmapped seed ensemble) or
    torch.compile trace is running, where a custom ``autograd.Function`` cannot go and the layers' reference
    ops are what gets transformed. The sphere flows take theirs only when asked, by ``FlowConfig(fused=True)``."""
    return _switched_on and not value_checks_off()


def tiled(x: torch.Tensor) -> bool:
    """Whether the tiled kernels of :mod:`energylab.kernels.attention` serve ``x`` now: :func:`enabled` and ``x`` on
    the CPU. They loop over tiles in Python, which is what keeps a CPU's caches warm; on a GPU every tile is a
    handful of tiny launches, and the first CUDA bench (H200, results/bench/attention-cuda-tiled.json) measured
    them 30-250x slower than SDPA, where the reference path's ATen ops run as a few large kernels. So on a GPU the
    reference path is the fast one (at the cost of its (N, N) tensors, which a GPU's memory holds far longer)."""
    return enabled() and x.device.type == "cpu"


def softmax_attention_backend(x: torch.Tensor):
    """The context for ``F.scaled_dot_product_attention`` on ``x``: on CUDA inside a torch.func transform (the
    vmapped seed ensemble) PyTorch's math backend, since the fused backends' backward failed there ("LSE is not
    correctly aligned (strideH)", torch 2.11 on an H200); anywhere else PyTorch's own choice."""
    if x.device.type == "cuda" and not enabled():
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.MATH)
    return contextlib.nullcontext()


@contextlib.contextmanager
def reference_paths():
    """Inside the block every layer computes through its reference path: the catalog operator's plain PyTorch ops,
    the math the chapters derive (to read it, profile it, or compare a fast path with it)."""
    global _switched_on
    previous, _switched_on = _switched_on, False
    try:
        yield
    finally:
        _switched_on = previous


class FastPathWarning(UserWarning):
    """A fast path was asked for and the reference path ran instead (the message says why)."""


@dataclass(frozen=True)
class FastPath:
    """One row of the contract (see the module docstring)."""

    where: str  # the module (and function) holding the fast code
    reference: str  # the path whose values and gradients it must give
    grad: str  # "autograd" (same gradients as the reference) or "reference" (under grad the reference path runs)
    dtypes: tuple[torch.dtype, ...] | None = None  # None: every floating dtype the reference path takes
    devices: tuple[str, ...] | None = None  # device types; None: any
    tolerance: dict = field(default_factory=lambda: {_F64: 1e-12, _F32: 1e-4})  # max relative value error

    def __post_init__(self):
        if self.grad not in ("autograd", "reference"):
            raise ValueError(f"grad must be 'autograd' or 'reference', got {self.grad!r}")


FAST_PATHS: dict[str, FastPath] = {
    "sphere-symmetric": FastPath("energylab.kernels.sphere_symmetric (ctypes C kernel, writes its output in place)",
                                 "flows.simulate(fused=False)", grad="reference", dtypes=(_F32, _F64),
                                 devices=("cpu",)),
    "sphere-fused": FastPath("energylab.kernels.sphere_fused.compiled_euler_step (torch.compile)",
                             "flows.simulate(fused=False)", grad="reference", dtypes=(_F32, _F64),
                             devices=("cpu", "cuda")),
    "tiled-expressive": FastPath("energylab.kernels.attention.expressive_attention",
                                 "forms.expressive.expressive_weights(s) @ v", grad="autograd",
                                 # not float16: s² and 1 + s² overflow its range (65504) once |s| > 256
                                 dtypes=(torch.bfloat16, _F32, _F64), devices=("cpu",)),
    "tiled-bisoftmax": FastPath("energylab.kernels.attention.bisoftmax_attention",
                                "forms.hyperspherical.hyperset_attention_update", grad="autograd",
                                devices=("cpu",)),
    "one-exp-bisoftmax": FastPath("energylab.kernels.hyperset_layer.bisoftmax_one_exp (HyperSETLayer)",
                                  "forms.hyperspherical.hyperset_attention_update", grad="autograd"),
    "fused-relu-feedforward": FastPath("energylab.kernels.hyperset_layer.relu_sphere_feedforward (HyperSETLayer)",
                                       "forms.hyperspherical.hyperset_feedforward_update", grad="autograd"),
    "tiled-sigmoid": FastPath("energylab.kernels.attention.sigmoid_attention",
                              "forms.hyperspherical.sigmoid_attention_update", grad="autograd",
                              devices=("cpu",)),
    # the tiled kernels' tile loops in C (energylab.kernels.fused_attention): processes not pinned by the book
    "fused-expressive": FastPath("energylab.kernels.fused_attention.expressive (C tile loop, BLAS gemm)",
                                 "forms.expressive.expressive_weights(s) @ v", grad="autograd", dtypes=(_F32, _F64),
                                 devices=("cpu",)),
    "fused-bisoftmax": FastPath("energylab.kernels.fused_attention.bisoftmax (C tile loop, BLAS gemm)",
                                "forms.hyperspherical.hyperset_attention_update", grad="autograd",
                                dtypes=(_F32, _F64), devices=("cpu",)),
    "fused-sigmoid": FastPath("energylab.kernels.fused_attention.sigmoid (C tile loop, BLAS gemm)",
                              "forms.hyperspherical.sigmoid_attention_update", grad="autograd", dtypes=(_F32, _F64),
                              devices=("cpu",)),
    "fused-newton": FastPath("energylab.kernels.fused_attention.newton (C tile loop, BLAS gemm)",
                             "forms.newton.newton_first_order_direction", grad="autograd", dtypes=(_F32, _F64),
                             devices=("cpu",)),
    "tiled-newton": FastPath("energylab.kernels.attention.newton_direction",
                             "forms.newton.newton_first_order_direction", grad="autograd",
                             devices=("cpu",)),
    "flex-expressive": FastPath("energylab.kernels.attention.flex_expressive_attention (torch.compile, CUDA)",
                                "forms.expressive.expressive_weights(s) @ v", grad="autograd", devices=("cuda",),
                                dtypes=(torch.float16, torch.bfloat16, _F32),  # flex's kernels; float64: tiled
                                tolerance={_F32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}),
    "sdpa-softmax": FastPath("F.scaled_dot_product_attention (MultiHeadAttention, TransformerBlock, flows.velocity)",
                             "softmax(q kᵀ scale) v", grad="autograd"),
    "ensemble-compiled": FastPath("energylab.engine.ensemble (torch.compile of the vmapped forward)",
                                  "the same vmapped forward, eager", grad="autograd", devices=("cpu", "cuda")),
}


def records_grad(*tensors) -> bool:
    """Whether autograd would record a graph through these tensors (grad mode on, one of them requiring grad)."""
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def unsupported(name: str, *tensors) -> str | None:
    """Why fast path ``name`` cannot take these tensors (its dtypes, devices, or autograd), or None if it can.

    The first tensor's dtype and device stand for all (the callers cast weights to the tokens')."""
    path = FAST_PATHS[name]
    first = next(t for t in tensors if isinstance(t, torch.Tensor))
    if path.dtypes is not None and first.dtype not in path.dtypes:
        return f"it runs on {', '.join(str(d) for d in path.dtypes)}, not {first.dtype}"
    if path.devices is not None and first.device.type not in path.devices:
        return f"it runs on {', '.join(path.devices)} devices, not {first.device.type}"
    if path.grad == "reference" and records_grad(*tensors):
        return "its kernel records no gradients and an input requires grad (the reference path gives them)"
    return None


def fall_back(name: str, reason: str, instead: str | None = None, stacklevel: int = 3) -> None:
    """The one warning of a fallback: fast path ``name`` does not run because of ``reason``; the fast path
    ``instead`` runs, or (None) the reference path."""
    runs = f"fast path {instead!r}" if instead else f"the reference path ({FAST_PATHS[name].reference})"
    warnings.warn(f"fast path {name!r} not used: {reason}; running {runs}", FastPathWarning, stacklevel=stacklevel)


def _writable_folder(path: str) -> bool:
    """Whether ``path`` is, or can be made, a folder we may write in."""
    try:
        os.makedirs(path, exist_ok=True)
        return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)
    except OSError:
        return False


def inductor_cache_dir(capability: str | None = None) -> str:
    """torch.compile's kernel cache for the ATen instruction set ``capability`` (None: this process's), a folder of
    its own beside the default (or beside TORCHINDUCTOR_CACHE_DIR where that is set): ``<folder>-<capability>``.

    Inductor does not key its cached CPU kernels on ATEN_CPU_CAPABILITY. Measured here (torch 2.13, the sphere
    bench's compiled step at 1,024 tokens, one cache folder): after a run with ``default`` (as every pinned process
    of the book has), an unpinned run reused the scalar kernels and took 5.1 s instead of 0.9; after a run with
    ``avx2``, a run with ``avx512`` aborted ("malloc(): unaligned tcache chunk detected")."""
    cap = (capability or torch.backends.cpu.get_cpu_capability()).lower()
    base = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not base:
        try:
            from torch._inductor.runtime.cache_dir_utils import default_cache_dir
        except ImportError:  # another torch layout: inductor's documented default
            base = os.path.join(tempfile.gettempdir(), "torchinductor")
        else:
            base = default_cache_dir()
    return f"{base.rstrip(os.sep)}-{cap}"


def use_capability_cache() -> None:
    """Point torch.compile at :func:`inductor_cache_dir` of this process, unless TORCHINDUCTOR_CACHE_DIR is set
    (inductor sets it at its first compile, so this must run before: :func:`cache_problem` calls it)."""
    if not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        try:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache_dir()
        except OSError:  # no temporary folder: cache_problem says so
            pass


def cache_problem() -> str | None:
    """Why ``torch.compile`` could not write its caches, or None: TORCHINDUCTOR_CACHE_DIR where set, else the
    temporary folder (``tempfile.gettempdir()``: a TMPDIR that is no folder is skipped for the next candidate, as
    inductor and the symmetric kernel's build do). Checked before compiling, because ``torch.compile`` fails on an
    unusable TORCHINDUCTOR_CACHE_DIR when it is called, before any kernel is built. First points the cache at
    this process's instruction set (:func:`use_capability_cache`)."""
    use_capability_cache()
    path = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if path and not _writable_folder(path):
        return f"TORCHINDUCTOR_CACHE_DIR={path!r} is not a writable folder"
    try:
        tmp = tempfile.gettempdir()
    except OSError as err:  # no candidate folder is writable
        return f"no temporary folder is writable ({err})"
    if not _writable_folder(tmp):
        return f"the temporary folder {tmp!r} is not writable"
    return None


# at import, before anything is compiled: torch.compile'd functions read the cache folder at their first call, and
# some are compiled without passing through cache_problem (the sphere bench calls sphere_fused.euler_step directly)
use_capability_cache()
