"""One step of a Hopfield–Fenchel–Young energy as a trainable layer (chapter 12).

Queries read a set of memories (the keys are the values, as in a Hopfield network):

    out_q = W_PV Σ_i p_{q,i} m_i,        p_q = ŷ_Ω(M W_KQ q)          M (L, d): the memories m_i as rows

with ŷ_Ω softmax, sparsemax, 1.5-entmax, α-entmax or α-normmax. At W_KQ = β I and W_PV = I the output is
ξ + (−∇E(ξ)) = Mᵀ ŷ_Ω(β M ξ) for the state ξ = q: one rate-one step of the form's energy with the memories as
patterns (the layer's test checks this in float64), which for softmax is chapter 3's Hopfield update. Trained on
in-context denoising, W_KQ learns the inverse noise variance and W_PV the identity (Smart, Bietti and Sengupta
2025); :mod:`energylab.experiments.denoising` trains it with each map.
"""
from __future__ import annotations

import torch
from torch import nn

from energylab import catalog
from energylab._checks import check_int, check_same_dtype, check_tensor
from energylab.forms.sparse_hopfield import regulariser

__all__ = ["HopfieldAttention"]


class HopfieldAttention(nn.Module):
    """``HopfieldAttention(dim, kind, alpha)``: queries (B, Q, d) or (B, d) and memories (B, L, d) -> the queries'
    shape. ``kind`` is a regulariser of :func:`energylab.forms.sparse_hopfield.regulariser` ("softmax",
    "sparsemax", "entmax15", "entmax" or "normmax"; the last two need ``alpha`` > 1). Parameters W_KQ and W_PV
    (d, d), initialised at ``init_scale`` times a standard normal (small: the first weights are nearly uniform), drawn
    from ``generator`` in ``dtype`` (default: torch's default dtype)."""

    def __init__(self, dim: int, kind: str = "softmax", alpha: float | None = None, init_scale: float = 0.01,
                 dtype: torch.dtype | None = None, generator: torch.Generator | None = None):
        super().__init__()
        self.dim = check_int("dim", dim, minimum=1)
        self.kind, self.alpha = kind, alpha
        self.map = regulariser(kind, alpha).prediction  # checks kind and alpha
        self.W_KQ = nn.Parameter(init_scale * torch.randn(dim, dim, generator=generator, dtype=dtype))
        self.W_PV = nn.Parameter(init_scale * torch.randn(dim, dim, generator=generator, dtype=dtype))

    def weights(self, query: torch.Tensor, memories: torch.Tensor) -> torch.Tensor:
        """p = ŷ_Ω(M W_KQ q): (B, Q, d), (B, L, d) -> (B, Q, L), each row on the simplex."""
        scores = torch.einsum("bld,de,bqe->bql", memories, self.W_KQ, query)
        return self.map(scores)

    def forward(self, query: torch.Tensor, memories: torch.Tensor) -> torch.Tensor:
        check_tensor("query", query)
        check_tensor("memories", memories, ndim=3)
        single = query.dim() == 2
        q = query.unsqueeze(1) if single else query
        if q.dim() != 3 or q.shape[0] != memories.shape[0] or q.shape[-1] != self.dim or memories.shape[-1] != self.dim:
            raise ValueError(f"query must be (B, d) or (B, Q, d) and memories (B, L, d) with d = {self.dim} and the "
                             f"same B, got {tuple(query.shape)} and {tuple(memories.shape)}")
        check_same_dtype(("the layer's parameters", self.W_KQ), ("query", query), ("memories", memories))
        out = torch.einsum("bql,bld,ed->bqe", self.weights(q, memories), memories, self.W_PV)
        return out.squeeze(1) if single else out


for _form, _relation in (
    ("hopfield_retrieval", "kind='softmax'; at W_KQ = βI, W_PV = I one rate-one step, the memories as patterns"),
    ("sparsemax_retrieval", "kind='sparsemax'; at W_KQ = βI, W_PV = I one rate-one step, the memories as patterns"),
    ("entmax15_retrieval", "kind='entmax15'; at W_KQ = βI, W_PV = I one rate-one step, the memories as patterns"),
    ("entmax_retrieval", "kind='entmax', alpha; at W_KQ = βI, W_PV = I one rate-one step, the memories as patterns"),
    ("normmax_retrieval", "kind='normmax', alpha; at W_KQ = βI, W_PV = I one rate-one step, the memories as "
                          "patterns"),
):
    catalog.register_layer(HopfieldAttention, _form, _relation)
del _form, _relation
