"""What autograd costs: a layer from :func:`energylab.derive` against the same step from its hand-derived closed form.

For each energy of :mod:`energylab.layers.derived` (softmax self-energy, Cauchy energy) and each shape, two
timings of the same update −η∇E(x), both as a ratio to the closed form measured in the same run:

- ``forward_ratio``: the update under ``torch.no_grad()`` (inference: autograd still builds one backward graph);
- ``train_ratio``: the update and a loss backward to the parameters (training: ``create_graph=True``, so the
  backward differentiates a backward, a double-backward pass).

Run ``OMP_NUM_THREADS=1 python -m energylab.bench derive``.
"""
from __future__ import annotations

import torch

from energylab.bench import median_time
from energylab.layers.derived import ENERGIES
from energylab.layers.energy import derive


def compare(energy: str, batch: int, tokens: int, dim: int, heads: int, repeats: int = 5) -> dict:
    """One row: seconds of the closed form and the derived layer's time ratios for ``ENERGIES[energy]``."""
    E = ENERGIES[energy](dim, heads, generator=torch.Generator().manual_seed(0))
    layer = derive(E, step=0.5)
    x = torch.randn(batch, tokens, dim, generator=torch.Generator().manual_seed(1))

    def closed_train():
        (x + 0.5 * E.closed_form(x)).pow(2).sum().backward()

    def derived_train():
        layer(x).pow(2).sum().backward()

    with torch.no_grad():
        closed_fwd = median_time(lambda: x + 0.5 * E.closed_form(x), repeats=repeats)
        derived_fwd = median_time(lambda: layer(x), repeats=repeats)
    closed_step = median_time(closed_train, repeats=repeats)
    derived_step = median_time(derived_train, repeats=repeats)
    return {"energy": energy, "B": batch, "N": tokens, "d": dim, "H": heads, "closed_forward_s": closed_fwd,
            "forward_ratio": derived_fwd / closed_fwd, "closed_train_s": closed_step,
            "train_ratio": derived_step / closed_step}


def run(quick: bool = True) -> list[dict]:
    """Rows for both energies at the Sudoku block's shape (B = 32 boards, N = 16 cells, d = 32, H = 4) and,
    unless quick, at a longer sequence (N = 128, d = 64, H = 4)."""
    torch.set_num_threads(1)
    shapes = [(32, 16, 32, 4)] if quick else [(32, 16, 32, 4), (8, 128, 64, 4)]
    return [compare(name, *shape, repeats=5 if quick else 20) for name in ENERGIES for shape in shapes]
