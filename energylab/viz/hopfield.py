"""Figures for chapter 3 (modern Hopfield networks): retrieval against the number of memories P and β.

Inputs are the grids of :class:`energylab.experiments.hopfield.Results`, shaped (len(P), len(β)).
Example retrievals are image grids: use :func:`energylab.viz.images.image_grid`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from energylab.viz import PALETTE

__all__ = ["retrieval_figure", "metastable_figure"]


def _r(a):
    return np.round(np.asarray(a, dtype=float), 4).tolist()


def retrieval_figure(n_patterns: Sequence[int], betas: Sequence[float], accuracy, predicted,
                     title: str = "Retrieval from corrupted digits") -> go.Figure:
    """Accuracy against P (log axis), one colour per β; dashed: fraction the one-step condition predicts.

    A β slider highlights one inverse temperature (plotly's own control: works on the static site).
    """
    acc, pred = np.asarray(accuracy, dtype=float), np.asarray(predicted, dtype=float)
    fig = go.Figure()
    for b, beta in enumerate(betas):
        colour = PALETTE[b % len(PALETTE)]
        fig.add_trace(go.Scatter(x=list(map(int, n_patterns)), y=_r(acc[:, b]), mode="lines+markers",
                                 name=f"β = {beta:g}", legendgroup=str(b), line={"color": colour}))
        fig.add_trace(go.Scatter(x=list(map(int, n_patterns)), y=_r(pred[:, b]), mode="lines",
                                 name=f"β = {beta:g}, predicted", legendgroup=str(b), showlegend=False,
                                 line={"color": colour, "dash": "dash"}))
    n = 2 * len(betas)
    steps = [{"label": "all", "method": "restyle", "args": [{"opacity": [1.0] * n}]}]
    for b, beta in enumerate(betas):
        steps.append({"label": f"{beta:g}", "method": "restyle",
                      "args": [{"opacity": [1.0 if k // 2 == b else 0.12 for k in range(n)]}]})
    fig.update_layout(title=title, xaxis={"type": "log", "title": "stored patterns P"},
                      yaxis={"range": [-0.03, 1.03], "title": "fraction retrieved (solid) / predicted (dashed)"},
                      height=440, margin={"l": 60, "r": 20, "t": 50, "b": 50},
                      sliders=[{"active": 0, "steps": steps, "currentvalue": {"prefix": "highlight β = "},
                                "pad": {"t": 50}}])
    return fig


def metastable_figure(n_patterns: Sequence[int], betas: Sequence[float], participation, own_class,
                      title: str = "What the final state averages") -> go.Figure:
    """Two heat maps over (P, β): the participation ratio 1/Σp² (log colour) and the weight on the own class."""
    part, own = np.asarray(participation, dtype=float), np.asarray(own_class, dtype=float)
    ys, xs = [str(int(P)) for P in n_patterns], [f"{b:g}" for b in betas]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16,
                        subplot_titles=["memories averaged, 1/Σ p² (log10)", "weight on the query's own class"])
    fig.add_trace(go.Heatmap(z=_r(np.log10(part)), x=xs, y=ys, colorscale="Viridis", text=_r(np.round(part, 1)),
                             texttemplate="%{text}", colorbar={"x": 0.42, "len": 0.9}), row=1, col=1)
    fig.add_trace(go.Heatmap(z=_r(own), x=xs, y=ys, colorscale="Blues", zmin=0, zmax=1, texttemplate="%{z:.2f}",
                             colorbar={"x": 1.0, "len": 0.9}), row=1, col=2)
    fig.update_xaxes(title_text="β", type="category")
    fig.update_yaxes(title_text="P", type="category")
    fig.update_layout(title=title, height=400, margin={"l": 60, "r": 20, "t": 70, "b": 50})
    return fig
