"""Figures for the expressive-attention chapter: weights vs angle, learning curves over seeds, attention maps."""
from __future__ import annotations

import math

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

COLORS = {"DPA": "#8c1c13", "EA": "#1f5fa8"}  # maroon and blue, as in paper 001's figures


def weights_vs_angle(angles: torch.Tensor, weights: dict[float, dict[str, torch.Tensor]], title: str) -> go.Figure:
    """Unnormalised attention weight of one key vs the query-key angle, one slider step per norm product.

    angles: (A,) radians; weights: {r: {"DPA": (A,), "EA": (A,)}} with r = |q||k|.
    """
    degrees = (angles * 180 / math.pi).tolist()
    scales = list(weights)
    fig = go.Figure()
    for name, w in weights[scales[0]].items():
        fig.add_trace(go.Scatter(x=degrees, y=w.tolist(), name=name, line={"color": COLORS.get(name)}))
    frames = [go.Frame(name=f"{r:g}", data=[go.Scatter(y=w.tolist()) for w in weights[r].values()]) for r in scales]
    fig.frames = frames
    steps = [{"label": f"{r:g}", "method": "animate",
              "args": [[f"{r:g}"], {"mode": "immediate", "frame": {"duration": 0, "redraw": True}}]} for r in scales]
    fig.update_layout(title=title, height=360, xaxis_title="angle between query and key (degrees)",
                      yaxis_title="weight (before normalisation)",
                      sliders=[{"active": 0, "currentvalue": {"prefix": "|q||k| = "}, "steps": steps}])
    return fig


def seed_band_figure(steps: list[int], curves: dict[str, torch.Tensor], title: str, yaxis: str) -> go.Figure:
    """Mean over seeds with a min–max band. curves: {label: (S, T)}; the label's first word picks the colour."""
    fig = go.Figure()
    for label, values in curves.items():
        color = COLORS.get(label.split()[0], None)
        lo, hi, mean = values.min(0).values, values.max(0).values, values.mean(0)
        fig.add_trace(go.Scatter(x=steps + steps[::-1], y=hi.tolist() + lo.flip(0).tolist(), fill="toself",
                                 line={"width": 0}, fillcolor=color, opacity=0.2, showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=steps, y=mean.tolist(), name=f"{label} (mean)", line={"color": color}))
    fig.update_layout(title=title, height=360, xaxis_title="epoch", yaxis_title=yaxis)
    return fig


def attention_maps(maps: dict[str, torch.Tensor], title: str, floor: float = 1e-6) -> go.Figure:
    """Side-by-side heatmaps of log10 attention weights a_mk (rows m = query position, columns k)."""
    fig = make_subplots(rows=1, cols=len(maps), subplot_titles=list(maps))
    for i, a in enumerate(maps.values(), start=1):
        z = torch.log10(a.double().clamp_min(floor))  # float64: float32 log10 is processor-dependent (portable)
        fig.add_trace(go.Heatmap(z=z.tolist(), coloraxis="coloraxis"), row=1, col=i)
        fig.update_yaxes(autorange="reversed", row=1, col=i)
    fig.update_layout(title=title, height=380, coloraxis={"colorscale": "Viridis", "colorbar": {"title": "log10 a"}})
    return fig
