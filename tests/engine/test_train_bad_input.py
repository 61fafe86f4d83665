"""Bad input to the training engine (issue 35): TrainConfig types and ranges, and corrupted checkpoints."""
import os
import zipfile

import numpy as np
import pytest
import torch
from torch import nn

from energylab.engine.runs import CHECKPOINT, state_checksum
from energylab.engine.train import TrainConfig, check_config, train


def _fit(**fields):
    check_config(TrainConfig(**{"progress": False, **fields}))


@pytest.mark.parametrize("field, value", [
    ("lr", True), ("steps", True), ("log_every", True), ("warmup_steps", False), ("epochs", True),
    ("momentum", True), ("min_lr_ratio", True), ("lr_gamma", True), ("grad_clip", True), ("weight_decay", True),
    ("steps", 2.0), ("lr", "1e-3"), ("seed", 1.5),
])
def test_bools_and_wrong_types_are_refused_naming_the_field(field, value):
    with pytest.raises(TypeError, match=f"^{field} must be "):
        _fit(**{field: value})


@pytest.mark.parametrize("field, value, expected", [
    ("lr_gamma", -0.5, r"lr_gamma must be a finite number in \(0, 1\], got -0.5"),
    ("lr_gamma", 0.0, r"lr_gamma must be a finite number in \(0, 1\], got 0.0"),
    ("lr_gamma", 1.5, r"lr_gamma must be a finite number in \(0, 1\]"),
    ("min_lr_ratio", 5, r"min_lr_ratio must be a finite number in \[0, 1\], got 5"),
    ("min_lr_ratio", -0.1, r"min_lr_ratio must be a finite number in \[0, 1\]"),
    ("momentum", 1.0, r"momentum must be a finite number in \[0, 1\)"),
    ("betas", (0.9, 1.0), r"betas\[1\] must be a finite number in \[0, 1\)"),
    ("betas", (0.9,), r"betas must be a pair"),
    ("weight_decay", -1e-3, r"weight_decay must be a finite number >= 0"),
    ("lr", float("inf"), r"lr must be a finite number > 0"),
    ("grad_clip", 0.0, r"grad_clip must be a finite number > 0"),
    ("steps", 0, r"steps must be an int >= 1, got 0"),
])
def test_out_of_range_values_are_refused_naming_the_field_and_the_range(field, value, expected):
    with pytest.raises(ValueError, match=expected):
        _fit(**{field: value})


@pytest.mark.parametrize("field", ["progress", "amp", "compile", "eval_at_start"])
def test_flags_must_be_bools(field):
    with pytest.raises(TypeError, match=f"^{field} must be True or False, got 1"):
        _fit(**{field: 1})


def test_the_edges_of_the_ranges_are_accepted():
    _fit(lr_gamma=1.0, min_lr_ratio=1.0, momentum=0.0, betas=(0.0, 0.999), steps=np.int64(3), lr=np.float32(0.1))


# ----------------------------------------------------------------------------- corrupted checkpoints
def _loss(model, batch):
    return model(batch).pow(2).mean(), {}


def _batches(step):
    return torch.randn(4, 3, generator=torch.Generator().manual_seed(step))


CFG = TrainConfig(steps=4, lr=0.1, optimizer="sgd", checkpoint_every=2, progress=False)


def _flip_a_byte_of(path, member_suffix):
    """Flip one byte inside the stored bytes of a zip member (torch stores tensor data uncompressed)."""
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(member_suffix))
        assert info.compress_type == zipfile.ZIP_STORED
    with open(path, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = (int.from_bytes(f.read(2), "little") for _ in range(2))
        at = info.header_offset + 30 + name_len + extra_len + info.file_size // 2
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x10]))


def test_a_bit_flip_in_a_checkpoints_tensor_data_is_refused_naming_the_file(tmp_path):
    out = str(tmp_path / "run")
    torch.manual_seed(0)
    train(nn.Linear(3, 2), _loss, _batches, CFG, out_dir=out)
    path = os.path.join(out, CHECKPOINT)
    before = torch.load(path, weights_only=True)
    _flip_a_byte_of(path, "data/0")  # the first tensor: the model's weight
    after = torch.load(path, weights_only=True)  # torch.load itself does not notice
    assert not torch.equal(before["model"]["weight"], after["model"]["weight"])
    with pytest.raises(ValueError, match=f"checkpoint {path} is corrupt: its contents do not match the checksum"):
        train(nn.Linear(3, 2), _loss, _batches, CFG, out_dir=out, resume=True)


def test_an_intact_checkpoint_resumes_and_carries_its_checksum(tmp_path):
    out = str(tmp_path / "run")
    torch.manual_seed(0)
    train(nn.Linear(3, 2), _loss, _batches, CFG, out_dir=out)
    state = torch.load(os.path.join(out, CHECKPOINT), weights_only=True)
    assert state["checksum"] == state_checksum(state)
    history = train(nn.Linear(3, 2), _loss, _batches, CFG, out_dir=out, resume=True)  # a finished run: its history
    assert history.steps["loss"] == [1, 2, 3, 4]


def test_the_checksum_sees_every_kind_of_value():
    base = {"step": 3, "model": {"w": torch.ones(2)}, "history": {"loss": [0.5, 0.25]}, "window": {}}
    for changed in ({**base, "step": 4}, {**base, "model": {"w": torch.tensor([1.0, 1.0 + 2**-20])}},
                    {**base, "history": {"loss": [0.5, 0.26]}}, {**base, "model": {"w": torch.ones(2).double()}}):
        assert state_checksum(changed) != state_checksum(base)
    assert state_checksum({**base, "checksum": "anything"}) == state_checksum(base)
