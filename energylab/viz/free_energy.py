"""Figures for the free-energy chapters: Boltzmann weights against temperature, free energy along descent.

Each figure carries its own plotly slider, so it stays interactive on the static website (no kernel);
``*_explorer`` functions return ipywidgets controls that recompute live when a kernel is running.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import plotly.graph_objects as go
import torch

from energylab.viz import PALETTE, live_figure


def _entropy(p: torch.Tensor) -> float:
    return float(-torch.special.xlogy(p, p).sum())


def weights_vs_temperature(E: torch.Tensor, temperatures: Sequence[float], active: int | None = None) -> go.Figure:
    """Bar chart of Boltzmann weights p_i = softmax(−E/T) with a slider over T.

    E: (N,) energies of the N tokens. Each slider step restyles the bars, so it works without a kernel.
    The title of each step reports T, the entropy S and its maximum log N.
    """
    from energylab.forms.free_energy import boltzmann_weights

    E = E.detach().double().flatten()
    labels = [f"h{i + 1}" for i in range(E.numel())]
    weights = [boltzmann_weights(E, T) for T in temperatures]
    active = len(temperatures) // 2 if active is None else active

    def title(k: int) -> str:
        return (f"Boltzmann weights at T = {temperatures[k]:.3g}   (entropy S = {_entropy(weights[k]):.3f}, "
                f"max log N = {math.log(E.numel()):.3f})")

    fig = go.Figure(go.Bar(x=labels, y=[round(float(v), 4) for v in weights[active]],
                           marker_color=PALETTE[0], name="p_i"))
    steps = [{"label": f"{T:.3g}", "method": "update",
              "args": [{"y": [[round(float(v), 4) for v in weights[k]]]}, {"title.text": title(k)}]}
             for k, T in enumerate(temperatures)]
    fig.update_layout(title=title(active), yaxis={"range": [0, 1], "title": "weight p_i"},
                      xaxis_title="token (sorted by energy E_i)", height=420,
                      sliders=[{"active": active, "steps": steps, "currentvalue": {"prefix": "T = "},
                                "pad": {"t": 40}}], margin={"t": 60})
    return fig


def descent_curves(curves: dict[float, Sequence[float]], title: str, yaxis: str = "F*(z_k)",
                   y_range: tuple[float, float] | None = None) -> go.Figure:
    """Energy against iteration, one curve per step size η, with a slider that highlights one η.

    curves: {η: [E_0, E_1, ...]}. All curves stay drawn (faint) so the slider compares them.
    y_range clips the view (diverging runs would otherwise flatten every other curve).
    """
    etas = list(curves)
    fig = go.Figure()
    for k, eta in enumerate(etas):
        ys = [round(float(v), 6) for v in curves[eta]]
        fig.add_trace(go.Scatter(x=list(range(len(ys))), y=ys, mode="lines+markers", name=f"η = {eta:g}",
                                 line={"color": PALETTE[k % len(PALETTE)]}, opacity=1.0))
    steps = []
    for k, eta in enumerate(etas):
        opacity = [1.0 if j == k else 0.15 for j in range(len(etas))]
        steps.append({"label": f"{eta:g}", "method": "restyle", "args": [{"opacity": opacity}]})
    fig.update_layout(title=title, xaxis_title="iteration k", yaxis_title=yaxis, height=420,
                      sliders=[{"active": 0, "steps": steps, "currentvalue": {"prefix": "highlight η = "},
                                "pad": {"t": 40}}], margin={"t": 60})
    if y_range is not None:
        fig.update_yaxes(range=list(y_range))
    return fig


def temperature_explorer(E: torch.Tensor, t_min: float = 0.02, t_max: float = 50.0):
    """ipywidgets version of :func:`weights_vs_temperature`: a log-scale slider that recomputes the weights."""
    import ipywidgets as widgets

    from energylab.forms.free_energy import boltzmann_weights

    E = E.detach().double().flatten()

    def draw(T):
        p = boltzmann_weights(E, T)
        fig = go.Figure(go.Bar(x=[f"h{i + 1}" for i in range(E.numel())], y=[float(v) for v in p],
                               marker_color=PALETTE[0]))
        fig.update_layout(title=f"T = {T:.3g}, entropy {_entropy(p):.3f}", yaxis={"range": [0, 1]},
                          height=320, margin={"t": 50})
        return fig

    slider = widgets.FloatLogSlider(value=1.0, base=10, min=math.log10(t_min), max=math.log10(t_max), step=0.05,
                                    description="T", continuous_update=False)
    return live_figure(draw, T=slider)


def descent_explorer(run: Callable[[float], Sequence[float]], eta: float = 0.5, eta_max: float = 2.5):
    """ipywidgets control: re-run a descent ``run(η) -> energies`` live and plot the energies."""
    import ipywidgets as widgets

    def draw(eta):
        ys = [float(v) for v in run(eta)]
        fig = go.Figure(go.Scatter(x=list(range(len(ys))), y=ys, mode="lines+markers", line={"color": PALETTE[1]}))
        fig.update_layout(title=f"η = {eta:.2f}", xaxis_title="iteration k", yaxis_title="energy",
                          height=320, margin={"t": 50})
        return fig

    slider = widgets.FloatSlider(value=eta, min=0.05, max=eta_max, step=0.05, description="η",
                                 continuous_update=False)
    return live_figure(draw, eta=slider)
