"""Figures for chapter 3 (modern Hopfield networks): retrieval against the number of memories P and β, storage
capacity against d, and the regimes of a trained model's attention heads.

Inputs are the grids of :class:`energylab.experiments.hopfield.Results`, shaped (len(P), len(β)), the dict of
:func:`energylab.experiments.hopfield_capacity.capacity` and the rows of
:func:`energylab.experiments.hopfield_heads.head_table`.
Example retrievals are image grids: use :func:`energylab.viz.images.image_grid`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from energylab.viz import PALETTE

__all__ = ["retrieval_figure", "metastable_figure", "capacity_figure", "head_regimes_figure"]


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


def capacity_figure(result: dict, growth: float, title: str = "Storage capacity of random patterns") -> go.Figure:
    """Left: failure rate against P (log axis), one line per d, with the allowed rate dashed. Right: the capacity P*
    against d (log axis), the fitted exponential P* ∝ growth^d through the last point, and the classical 0.138 d."""
    cfg, rows = result["config"], result["rows"]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=["share of queries not retrieved", "capacity P*: largest P at the allowed rate"])
    for i, row in enumerate(rows):
        fig.add_trace(go.Scatter(x=row["P"], y=_r(row["rate"]), mode="lines+markers", name=f"d = {row['d']}",
                                 line={"color": PALETTE[i % len(PALETTE)]}), row=1, col=1)
    P_all = [P for row in rows for P in row["P"]]
    fig.add_trace(go.Scatter(x=[min(P_all), max(P_all)], y=[cfg["max_error"]] * 2, mode="lines",
                             name=f"allowed rate {cfg['max_error']:g}", line={"color": "black", "dash": "dash"}),
                  row=1, col=1)
    kept = [row for row in rows if row["capacity"] > 0]
    ds, caps = [row["d"] for row in kept], [row["capacity"] for row in kept]
    fig.add_trace(go.Scatter(x=ds, y=caps, mode="lines+markers", name="measured P*", line={"color": "black"}),
                  row=1, col=2)
    last_d, last = ds[-1], caps[-1]
    fig.add_trace(go.Scatter(x=ds, y=_r([last * growth ** (d - last_d) for d in ds]), mode="lines",
                             name=f"{growth:.2f}^d (fit)", line={"color": PALETTE[1], "dash": "dot"}), row=1, col=2)
    fig.add_trace(go.Scatter(x=ds, y=_r([0.138 * d for d in ds]), mode="lines", name="0.138 d (classical)",
                             line={"color": "grey", "dash": "dash"}), row=1, col=2)
    fig.update_xaxes(type="log", title_text="stored patterns P", row=1, col=1)
    fig.update_yaxes(title_text="failure rate", range=[-0.02, 1.02], row=1, col=1)
    fig.update_xaxes(title_text="dimension d", row=1, col=2)
    fig.update_yaxes(type="log", title_text="P*", row=1, col=2)
    fig.update_layout(title=title, height=430, margin={"l": 60, "r": 20, "t": 70, "b": 50})
    return fig


def head_regimes_figure(tables: dict[str, list[dict]], n_tokens: int, single: float,
                        title: str = "What each head averages, per iteration") -> go.Figure:
    """One box per (iteration t, head h) and per model in ``tables`` (name -> rows of ``head_table``): the
    quartiles and the 10–90% whiskers of the participation ratio over all query cells, with the regime
    boundaries r = ``single`` and r = N/2 dashed."""
    fig = go.Figure()
    for i, (name, rows) in enumerate(tables.items()):
        x = [f"t={row['t']} h{row['head']}" for row in rows]
        q = {k: _r([row["quantiles"][k] for row in rows]) for k in ("q10", "q25", "q50", "q75", "q90")}
        fig.add_trace(go.Box(x=x, lowerfence=q["q10"], q1=q["q25"], median=q["q50"], q3=q["q75"],
                             upperfence=q["q90"], name=name, marker={"color": PALETTE[i % len(PALETTE)]}))
    for y, label in ((n_tokens / 2, f"N/2 = {n_tokens / 2:g}: global above"), (single, f"{single:g}: one token below")):
        fig.add_hline(y=y, line={"color": "grey", "dash": "dash"}, annotation_text=label,
                      annotation_position="top left")
    fig.update_layout(title=title, boxmode="group", height=420, margin={"l": 60, "r": 20, "t": 50, "b": 60},
                      yaxis={"title": "participation ratio 1/Σ p² (tokens averaged)", "range": [0, n_tokens + 0.5]},
                      xaxis={"title": "iteration t, head h"})
    return fig
