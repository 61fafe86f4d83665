"""Figures for images and their reconstructions: grids, a time slider that works on the static site,
and histograms of within-patch variance (D'Amico & Negri 2024, Fig. 2).

Inputs are tensors or nested lists of grey images in [0, 1]; pixel values are rounded to 3 decimals so
the stored figures stay small and identical from run to run.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from energylab.viz import PALETTE

_GREY = [[0.0, "white"], [1.0, "black"]]  # ink is dark, as on paper


def _img(x) -> np.ndarray:
    a = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=float)
    return np.round(a, 3)


def _heat(z: np.ndarray) -> go.Heatmap:
    return go.Heatmap(z=z[::-1].tolist(), colorscale=_GREY, zmin=0, zmax=1, showscale=False, hoverinfo="skip")


def image_grid(rows, row_titles: list[str], col_titles: list[str], title: str, cell: int = 95) -> go.Figure:
    """A grid of grey images: ``rows[r][c]`` is an (H, W) image in [0, 1]."""
    if len(rows) != len(row_titles) or any(len(r) != len(col_titles) for r in rows):
        raise ValueError(f"rows must be {len(row_titles)} lists of {len(col_titles)} images")
    fig = make_subplots(rows=len(rows), cols=len(col_titles), horizontal_spacing=0.01, vertical_spacing=0.04,
                        column_titles=col_titles, row_titles=row_titles)
    for r, row in enumerate(rows):
        for c, image in enumerate(row):
            fig.add_trace(_heat(_img(image)), row=r + 1, col=c + 1)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, scaleanchor="x", constrain="domain")
    fig.update_layout(title=title, height=cell * len(rows) + 90, width=cell * len(col_titles) + 160,
                      margin={"l": 20, "r": 60, "t": 70, "b": 10})
    return fig


def trajectory_slider(frames, times: list[int], reference, title: str, labels: tuple[str, str] = ("clean", "t")
                      ) -> go.Figure:
    """Reconstructions over time with a slider (plotly's own, so it works without a kernel).

    frames: (T, K, H, W) images at the given ``times``; reference: (K, H, W) clean images shown on the top row.
    """
    frames, reference = _img(frames), _img(reference)
    if frames.ndim != 4 or reference.shape != frames.shape[1:] or len(times) != len(frames):
        raise ValueError(f"frames must be (T, K, H, W) with T = len(times) and reference (K, H, W); got "
                         f"{frames.shape}, {reference.shape}, {len(times)} times")
    k = frames.shape[1]
    fig = make_subplots(rows=2, cols=k, horizontal_spacing=0.01, vertical_spacing=0.05,
                        row_titles=[labels[0], "dynamics"])
    for c in range(k):
        fig.add_trace(_heat(reference[c]), row=1, col=c + 1)
        fig.add_trace(_heat(frames[0, c]), row=2, col=c + 1)
    moving = [2 * c + 1 for c in range(k)]  # trace indices of the bottom row
    steps = [{"method": "restyle", "label": str(t),
              "args": [{"z": [frames[n, c][::-1].tolist() for c in range(k)]}, moving]}
             for n, t in enumerate(times)]
    fig.update_layout(sliders=[{"active": 0, "steps": steps, "currentvalue": {"prefix": f"{labels[1]} = "},
                                "pad": {"t": 10}}],
                      title=title, height=330, width=110 * k + 140, margin={"l": 20, "r": 60, "t": 60, "b": 10})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, scaleanchor="x", constrain="domain")
    return fig


def variance_histograms(values: dict, title: str, bins: int = 25, vmax: float = 0.25) -> go.Figure:
    """Histograms (as bars of densities) of within-patch pixel variances, one per model.

    Pixels in [0, 1] have a variance of at most 1/4, hence the default range [0, vmax].
    """
    edges = np.linspace(0.0, vmax, bins + 1)
    centers = 0.5 * (edges[1:] + edges[:-1])
    fig = go.Figure()
    for n, (name, v) in enumerate(values.items()):
        counts, _ = np.histogram(np.clip(_img(v), 0, vmax), bins=edges)
        dens = counts / max(1, counts.sum())
        fig.add_trace(go.Bar(x=np.round(centers, 4).tolist(), y=np.round(dens, 4).tolist(), name=name,
                             marker_color=PALETTE[n % len(PALETTE)], opacity=0.6))
    fig.update_layout(barmode="overlay", title=title, xaxis_title="variance of the pixels in a predicted patch",
                      yaxis_title="fraction of patches", yaxis_type="log", height=380,
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


__all__ = ["image_grid", "trajectory_slider", "variance_histograms"]
