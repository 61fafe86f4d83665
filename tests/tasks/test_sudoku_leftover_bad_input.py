"""The bad inputs left after issue 47's audit: NaN logits scored as digits, a directory that is not a path, results
without the table a reader asks for."""
import pytest
import torch

from energylab.engine.results import Results
from energylab.experiments import hyperset, recurrent
from energylab.tasks.sudoku import load_satnet, sudoku_accuracy


def test_nan_logits_are_refused():
    logits = torch.zeros(2, 16, 4)
    target = torch.zeros(2, 16, dtype=torch.long)
    assert sudoku_accuracy(logits, target)["board"] == 1.0
    logits[1, 3, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf"):
        sudoku_accuracy(logits, target)


def test_satnet_directory_must_be_a_path():
    with pytest.raises(TypeError, match="directory must be a path"):
        load_satnet(None)


def test_results_without_their_table_name_it():
    empty = Results("x", {})
    with pytest.raises(ValueError, match="no 'accuracy' table"):
        hyperset.seed_accuracies(empty, "hyperset", 8)
    with pytest.raises(ValueError, match="no 'lyapunov' table"):
        recurrent.warmup_readings(empty)
