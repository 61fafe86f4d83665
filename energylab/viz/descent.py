"""Figures for chapter 2: a query descending a 2-D free-energy landscape, energies of looped layers, Algorithm 1.

:func:`landscape_figure` is a 3-D surface of F*(z) over the plane with one descent path per step size drawn on it;
a temperature slider swaps the surface and the paths, a step-size slider shows one path (both are plotly's own
controls: they work on the static website). :func:`landscape_explorer` is the live ipywidgets version.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from energylab.viz import PALETTE, live_figure

__all__ = ["landscape_figure", "landscape_explorer", "energy_curves", "objectives_figure"]

Surface = Callable[[float], tuple[np.ndarray, np.ndarray, np.ndarray]]  # T -> (xs (G,), ys (G,), F (G, G))
Path = Callable[[float, float], np.ndarray]  # (T, η) -> (K+1, 3): x, y, F* along the descent


def _r(a, n: int = 4):
    return np.round(np.asarray(a, dtype=float), n).tolist()


def landscape_figure(surface: Surface, path: Path, tokens: np.ndarray, temperatures: Sequence[float],
                     etas: Sequence[float], title: str = "F*(z) and one query descending it") -> go.Figure:
    """Surface of F* with descent paths; sliders over T (restyles the data) and η (restyles visibility).

    surface(T) gives the grid and F* on it; path(T, η) the (x, y, F*) of each iterate; tokens: (N, 2) positions
    of the mapped tokens W h_i, marked on the floor of the plot. The two sliders touch different trace
    properties (data vs. visibility), so they combine.
    """
    t0, e0 = len(temperatures) // 2, 0
    xs, ys, F = surface(temperatures[t0])
    floor = float(np.min(F))
    fig = go.Figure()
    fig.add_trace(go.Surface(x=_r(xs), y=_r(ys), z=_r(F), colorscale="Viridis", opacity=0.85, showscale=False,
                             contours={"z": {"show": True, "usecolormap": True, "project": {"z": True}}},
                             name="F*"))
    fig.add_trace(go.Scatter3d(x=_r(tokens[:, 0]), y=_r(tokens[:, 1]), z=[round(floor, 4)] * len(tokens),
                               mode="markers", marker={"size": 5, "color": "black", "symbol": "x"}, name="W h_i"))
    for k, eta in enumerate(etas):
        p = path(temperatures[t0], eta)
        fig.add_trace(go.Scatter3d(x=_r(p[:, 0]), y=_r(p[:, 1]), z=_r(p[:, 2]), mode="lines+markers",
                                   marker={"size": 3, "color": PALETTE[1]}, line={"color": PALETTE[1], "width": 5},
                                   name=f"descent, η = {eta:g}", visible=k == e0))
    moving = list(range(len(etas) + 2))
    def scene(xs, ys, F):  # fixed box: a diverging path leaves it instead of flattening the surface
        return {"xaxis": {"range": [float(xs[0]), float(xs[-1])], "title": "z₁"},
                "yaxis": {"range": [float(ys[0]), float(ys[-1])], "title": "z₂"},
                "zaxis": {"range": [round(float(np.min(F)), 4), round(float(np.max(F)), 4)], "title": "F*"}}

    t_steps = []
    for T in temperatures:
        xs, ys, F = surface(T)
        paths = [path(T, eta) for eta in etas]
        t_steps.append({"label": f"{T:g}", "method": "update", "args": [{
            "x": [_r(xs), _r(tokens[:, 0])] + [_r(p[:, 0]) for p in paths],
            "y": [_r(ys), _r(tokens[:, 1])] + [_r(p[:, 1]) for p in paths],
            "z": [_r(F), [round(float(np.min(F)), 4)] * len(tokens)] + [_r(p[:, 2]) for p in paths]},
            {"scene": scene(xs, ys, F)}, moving]})
    e_steps = [{"label": f"{eta:g}", "method": "restyle",
                "args": [{"visible": [j == k for j in range(len(etas))]}, list(range(2, len(etas) + 2))]}
               for k, eta in enumerate(etas)]
    fig.update_layout(title=title, height=560, margin={"l": 0, "r": 0, "t": 50, "b": 0},
                      scene=scene(*surface(temperatures[t0])),
                      sliders=[{"active": t0, "steps": t_steps, "currentvalue": {"prefix": "T = "},
                                "pad": {"t": 10}, "y": 0.08, "len": 0.45, "x": 0.0},
                               {"active": e0, "steps": e_steps, "currentvalue": {"prefix": "η = "},
                                "pad": {"t": 10}, "y": 0.08, "len": 0.45, "x": 0.55}])
    return fig


def landscape_explorer(surface: Surface, path: Path, tokens: np.ndarray, T: float = 1.0, eta: float = 1.0):
    """ipywidgets sliders for T and η that recompute the surface and the path live (needs a kernel)."""
    import ipywidgets as widgets

    def draw(T, eta):
        fig = landscape_figure(surface, path, tokens, [T], [eta], title=f"T = {T:.3g}, η = {eta:.2f}")
        fig.update_layout(sliders=[])
        return fig

    t_slider = widgets.FloatLogSlider(value=T, base=10, min=-1.3, max=1.0, step=0.05, description="T",
                                      continuous_update=False)
    e_slider = widgets.FloatSlider(value=eta, min=0.05, max=3.0, step=0.05, description="η",
                                   continuous_update=False)
    return live_figure(draw, T=t_slider, eta=e_slider)


def energy_curves(curves: dict[str, Sequence[float]], title: str, yaxis: str = "energy",
                  symlog: bool = False) -> go.Figure:
    """Energy against iteration, one curve per named run; ``symlog`` plots sign(E)·log10(1 + |E|)."""
    fig = go.Figure()
    for k, (name, ys) in enumerate(curves.items()):
        y = np.asarray(ys, dtype=float)
        if symlog:
            y = np.sign(y) * np.log10(1 + np.abs(y))
        fig.add_trace(go.Scatter(x=list(range(len(y))), y=_r(y, 6), mode="lines+markers", name=name,
                                 line={"color": PALETTE[k % len(PALETTE)]}))
    fig.update_layout(title=title, xaxis_title="iteration k",
                      yaxis_title=f"sign·log10(1+|{yaxis}|)" if symlog else yaxis, height=420,
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def objectives_figure(runs: dict[str, dict[str, Sequence[float]]], title: str) -> go.Figure:
    """Algorithm 1: per run, F* (left), cross-entropy (middle) and test accuracy (right) against the epoch."""
    keys = [("free_energy", "mean F*(z, W)"), ("cross_entropy", "cross-entropy"), ("test_accuracy", "test accuracy")]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[k[1] for k in keys], horizontal_spacing=0.08)
    for r, (name, hist) in enumerate(runs.items()):
        for c, (key, _) in enumerate(keys):
            ys = hist[key]
            fig.add_trace(go.Scatter(x=list(range(1, len(ys) + 1)), y=_r(ys), mode="lines", name=name,
                                     line={"color": PALETTE[r % len(PALETTE)]}, showlegend=c == 0,
                                     legendgroup=name), row=1, col=c + 1)
    fig.update_xaxes(title_text="epoch")
    fig.update_layout(title=title, height=380, margin={"l": 50, "r": 20, "t": 70, "b": 50})
    return fig
