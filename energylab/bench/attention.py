"""Forward+backward time and activation memory of every layer of :mod:`energylab.layers`.

Each time is a ratio (median and ratio of minima) to a plain SDPA multi-head attention (qkv projection,
``F.scaled_dot_product_attention``, output projection) measured in the same run, in alternation with the layer (so
that load from other processes hits both): median over 30 rounds at 256 tokens and 10 at 1,024 after warm-up,
forward + backward. Memory is what autograd saves for the backward pass (unique storages, measured with
``saved_tensors_hooks``; on CUDA the peak allocated memory is reported as well), and ``n2_units`` expresses it in
units of one (B, H, N, N) float tensor, so the O(B·H·N²) + O(B·N·d) budget can be read off directly.

On CPU everything runs on one thread and is timed in CPU seconds of this process (``time.process_time``), so that
other processes on a shared machine stay out of the ratios (on CUDA: wall time after synchronising). On two
threads of a shared two-core machine (load about 3.5), the tiled kernels of :mod:`energylab.kernels.attention`
(hundreds of small parallel regions per call, each waiting for a descheduled thread) had medians of 20-30× SDPA's
(a single region) while their minima stayed at 1.5-3× (run of 2026-11-23, 19:00 UTC): a measurement of the load,
not of the kernels.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from energylab import layers as M
from energylab.bench import median_time

# (layer name, constructor taking (dim, heads), target time ratio to the SDPA reference (issues 3 and 19; the
#  tighter ones of issue 55, for the C tile loops of energylab.kernels.fused_attention) or None,
#  target saved-memory ratio or None); the memory target is issue 19's: "O(B·H·N)" reads as at most 2x SDPA's
LAYERS = [
    ("MultiHeadAttention", lambda d, h: M.MultiHeadAttention(d, h, causal=False), 1.1, None),
    ("torch.nn.MultiheadAttention", lambda d, h: _TorchMHA(d, h), None, None),
    ("ExpressiveAttention", lambda d, h: M.ExpressiveAttention(d, h, causal=False), 1.2, 1.5),
    ("MHA2nd1st", lambda d, h: M.MHA2nd1st(d, h, causal=False), 2.0, 2.0),
    ("MHA2nd1stCorrected", lambda d, h: M.MHA2nd1stCorrected(d, h, causal=False), 2.0, 2.0),
    ("BiSoftmaxAttention", lambda d, h: M.BiSoftmaxAttention(d, h), 1.5, 2.0),
    ("SigmoidAttention", lambda d, h: M.SigmoidAttention(d, h), 1.1, 2.0),
    ("KernelLinearAttention", lambda d, h: M.KernelLinearAttention(d, h), None, None),
    ("ReLUEnergyFeedforward", lambda d, h: M.ReLUEnergyFeedforward(d), None, None),
    ("SoftmaxEnergyFeedforward", lambda d, h: M.SoftmaxEnergyFeedforward(d), None, None),
    ("GatedEnergyFeedforward", lambda d, h: M.GatedEnergyFeedforward(d), None, None),
]


class _ReferenceMHA(nn.Module):
    """The reference: the shortest correct SDPA multi-head attention, no validation."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        return self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(-2))


