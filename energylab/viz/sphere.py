"""Tokens on the sphere, drawn: an animated 3-D viewer that needs no kernel, and a live ipywidgets explorer.

``sphere_figure`` turns a token trajectory (S, N, d) into a plotly figure whose frames are precomputed, so its
play button and time slider work on the static website. Coordinates are rounded (particles to 3 decimals, trails
to 2) and sent as plain lists, which keeps a 200-frame, 64-particle animation well under 1 MB of page.
For d > 3 the tokens are shown through a 3-D basis: the top-3 principal directions of all states (uncentred, so
the origin stays put) unless you pass one, e.g. one head's subspace; projected tokens lie inside the ball.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go
import torch

from energylab._checks import check_tensor


def _rounded(a: torch.Tensor, decimals: int) -> list:
    return [round(v, decimals) for v in a.tolist()]


def _basis(x: torch.Tensor, basis) -> torch.Tensor:
    d = x.shape[-1]
    if basis is not None:
        check_tensor("basis", basis, ndim=2)
        if tuple(basis.shape) != (d, 3):
            raise ValueError(f"basis must have shape (d, 3) = {(d, 3)}, got {tuple(basis.shape)}")
        return basis.to(x)
    if d == 3:
        return torch.eye(3, dtype=x.dtype, device=x.device)
    # top-3 right singular vectors of all states stacked: (S N, d) -> (d, 3)
    _, _, vh = torch.linalg.svd(x.reshape(-1, d), full_matrices=False)
    return vh[:3].T


def _frame_traces(y: torch.Tensor, f: int, trail: int, stride: int) -> tuple[dict, dict]:
    """Particles at frame f, and their ghosts ``stride``, 2 ``stride``, ... frames back; y is (F, N, 3)."""
    back = [max(0, f - k * stride) for k in range(1, trail + 1)]
    ghosts = y[back].reshape(-1, 3)  # (L N, 3): ghost k of token i at row (k - 1) N + i
    particles = {ax: _rounded(y[f, :, a], 3) for a, ax in enumerate("xyz")}
    return particles, {ax: _rounded(ghosts[:, a], 2) for a, ax in enumerate("xyz")}


def sphere_figure(x: torch.Tensor, times: torch.Tensor | None = None, *, trail: int = 2, stride: int = 3,
                  max_frames: int = 200,
                  basis: torch.Tensor | None = None, title: str = "Tokens on the sphere",
                  marker_size: int = 4, frame_ms: int = 60) -> go.Figure:
    """Animated 3-D view of token trajectories x: (S, N, d) (S saved states) at their times (S,).

    Frames are subsampled evenly to at most ``max_frames``; each shows the particles (coloured by token index)
    and a fading trail of ``trail`` smaller ghosts at their positions ``stride``, 2 ``stride``, ... frames earlier.
    A play button and a time slider drive the animation. The figure of :func:`sphere_figure_dict`, validated.
    """
    d = sphere_figure_dict(x, times, trail=trail, stride=stride, max_frames=max_frames, basis=basis, title=title,
                           marker_size=marker_size, frame_ms=frame_ms)
    layout = {**d["layout"], "title": title}  # set as plotly sets a string title (same JSON as before the dict)
    return go.Figure(data=d["data"], frames=d["frames"]).update_layout(**layout)


def sphere_figure_dict(x: torch.Tensor, times: torch.Tensor | None = None, *, trail: int = 2, stride: int = 3,
                       max_frames: int = 200, basis: torch.Tensor | None = None, title: str = "Tokens on the sphere",
                       marker_size: int = 4, frame_ms: int = 60) -> dict:
    """:func:`sphere_figure` as a plain plotly dict (data, layout, frames), not validated: plotly's validation of
    every frame's coordinates takes most of the time of a figure with many frames, and the live explorer shows
    this dict directly (``plotly.io.show(d, validate=False)``)."""
    check_tensor("x", x, ndim=3)
    S, N, d = x.shape
    if d < 3:
        raise ValueError(f"x must have d >= 3 coordinates per token, got shape {tuple(x.shape)}")
    if times is None:
        times = torch.arange(S, dtype=x.dtype)
    check_tensor("times", times, ndim=1)
    if times.shape[0] != S:
        raise ValueError(f"times must have {S} entries (one per state of x), got {times.shape[0]}")
    for name, v, low in (("trail", trail, 0), ("stride", stride, 1), ("max_frames", max_frames, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    x = x.detach().to("cpu", torch.float64)
    keep = torch.linspace(0, S - 1, min(S, max_frames)).round().long().unique()  # frame -> state index
    y = x[keep] @ _basis(x, basis)  # (F, N, 3)
    frame_times = times.detach().cpu()[keep].tolist()

    u, v = torch.meshgrid(torch.linspace(0, math.pi, 13), torch.linspace(0, 2 * math.pi, 25), indexing="ij")
    ball = {"type": "surface", "x": (u.sin() * v.cos()).mul(100).round().div(100).tolist(),
            "y": (u.sin() * v.sin()).mul(100).round().div(100).tolist(),
            "z": u.cos().mul(100).round().div(100).tolist(),
            "opacity": 0.12, "showscale": False, "colorscale": [[0, "#9ecae1"], [1, "#9ecae1"]], "hoverinfo": "skip"}
    particles, ghosts = _frame_traces(y, 0, trail, stride)
    ghost_size = [marker_size * (1 - 0.6 * k / (trail + 1)) for k in range(1, trail + 1) for _ in range(N)]
    data = [ball,
            {"type": "scatter3d", **ghosts, "mode": "markers", "name": "trail", "hoverinfo": "skip",
             "marker": {"size": ghost_size, "color": list(range(N)) * trail, "colorscale": "Turbo",
                        "opacity": 0.35, "cmin": 0, "cmax": max(N - 1, 1)}},
            {"type": "scatter3d", **particles, "mode": "markers", "name": "tokens",
             "marker": {"size": marker_size, "color": list(range(N)), "colorscale": "Turbo",
                        "cmin": 0, "cmax": max(N - 1, 1)}}]
    frames = []
    for f, tf in enumerate(frame_times):
        p, g = _frame_traces(y, f, trail, stride)
        frames.append({"name": str(f), "traces": [1, 2],
                       "data": [{"type": "scatter3d", **g}, {"type": "scatter3d", **p}]})
    play = {"frame": {"duration": frame_ms, "redraw": True}, "fromcurrent": True, "transition": {"duration": 0}}
    stop = {"frame": {"duration": 0, "redraw": False}, "mode": "immediate", "transition": {"duration": 0}}
    slider_steps = [{"method": "animate", "label": f"{tf:.3g}",
                     "args": [[str(f)], {"mode": "immediate", "frame": {"duration": 0, "redraw": True},
                                         "transition": {"duration": 0}}]} for f, tf in enumerate(frame_times)]
    axis = {"range": [-1.1, 1.1], "visible": False}
    layout = {
        "title": {"text": title}, "height": 520, "margin": {"l": 0, "r": 0, "t": 40, "b": 0}, "showlegend": False,
        "scene": {"xaxis": axis, "yaxis": axis, "zaxis": axis, "aspectmode": "cube",
                  "camera": {"eye": {"x": 1.0, "y": 1.0, "z": 0.7}}},
        "updatemenus": [{"type": "buttons", "x": 0.02, "y": 0.02, "xanchor": "left", "yanchor": "bottom",
                         "direction": "left",
                         "buttons": [{"label": "▶ play", "method": "animate", "args": [None, play]},
                                     {"label": "❚❚", "method": "animate", "args": [[None], stop]}]}],
        "sliders": [{"active": 0, "steps": slider_steps, "x": 0.2, "len": 0.78, "y": 0.02, "yanchor": "bottom",
                     "currentvalue": {"prefix": "t = "}, "pad": {"t": 0, "b": 0}}]}
    return {"data": data, "layout": layout, "frames": frames}


def figure_bytes(fig: go.Figure) -> int:
    """Bytes the figure adds to a page: the length of its HTML div without plotly.js (what the book embeds)."""
    return len(fig.to_html(include_plotlyjs=False, include_mathjax=False, full_html=False).encode())


def explorer_figure(params: dict, simulate=None, max_frames: int = 100) -> dict:
    """What one click of :func:`sphere_explorer` computes: ``simulate(**params)`` (default
    ``energylab.flows.simulate_preset``), drawn by :func:`sphere_figure_dict` with at most ``max_frames`` frames."""
    if simulate is None:
        from energylab.flows import simulate_preset as simulate
    traj = simulate(**params)
    return sphere_figure_dict(traj.x[:, 0], traj.times, max_frames=max_frames,
                              title=f"{params['preset']}, β = {params['beta']:.3g}")


def sphere_explorer(simulate=None, draw: bool = True, max_frames: int = 100):
    """Live controls (n, beta, preset, heads, step, steps, SA/USA, causal, seed) that re-simulate on click.

    ``simulate(n=, beta=, preset=, heads=, step=, steps=, normalized=, causal=, seed=)`` must return an object
    with ``times`` (S,) and ``x`` (S, B, N, d); the default is ``energylab.flows.simulate_preset``. Needs a running
    kernel (JupyterLab, Colab, Binder); on the static website the controls are inert. ``draw=False`` waits for
    the first click instead of simulating at once; ``max_frames`` caps the animation (each frame costs page size).
    """
    import ipywidgets as widgets
    import plotly.io

    from energylab.flows import PRESETS
    style = {"description_width": "70px"}
    controls = {
        "n": widgets.IntSlider(value=64, min=4, max=256, step=4, description="tokens n", style=style),
        "beta": widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=2, step=0.05, description="β", style=style),
        "preset": widgets.Dropdown(options=PRESETS, value="identity", description="Q, K, V", style=style),
        "heads": widgets.Dropdown(options=[1, 3], value=1, description="heads", style=style),
        "step": widgets.FloatSlider(value=0.1, min=0.01, max=0.5, step=0.01, description="step h", style=style),
        "steps": widgets.IntSlider(value=200, min=10, max=1000, step=10, description="steps", style=style),
        "normalized": widgets.ToggleButtons(options=[("SA", True), ("USA", False)], value=True,
                                            description="flow", style=style),
        "causal": widgets.Checkbox(value=False, description="causal mask"),
        "seed": widgets.IntText(value=0, description="seed", style=style),
    }
    button = widgets.Button(description="simulate", button_style="primary")
    out = widgets.Output()

    def redraw(_=None):
        fig = explorer_figure({k: w.value for k, w in controls.items()}, simulate, max_frames)
        out.clear_output(wait=True)
        with out:
            plotly.io.show(fig, validate=False)  # built by the library: skip plotly's per-number validation

    button.on_click(redraw)
    box = widgets.VBox([widgets.HBox([widgets.VBox(list(controls.values())[:5]),
                                      widgets.VBox([*list(controls.values())[5:], button])]), out])
    if draw:
        redraw()
    return box


__all__ = ["sphere_figure", "sphere_figure_dict", "figure_bytes", "explorer_figure", "sphere_explorer"]
