"""Figures for chapter 12 (sparse Hopfield energies): exact retrieval against β and the load P, beside softmax.

Input: the dict of :func:`energylab.experiments.sparse_retrieval.retrieval_grid`.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from energylab.experiments.sparse_retrieval import rate
from energylab.viz import PALETTE

__all__ = ["exact_retrieval_figure"]

TITLES = {"sparsemax": "sparsemax: exact", "entmax15": "3/2-entmax: exact", "softmax": "softmax: within tolerance"}


def exact_retrieval_figure(result: dict, title: str = "One step from a noisy pattern") -> go.Figure:
    """One panel per map: the share of queries retrieved against β (log axis), one colour per load P. Solid: exact
    (softmax: within the tolerance); dashed: the ball condition on the patterns alone, which implies exactness."""
    cfg = result["config"]
    maps, betas, loads = cfg["maps"], [float(b) for b in cfg["betas"]], cfg["loads"]
    fig = make_subplots(rows=1, cols=len(maps), shared_yaxes=True,
                        subplot_titles=[TITLES.get(m, m) for m in maps])
    for c, kind in enumerate(maps):
        solid = rate(result, kind, "close" if kind == "softmax" else "exact").numpy()
        dashed = rate(result, kind, "ball_cond").numpy()
        for a, P in enumerate(loads):
            colour = PALETTE[a % len(PALETTE)]
            fig.add_trace(go.Scatter(x=betas, y=np.round(solid[a], 4).tolist(), mode="lines+markers",
                                     name=f"P = {P}", legendgroup=str(P), showlegend=c == 0,
                                     line={"color": colour}), row=1, col=c + 1)
            if kind != "softmax":
                fig.add_trace(go.Scatter(x=betas, y=np.round(dashed[a], 4).tolist(), mode="lines",
                                         name=f"P = {P}, ball condition", legendgroup=str(P), showlegend=False,
                                         line={"color": colour, "dash": "dash"}), row=1, col=c + 1)
        fig.update_xaxes(type="log", title_text="β", row=1, col=c + 1)
    fig.update_yaxes(range=[-0.03, 1.03], title_text="share of queries", row=1, col=1)
    fig.update_layout(title=title, height=420, margin={"l": 60, "r": 20, "t": 70, "b": 50})
    return fig