class _TorchMHA(nn.Module):
    """torch.nn.MultiheadAttention as a self-attention layer x -> x, for comparison."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads, bias=False, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


def saved_bytes(layer: nn.Module, x: torch.Tensor) -> int:
    """Bytes of the unique storages autograd saves for the backward pass of layer(x)."""
    storages = {}

    def pack(t):
        if t.device.type != "meta":
            s = t.untyped_storage()
            storages[(s.data_ptr(), t.device)] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x).sum()
    return sum(storages.values())


def _fwd_bwd(layer: nn.Module, x: torch.Tensor):
    def step():
        layer.zero_grad(set_to_none=True)
        layer(x).sum().backward()
        if x.device.type == "cuda":
            torch.cuda.synchronize()
    return step


def _peak_cuda_bytes(layer, x) -> int | None:
    if x.device.type != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    _fwd_bwd(layer, x)()
    return torch.cuda.max_memory_allocated() - base


def paired_ratio(reference, candidate, repeats: int, warmup: int = 2,
                 clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """(median ratio, min ratio) of candidate to reference times, measured in alternation (load drifts cancel).

    On a shared machine other processes only ever add time, so the ratio of minima is the steadier number.
    """
    for _ in range(warmup):
        reference()
        candidate()
    ref_times, times = [], []
    for _ in range(repeats):
        ref_times.append(median_time(reference, repeats=1, warmup=0, clock=clock))
        times.append(median_time(candidate, repeats=1, warmup=0, clock=clock))
    ref_times.sort()
    times.sort()
    return times[len(times) // 2] / ref_times[len(ref_times) // 2], times[0] / ref_times[0]


CPU_TOKENS = (256, 1024)
CUDA_TOKENS = (256, 1024, 4096, 16384)  # on a GPU the N² terms only dominate from a few thousand tokens on
CUDA_TOKENS_PER_BATCH = 16384  # on CUDA the batch is this / N (64 boards of 256 tokens ... one of 16,384)


def run(quick: bool, device: str = "cpu", dtype: str = "float32", tokens: tuple[int, ...] | None = None) -> list[dict]:
    """Rows for (batch 8, dim 256, heads 8) at 256 and 1024 tokens on CPU; on CUDA at 256 to 16,384 tokens with
    ``CUDA_TOKENS_PER_BATCH`` tokens per batch (quick: batch 2, dim 64, heads 4, 64 tokens); ``tokens`` picks
    other token counts.

    One row per layer and token count: ``time_ratio`` (median fwd+bwd time over SDPA's, measured in alternation),
    ``ratio_of_min``, ``saved_ratio`` (saved activations over SDPA's) and ``n2_units``, with the targets and
    whether the median and the memory meet them; ``device`` and ``dtype`` (e.g. cuda, bfloat16) say where. On
    CUDA a layer that runs out of memory gets a row with ``time_ratio`` None and ``met`` "OOM"; expressive
    attention gets a second row for its reference path (flex attention is its CUDA route).
    """
    if dtype not in ("float32", "float64", "float16", "bfloat16"):
        raise ValueError(f"dtype must be float32, float64, float16 or bfloat16, got {dtype!r}")
    if tokens is not None and (not tokens or any(not isinstance(n, int) or n < 1 for n in tokens)):
        raise ValueError(f"tokens must be positive ints, got {tokens!r}")
    threads = torch.get_num_threads()
    if device == "cpu":  # one thread: see the module docstring
        torch.set_num_threads(1)
    try:
        return _run(quick, device, getattr(torch, dtype), tokens)
    finally:
        torch.set_num_threads(threads)


def _layers(device: str):
    if device == "cpu":
        return LAYERS
    from energylab import kernels

    class _ReferenceRoute(nn.Module):  # the layer with every fast path switched off (kernels.reference_paths)
        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            with kernels.reference_paths():
                return self.layer(x)

    expressive = next(row for row in LAYERS if row[0] == "ExpressiveAttention")
    plain = ("ExpressiveAttention (reference path)", lambda d, h: _ReferenceRoute(expressive[1](d, h)), None, None)
    i = LAYERS.index(expressive)
    return LAYERS[:i + 1] + [plain] + LAYERS[i + 1:]


def _run(quick: bool, device: str, dtype_: torch.dtype, tokens: tuple[int, ...] | None = None) -> list[dict]:
    batch, dim, heads = (2, 64, 4) if quick else (8, 256, 8)
    token_counts = tokens or ((64,) if quick else (CUDA_TOKENS if device.startswith("cuda") else CPU_TOKENS))
    dtype = str(dtype_).removeprefix("torch.")
    clock = time.process_time if device == "cpu" else time.perf_counter  # one CPU thread: its CPU seconds
    rows = []
    cuda = device.startswith("cuda")
    for n_tokens in token_counts:
        # alternated rounds: 30 where a round is cheap (0.15 s at 256 tokens), 10 at 1,024 tokens (1.5 s)
        repeats = 3 if quick else (30 if n_tokens <= 256 else 10)
        if cuda and not quick:
            batch = max(1, CUDA_TOKENS_PER_BATCH // n_tokens)
        torch.manual_seed(0)
        x = torch.randn(batch, n_tokens, dim, device=device, dtype=dtype_)
        reference = _ReferenceMHA(dim, heads).to(device, dtype_)
        ref_step = _fwd_bwd(reference, x)
        ref_bytes = saved_bytes(reference, x)
        n2_bytes = batch * heads * n_tokens * n_tokens * x.element_size()
        where = {"device": device, "dtype": dtype, "threads": torch.get_num_threads()}  # the provenance: default
        rows.append(_row("SDPA reference", n_tokens, (1.0, 1.0), ref_bytes, ref_bytes, n2_bytes, (None, None),
                         _peak_cuda_bytes(reference, x), where))
        for name, make, target, memory_target in _layers(device):
            layer = make(dim, heads).to(device, dtype_)
            try:
                ratio = paired_ratio(ref_step, _fwd_bwd(layer, x), repeats=repeats, clock=clock)
                row = _row(name, n_tokens, ratio, saved_bytes(layer, x), ref_bytes, n2_bytes,
                           (target, memory_target), _peak_cuda_bytes(layer, x), where)
            except torch.OutOfMemoryError:
                if not cuda:
                    raise
                row = {"layer": name, "tokens": n_tokens, "time_ratio": None, "ratio_of_min": None,
                       "target": "" if target is None else f"<= {target}", "met": "OOM", **where}
            if cuda:
                row["batch"] = batch
                layer.zero_grad(set_to_none=True)
                del layer
                torch.cuda.empty_cache()
            rows.append(row)
    return rows


def _row(name, n_tokens, ratios, nbytes, ref_bytes, n2_bytes, targets, cuda_peak, where) -> dict:
    ratio, ratio_min = ratios
    target, memory_target = targets
    row = {
        "layer": name,
        "tokens": n_tokens,
        "time_ratio": round(ratio, 3),  # median time / SDPA's median time: what the targets judge (issue 19)
        "ratio_of_min": round(ratio_min, 3),
        "target": "" if target is None else f"<= {target}",
        "met": "" if target is None else ("yes" if ratio <= target else "NO"),
        "saved_MB": round(nbytes / 2**20, 1),
        "saved_ratio": round(nbytes / ref_bytes, 2),
        "saved_target": "" if memory_target is None else f"<= {memory_target}",
        "saved_met": "" if memory_target is None else ("yes" if nbytes / ref_bytes <= memory_target else "NO"),
        "n2_units": round(nbytes / n2_bytes, 2),
        **where,
    }
    if cuda_peak is not None:
        row["cuda_peak_MB"] = round(cuda_peak / 2**20, 1)
    return row
