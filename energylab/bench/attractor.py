"""The attractor network's local field: the catalog operator against the model's autograd route.

Both compute h_i = -de_i/dx_i (D'Amico & Negri 2024, eq. 3) for a batch of spin configurations:
``forms.local.local_attention_update`` (the catalog form ``local_self_attention``, the reference of each row)
and ``BareSelfAttention.field``, which differentiates ``forms.local.local_energies`` with autograd. One more row
times a whole dynamics step (field, residual, renormalisation). Run ``python -m energylab.bench attractor``.
"""
from __future__ import annotations

import torch

from energylab.bench import median_time
from energylab.forms.local import local_attention_update
from energylab.models.attractor import AttractorConfig, BareSelfAttention
from energylab.sphere import normalize


def run(quick: bool = True) -> list[dict]:
    """Rows: shape, seconds of the reference, and the ratio of each route to it (lower is faster)."""
    shapes = [(32, 49, 8), (100, 49, 8)] if quick else [(32, 49, 8), (100, 49, 8), (32, 196, 8)]
    rows = []
    for b, n, d in shapes:
        g = torch.Generator().manual_seed(0)
        model = BareSelfAttention(AttractorConfig(n_tokens=n, patch_pixels=d // 2, dim=d), g)
        x = normalize(torch.randn(b, n, d, generator=g))
        J = model.J.detach()
        repeats = 5 if quick else 20
        with torch.no_grad():
            ref = median_time(lambda: local_attention_update(x, J, 1.0), repeats=repeats)
            autograd = median_time(lambda: model.field(x, 1.0), repeats=repeats)
            step = median_time(lambda: model.step(x, 1.0), repeats=repeats)
        rows.append({"B": b, "N": n, "d": d, "operator_s": ref, "field_autograd_vs_operator": autograd / ref,
                     "dynamics_step_vs_operator": step / ref})
    return rows
