"""Notebook setup and the book's plotly renderer."""
import json

import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch

import energylab
from energylab import viz
from energylab.viz import free_energy as fe_viz


def test_setup_notebook_is_reproducible():
    energylab.setup_notebook(3)
    a = torch.randn(5)
    energylab.setup_notebook(3)
    b = torch.randn(5)
    assert torch.equal(a, b)
    assert torch.get_num_threads() == 1
    assert pio.renderers.default == viz.RENDERER_NAME


def test_torch_warning_about_its_own_scripting_is_silenced_for_that_import_only(tmp_path, monkeypatch):
    import sys
    import warnings

    from energylab.notebook import setup as _setup  # setup_notebook's module

    # a stand-in for torch._decomp.decompositions_for_jvp under torch 2.14: it warns when imported
    (tmp_path / "warns_on_import.py").write_text(
        "import warnings\nwarnings.warn('`torch.jit.script` is deprecated. Please switch', FutureWarning)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "warns_on_import", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = _setup.import_quietly("warns_on_import", _setup._TORCH_SCRIPTS_ITSELF[1])
        assert module.__name__ == "warns_on_import" and caught == []
        warnings.warn("`torch.jit.script` is deprecated. Please switch", FutureWarning)  # the reader's own call
    assert len(caught) == 1
    monkeypatch.setattr(torch, "__version__", "2.14.1+cu130")
    assert _setup._torch_at_least(2, 14) and not _setup._torch_at_least(2, 15)
    monkeypatch.setattr(_setup, "_TORCH_SCRIPTS_ITSELF", ("no_such_module_here", "x"))
    energylab.setup_notebook(0)  # a torch >= 2.14 without that module still sets up
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    assert not _setup._torch_at_least(2, 14)


def test_choose_device():
    assert energylab.choose_device("cpu").type == "cpu"
    assert energylab.choose_device("auto").type in {"cpu", "cuda", "mps"}
    with pytest.raises(ValueError, match="device"):
        energylab.choose_device("not-a-device")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            energylab.choose_device("cuda")


def test_seed_must_be_a_non_negative_int():
    with pytest.raises(ValueError, match="seed"):
        energylab.seed_everything(-1)


def test_book_renderer_emits_html_twin_with_stable_id():
    viz.use_book_renderer()
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    bundle_a = viz.BookRenderer().to_mimebundle(fig.to_dict())
    bundle_b = viz.BookRenderer().to_mimebundle(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])).to_dict())
    assert set(bundle_a) == {"application/vnd.plotly.v1+json", "text/html"}
    assert bundle_a["text/html"] == bundle_b["text/html"]  # same figure, same div id
    assert "Plotly.newPlot" in bundle_a["text/html"] and "<script src=" not in bundle_a["text/html"]
    json.dumps(bundle_a["application/vnd.plotly.v1+json"])  # plain JSON, storable in a notebook


def test_temperature_slider_weights_sum_to_one():
    E = torch.tensor([0.0, 1.0, 2.0, 4.0], dtype=torch.float64)
    fig = fe_viz.weights_vs_temperature(E, [0.1, 1.0, 10.0])
    steps = fig.layout.sliders[0].steps
    assert len(steps) == 3
    for step in steps:
        ys = step.args[0]["y"][0]
        assert abs(sum(ys) - 1.0) < 1e-3
    hot = steps[2].args[0]["y"][0]
    assert max(hot) - min(hot) < 0.35 and steps[0].args[0]["y"][0][0] > 0.99  # uniform-ish vs argmax


def test_format_error_hides_round_off_digits_only():
    assert energylab.format_error(3.3e-16) == "< 1e-12"
    assert energylab.format_error(0.0) == "< 1e-12"
    assert energylab.format_error(2.51e-9) == "2.5e-09"
    assert energylab.format_error(float("nan")) == "nan"
    assert energylab.format_error(5e-7, floor=1e-6) == "< 1e-06"


def test_book_renderer_keeps_animation_frames():
    fig = go.Figure(go.Scatter(x=[0], y=[0]), frames=[go.Frame(data=[go.Scatter(x=[1], y=[1])], name="1")])
    bundle = viz.BookRenderer().to_mimebundle(fig.to_dict())
    assert len(bundle["application/vnd.plotly.v1+json"]["frames"]) == 1
    assert "frames" not in viz.BookRenderer().to_mimebundle(go.Figure().to_dict())["application/vnd.plotly.v1+json"]


def test_bar_figure_groups_one_series_per_entry():
    from energylab.viz import bar_figure

    fig = bar_figure(["a", "b", "c"], {"at T": [0.5, 0.25, 1], "at 2T": [0.1, 0.2, 0.3]}, "title", "accuracy")
    assert fig.layout.barmode == "group" and [t.name for t in fig.data] == ["at T", "at 2T"]
    assert list(fig.data[0].x) == ["a", "b", "c"] and list(fig.data[1].y) == [0.1, 0.2, 0.3]
    assert fig.data[0].marker.color != fig.data[1].marker.color
