"""Bad input to the looped-Sudoku harness (issue 35): run settings refused before any data is generated.
(The Sudoku tasks' bad input: tests/tasks/test_sudoku_bad_input.py.)"""
import dataclasses

import pytest

from energylab.experiments import sudoku as exp
from energylab.tasks.sudoku_config import check_run_config

QUICK = exp.PROFILES["quick"]


@pytest.mark.parametrize("fields, error, expected", [
    ({"iterations": 0}, ValueError, r"^iterations must be an int >= 1, got 0"),
    ({"iterations": -2}, ValueError, r"^iterations must be an int >= 1, got -2"),
    ({"test_iterations": (4, 0)}, ValueError, r"^test_iterations must be an int >= 1, got 0"),
    ({"test_iterations": ()}, ValueError, r"^test_iterations must be a non-empty tuple"),
    ({"dim": 66, "heads": 4}, ValueError, r"^dim=66 must be divisible by heads=4"),
    ({"heads": 0}, ValueError, r"^heads must be an int >= 1, got 0"),
    ({"dim": 0}, ValueError, r"^dim must be an int >= 1, got 0"),
    ({"size": 5}, ValueError, r"^size must be one of \[4, 6, 9\]"),
    ({"size": 6}, ValueError, r"^train_set='4x4-id' has 4x4 boards, the config says size=6"),
    ({"test_sets": ("4x4-id", "6x6-ood")}, ValueError, r"^test_sets='6x6-ood' has 6x6 boards"),
    ({"train_set": "sudoku-xl"}, ValueError, r"^train_set: unknown set 'sudoku-xl'"),
    ({"train_set": "rrn:/data"}, ValueError, r"^train_set='rrn:/data': the public files hold 9x9 boards"),
    ({"epochs": 0}, ValueError, r"^epochs must be an int >= 1, got 0"),
    ({"n_train": 10, "batch_size": 64}, ValueError, r"^n_train=10 must be >= batch_size=64"),
    ({"seeds": ()}, ValueError, r"^seeds must be a non-empty tuple"),
    ({"ffn_mult": 0}, ValueError, r"^ffn_mult must be an int >= 1, got 0"),
    ({"iterations": 8.0}, TypeError, r"^iterations must be an int"),
])
def test_harness_refuses_bad_settings_before_making_any_data(tmp_path, monkeypatch, fields, error, expected):
    monkeypatch.setenv("ENERGYLAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(error, match=expected):
        exp.run(dataclasses.replace(QUICK, **fields, progress=False))
    assert not (tmp_path / "cache").exists()  # nothing was generated first


def test_every_profile_passes_the_harness_check():
    for config in exp.PROFILES.values():
        check_run_config(config)
