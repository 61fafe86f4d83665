"""Bad input to Algorithm 1 of paper 000 (issue 35): AlternatingConfig, labels, and the cluster task."""
import pytest
import torch

from energylab.experiments import alternating

F64 = torch.float64


@pytest.mark.parametrize("field, value, error, expected", [
    ("epochs", -1, ValueError, r"^epochs must be an int >= 0, got -1"),
    ("epochs", 2.5, TypeError, r"^epochs must be an int"),
    ("eta", 0.0, ValueError, r"^eta must be a finite number > 0"),
    ("lr_W", True, TypeError, r"^lr_W must be a real number"),
    ("T", -1.0, ValueError, r"^T must be a finite number > 0"),
    ("w_objective", "both", ValueError, r"^w_objective must be 'energy' or 'joint'"),
])
def test_alternating_config_refuses_bad_fields(field, value, error, expected):
    with pytest.raises(error, match=expected):
        alternating.AlternatingConfig(**{field: value})


def _task(n=12, seed=0):
    return alternating.cluster_task(n, n_tokens=5, dim=3, n_classes=3, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("bad, error, expected", [
    (lambda y: y + 3, ValueError, r"^y must lie in 0\.\.2 \(n_classes=3\), got values 3\.\.5"),
    (lambda y: y - 1, ValueError, r"^y must lie in 0\.\.2 \(n_classes=3\), got values -1\.\.1"),
    (lambda y: y.double(), TypeError, r"^y must hold integer class indices, got dtype torch.float64"),
    (lambda y: y[:-1], ValueError, r"^y must have shape \(12,\), got \(11,\)"),
    (lambda y: y.tolist(), TypeError, r"^y must be a torch.Tensor of class indices, got list"),
])
def test_alternating_optimisation_names_bad_labels(bad, error, expected):
    H, y = _task()
    with pytest.raises(error, match=expected):
        alternating.alternating_optimisation(H, bad(y), H, y, 3, alternating.AlternatingConfig(epochs=1))
    with pytest.raises(error, match=expected.replace("^y ", "^y_test ")):
        alternating.alternating_optimisation(H, y, H, bad(y), 3, alternating.AlternatingConfig(epochs=1))


def test_alternating_optimisation_checks_n_classes_and_a_changed_config():
    H, y = _task()
    with pytest.raises(ValueError, match=r"^n_classes must be an int >= 1, got 0"):
        alternating.alternating_optimisation(H, y, H, y, 0)
    config = alternating.AlternatingConfig(epochs=1)
    config.epochs = -3  # changed after construction
    with pytest.raises(ValueError, match=r"^epochs must be an int >= 0, got -3"):
        alternating.alternating_optimisation(H, y, H, y, 3, config)
    with pytest.raises(TypeError, match=r"^config must be an AlternatingConfig, got dict"):
        alternating.alternating_optimisation(H, y, H, y, 3, {"epochs": 1})


def test_alternating_optimisation_accepts_valid_edges():
    H, y = _task()
    hist = alternating.alternating_optimisation(H, y, H[:0], y[:0], 3, alternating.AlternatingConfig(epochs=2))
    assert len(hist.free_energy) == 2 and all(map(torch.isfinite, map(torch.tensor, hist.free_energy)))
    hist = alternating.alternating_optimisation(H, y, H, y, 3, alternating.AlternatingConfig(epochs=0))
    assert hist.free_energy == []


@pytest.mark.parametrize("kwargs, error, expected", [
    ({"in_cluster": 2.0}, ValueError, r"^in_cluster must be a finite number in \[0, 1\], got 2.0"),
    ({"in_cluster": -0.1}, ValueError, r"^in_cluster must be a finite number in \[0, 1\]"),
    ({"n_classes": 0}, ValueError, r"^n_classes must be an int >= 1, got 0"),
    ({"n_tokens": 0}, ValueError, r"^n_tokens must be an int >= 1, got 0"),
    ({"dim": 2.0}, TypeError, r"^dim must be an int"),
    ({"radius": 0.0}, ValueError, r"^radius must be a finite number > 0"),
    ({"noise": -1.0}, ValueError, r"^noise must be a finite number >= 0"),
    ({"spread": float("nan")}, ValueError, r"^spread must be a finite number >= 0"),
])
def test_cluster_task_names_bad_arguments(kwargs, error, expected):
    with pytest.raises(error, match=expected):
        alternating.cluster_task(4, **kwargs)


def test_cluster_task_edges_are_valid():
    H, y = alternating.cluster_task(0)
    assert H.shape == (0, 16, 8) and y.shape == (0,)
    H, y = alternating.cluster_task(5, n_tokens=4, in_cluster=1.0, noise=0.0, n_classes=1)
    assert torch.isfinite(H).all() and (y == 0).all()
