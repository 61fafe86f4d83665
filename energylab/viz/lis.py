"""Figures for the Newton-attention chapter: descent of one token on F*, LIS learning curves and heat maps.

Functions from numbers to ``go.Figure`` (no model logic). Sliders work on the static website; ``newton_explorer``
is the live ipywidgets version.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from energylab.viz import PALETTE, live_figure

METHOD_COLORS = {"gradient": PALETTE[0], "Newton (Att2nd)": PALETTE[1], "1st-order (Att2nd1st)": PALETTE[2]}


def _r(values: Sequence[float]) -> list[float]:
    return [float(f"{float(v):.6g}") for v in values]


def _gradient_norm_traces(fig: go.Figure, curves: Mapping[str, Sequence[float]]) -> None:
    for k, (name, ys) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(x=list(range(len(ys))), y=_r(ys), mode="lines+markers", name=name,
                                 line={"color": METHOD_COLORS.get(name, PALETTE[k % len(PALETTE)])}))


def descent_by_temperature(runs: Mapping[float, Mapping[str, Sequence[float]]], active: int | None = None,
                           tol: float | None = None) -> go.Figure:
    """‖∇F*(z_k)‖ against k for each method, with a slider over T.

    runs: {T: {method: [‖∇F*(z_0)‖, ‖∇F*(z_1)‖, ...]}}; every T must have the same methods (lengths may differ:
    a run stops when it converges).
    """
    temps = list(runs)
    active = len(temps) // 2 if active is None else active
    fig = go.Figure()
    _gradient_norm_traces(fig, runs[temps[active]])
    steps = [{"label": f"{T:.3g}", "method": "update",
              "args": [{"x": [list(range(len(ys))) for ys in runs[T].values()],
                        "y": [_r(ys) for ys in runs[T].values()]},
                       {"title.text": f"one token descending F* at T = {T:.3g}"}]} for T in temps]
    fig.update_layout(title=f"one token descending F* at T = {temps[active]:.3g}", xaxis_title="iteration k",
                      yaxis_title="‖∇F*(z_k)‖", height=420, margin={"t": 60},
                      sliders=[{"active": active, "steps": steps, "currentvalue": {"prefix": "T = "},
                                "pad": {"t": 40}}])
    fig.update_yaxes(type="log", exponentformat="power")
    if tol is not None:
        fig.add_hline(y=tol, line={"dash": "dot", "color": "gray"})
    return fig


def iterations_vs_temperature(temps: Sequence[float], iterations: Mapping[str, Sequence[float]],
                              max_iter: int | None = None) -> go.Figure:
    """Iterations to converge against T, one curve per method (runs that never converged sit at ``max_iter``)."""
    fig = go.Figure()
    for k, (name, ys) in enumerate(iterations.items()):
        fig.add_trace(go.Scatter(x=_r(temps), y=_r(ys), mode="lines+markers", name=name,
                                 line={"color": METHOD_COLORS.get(name, PALETTE[k % len(PALETTE)])}))
    fig.update_layout(title="iterations until ‖∇F*‖ < tol", xaxis_title="temperature T",
                      yaxis_title="iterations", height=380, margin={"t": 50})
    fig.update_xaxes(type="log")
    if max_iter is not None:
        fig.add_hline(y=max_iter, line={"dash": "dot", "color": "gray"}, annotation_text="did not converge")
    return fig


def newton_explorer(run: Callable[[float], Mapping[str, Sequence[float]]], t_min: float = 0.05, t_max: float = 20.0,
                    value: float = 1.0):
    """ipywidgets control: re-run ``run(T) -> {method: gradient norms}`` live for any temperature."""
    import math

    import ipywidgets as widgets

    def draw(T):
        fig = go.Figure()
        _gradient_norm_traces(fig, run(T))
        fig.update_layout(title=f"T = {T:.3g}", xaxis_title="iteration k", yaxis_title="‖∇F*(z_k)‖",
                          height=340, margin={"t": 50})
        fig.update_yaxes(type="log", exponentformat="power")
        return fig

    slider = widgets.FloatLogSlider(value=value, base=10, min=math.log10(t_min), max=math.log10(t_max), step=0.05,
                                    description="T", continuous_update=False)
    return live_figure(draw, T=slider)


VARIANT_COLORS = {"MHA": PALETTE[0], "MHA-only": PALETTE[5], "MHA2nd1st": PALETTE[1], "MHA2nd1st-only": PALETTE[4],
                  "MHA2nd1stC": PALETTE[2], "MHA2nd1stC-only": PALETTE[6]}


def learning_curves(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], title: str, yaxis: str,
                    bands: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None) -> go.Figure:
    """Curves {variant: (epochs, values)}, colored by variant; optional {variant: (low, high)} shaded bands."""
    fig = go.Figure()
    for k, (name, (xs, ys)) in enumerate(curves.items()):
        color = VARIANT_COLORS.get(name, PALETTE[k % len(PALETTE)])
        if bands is not None and name in bands:
            low, high = bands[name]
            fig.add_trace(go.Scatter(x=_r(list(xs)) + _r(list(xs))[::-1], y=_r(high) + _r(low)[::-1], fill="toself",
                                     line={"width": 0}, fillcolor=color, opacity=0.15, showlegend=False,
                                     hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=_r(xs), y=_r(ys), mode="lines+markers", name=name, line={"color": color}))
    fig.update_layout(title=title, xaxis_title="epoch", yaxis_title=yaxis, height=380, margin={"t": 50})
    return fig


def accuracy_heatmaps(rows: Sequence[Mapping], variants: Sequence[str], title: str = "LIS test accuracy") -> go.Figure:
    """Heat maps of accuracy over task length L (rows) × model width d (columns), one panel per variant.

    rows: dicts with keys L, d, variant, accuracy (the experiment's ``tables["grid"]``), as in paper 000's
    Figures 1-2.
    """
    lengths = sorted({r["L"] for r in rows})
    dims = sorted({r["d"] for r in rows})
    fig = make_subplots(rows=1, cols=len(variants), subplot_titles=list(variants), horizontal_spacing=0.06)
    for c, variant in enumerate(variants, start=1):
        acc = {(r["L"], r["d"]): r["accuracy"] for r in rows if r["variant"] == variant}
        z = [[acc.get((L, d)) for d in dims] for L in lengths]
        text = [["" if v is None else f"{100 * v:.1f}" for v in row] for row in z]
        fig.add_trace(go.Heatmap(z=[[None if v is None else round(100 * v, 2) for v in row] for row in z],
                                 x=[str(d) for d in dims], y=[str(L) for L in lengths], text=text,
                                 texttemplate="%{text}", zmin=0, zmax=100, colorscale="Viridis",
                                 showscale=c == len(variants), colorbar={"title": "acc %"}), row=1, col=c)
        fig.update_xaxes(title_text="d", row=1, col=c)
    fig.update_yaxes(title_text="L", row=1, col=1)
    fig.update_layout(title=title, height=340 + 20 * len(lengths), margin={"t": 80})
    return fig


def curves_with_baselines(panels: Mapping[str, Mapping[str, tuple[Sequence[float], Sequence[float],
                                                                   Sequence[float], Sequence[float]]]],
                          baselines: Mapping[str, float], title: str) -> go.Figure:
    """Side-by-side panels {panel title: {variant: (steps, mean, low, high)}} of accuracy against optimiser steps,
    with a shaded min-max band per variant and a dashed line at ``baselines[panel title]`` (what a model that
    ignores its input scores)."""
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=list(panels), horizontal_spacing=0.08)
    for c, (panel, curves) in enumerate(panels.items(), start=1):
        for k, (name, (xs, ys, low, high)) in enumerate(curves.items()):
            color = VARIANT_COLORS.get(name, PALETTE[k % len(PALETTE)])
            fig.add_trace(go.Scatter(x=_r(xs) + _r(xs)[::-1], y=_r(high) + _r(low)[::-1], fill="toself",
                                     line={"width": 0}, fillcolor=color, opacity=0.15, showlegend=False,
                                     hoverinfo="skip"), row=1, col=c)
            fig.add_trace(go.Scatter(x=_r(xs), y=_r(ys), mode="lines+markers", name=name, legendgroup=name,
                                     showlegend=c == 1, line={"color": color}), row=1, col=c)
        if panel in baselines:
            fig.add_hline(y=round(baselines[panel], 4), line={"dash": "dash", "color": "gray"}, row=1, col=c,
                          annotation_text="input-free", annotation_position="top left")
        fig.update_xaxes(title_text="optimiser step", row=1, col=c)
    fig.update_yaxes(title_text="test accuracy", row=1, col=1)
    fig.update_layout(title=title, height=400, margin={"t": 80})
    return fig
