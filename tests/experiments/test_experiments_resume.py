"""out_dir/resume of the experiments that train several models one after another (forms, recurrent) or compute a grid
(hopfield): a run interrupted part-way and resumed gives the numbers of one uninterrupted run, and reuses what the
interrupted run had finished."""
import dataclasses

import pytest
import torch

from energylab.experiments import forms, get_config, hopfield, recurrent


def _interrupt_training(monkeypatch, module, after: int):
    """Make ``module.train`` raise KeyboardInterrupt once ``after`` optimiser steps have run in this call, counted
    over every model it trains; returns the list of steps trained, so a resumed call can be counted too."""
    real, steps = module.train, []

    def train(*args, after_step=None, **kwargs):
        def step(model, s):
            if after_step is not None:
                after_step(model, s)
            steps.append(s)
            if len(steps) == after:
                raise KeyboardInterrupt

        return real(*args, after_step=step, **kwargs)

    monkeypatch.setattr(module, "train", train)
    return steps


def _without(d: dict, word: str) -> dict:
    return {k: v for k, v in d.items() if word not in k}


FORMS = dataclasses.replace(get_config("forms", "quick"), layers=("form-mha", "form-ea"), seeds=(0, 1), steps=4,
                            n_train=64, n_test=16, dim=16, warmup_steps=1, timing_steps=1, checkpoint_every=2,
                            device="cpu")


def test_forms_resumed_equals_uninterrupted(tmp_path, monkeypatch):
    whole = forms.run(FORMS, out_dir=str(tmp_path / "whole"))
    steps = _interrupt_training(monkeypatch, forms, after=11)  # in the 3rd of 4 runs, after its checkpoint at step 2
    with pytest.raises(KeyboardInterrupt):
        forms.run(FORMS, out_dir=str(tmp_path / "cut"))
    assert (tmp_path / "cut" / "form-ea" / "seed0" / "checkpoint.pt").exists()
    assert not (tmp_path / "cut" / "form-ea" / "seed1").exists()
    steps.clear()
    resumed = forms.run(FORMS, out_dir=str(tmp_path / "cut"), resume=True)
    assert len(steps) == 2 + 4  # only the steps the interrupted run had not checkpointed
    assert resumed.histories == whole.histories
    # the accuracies agree; the times per step are measured by each call (None: finished before this call)
    assert [_without(r, "seconds") for r in resumed.tables["runs"]] == [
        _without(r, "seconds") for r in whole.tables["runs"]]
    assert [r["seconds_per_step"] is None for r in resumed.tables["runs"]] == [True, True, False, False]
    assert _without(resumed.final, "time_ratio") == _without(whole.final, "time_ratio")
    with pytest.raises(ValueError, match="already holds a run"):
        forms.run(FORMS, out_dir=str(tmp_path / "cut"))  # a fresh run never overwrites one
    with pytest.raises(ValueError, match="n_train"):
        forms.run(dataclasses.replace(FORMS, n_train=96), out_dir=str(tmp_path / "cut"), resume=True)


RECURRENT = dataclasses.replace(recurrent.PROFILES["quick"], layers=("itrsa", "itrsa:1h+spectral"), n_train=64,
                                n_test=16, dim=16, heads=2, iterations=2, test_iterations=(2, 4), epochs=2,
                                warmup_steps=1, sweep=(2.0,), lyap_steps=2, lyap_warmup=1, n_sweep=8,
                                trace_iterations=0, checkpoint_every=1)


def test_recurrent_resumed_equals_uninterrupted(tmp_path, monkeypatch):
    whole = recurrent.run(RECURRENT, out_dir=str(tmp_path / "whole"))
    steps = _interrupt_training(monkeypatch, recurrent, after=6)  # 4 steps per model: 2 into the second one
    with pytest.raises(KeyboardInterrupt):
        recurrent.run(RECURRENT, out_dir=str(tmp_path / "cut"))
    assert (tmp_path / "cut" / "itrsa_1h+spectral" / "checkpoint.pt").exists()  # ":" is no file name character
    steps.clear()
    resumed = recurrent.run(RECURRENT, out_dir=str(tmp_path / "cut"), resume=True)
    assert len(steps) == 3  # the second model from its checkpoint at step 1 (the 6th step raised before saving)
    assert resumed.to_dict() == whole.to_dict()


HOPFIELD = dataclasses.replace(get_config("hopfield", "quick"), n_patterns=(10, 30, 100), betas=(2.0, 16.0),
                               n_queries=12, example_patterns=30, n_examples=2, device="cpu")


def test_hopfield_resumed_equals_uninterrupted(tmp_path, monkeypatch):
    whole = hopfield.run(HOPFIELD, out_dir=str(tmp_path / "whole"))
    assert whole.to_dict() == hopfield.run(HOPFIELD).to_dict()  # the checkpoints change no number
    real, calls, stop = hopfield.retrieve, [], [4]

    def retrieve(*args):
        calls.append(args[1].shape[0])
        if len(calls) == stop[0]:  # the second β at P = 30: P = 10 is finished, P = 30 is not
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(hopfield, "retrieve", retrieve)
    with pytest.raises(KeyboardInterrupt):
        hopfield.run(HOPFIELD, out_dir=str(tmp_path / "cut"))
    assert sorted(p.name for p in (tmp_path / "cut").iterdir()) == ["0-P10", "1-P30"]
    assert not (tmp_path / "cut" / "1-P30" / "checkpoint.pt").exists()
    calls.clear()
    stop[0] = None
    resumed = hopfield.run(HOPFIELD, out_dir=str(tmp_path / "cut"), resume=True)
    assert calls == [30, 30, 100, 100]  # P = 10 was reused
    assert resumed.to_dict() == whole.to_dict()
    assert torch.tensor(resumed.extra["examples"]["query"]).shape == (2, 28, 28)
    with pytest.raises(ValueError, match="already holds a run"):
        hopfield.run(HOPFIELD, out_dir=str(tmp_path / "cut"))
    with pytest.raises(ValueError, match="n_queries"):
        hopfield.run(dataclasses.replace(HOPFIELD, n_queries=13), out_dir=str(tmp_path / "cut"), resume=True)
