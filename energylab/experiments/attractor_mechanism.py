"""Why the bare attractor model's masked prediction is input-blind (chapter 7, section 7.5): how its couplings move
relative to the data correlations during training, and when the dynamics carries a masked patch onto the mean digit.
Built on :mod:`energylab.experiments.attractor`; the chapter and ``tests/experiments/test_attractor_mechanism.py``
call these functions."""
from __future__ import annotations

import dataclasses

import torch

from energylab.engine.batches import EpochOrder
from energylab.experiments.attractor import Config, bare_curve, corrupt_test, train_bare
from energylab.models.attractor import BareSelfAttention, correlation_couplings
from energylab.tasks import images as im

__all__ = ["config_of", "coupling_alignment", "coupling_mechanism", "MEAN_DIGIT_TOL"]

MEAN_DIGIT_TOL = 1e-3  # a masked prediction within this MSE of the mean digit (masked pixels) "is" the mean digit


def config_of(record: dict) -> Config:
    """The :class:`Config` of a run from its recorded config (``Results.config``: lists back to tuples); a key
    that is not a field of Config raises TypeError."""
    if not isinstance(record, dict):
        raise TypeError(f"record must be a run's config dict, got {type(record).__name__}")
    return Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in record.items()})


@torch.no_grad()
def coupling_alignment(model: BareSelfAttention, spins: torch.Tensor) -> float:
    """cos(J, C): the cosine between the couplings and the uncentred data correlations
    C_ij = mean_b x_bi x_bj^T (:func:`~energylab.models.attractor.correlation_couplings`, the Hebbian minimiser
    of the loss as lambda -> 0) of ``spins`` (B, N, 2a) embedded by the model; 1 = Hebbian couplings. The sums are
    taken in float64 (a float32 sum over N^2 d^2 couplings is off in the sixth digit)."""
    C = correlation_couplings(model.embed(spins).double())
    J = model.J.detach().double()
    return float((J * C).sum() / (J.norm() * C.norm()))


def coupling_mechanism(cfg: Config, data: im.ImageData, device: torch.device, epochs: tuple[int, ...] = (1, 3, 20)
                       ) -> dict:
    """How the bare model's couplings and its masked prediction evolve with training: one run of
    :func:`train_bare` for ``max(epochs)`` epochs (the step schedule depends on the step only, so its first k epochs
    are the k-epoch run), measured at the end of each epoch in ``epochs``.

    Returns ``{"mean_digit": the mean digit's masked MSE, "epochs": {k: row}}`` with, per row, ``cos_JC``
    (:func:`coupling_alignment` on the training digits), ``mse`` (the masked MSE at t = 0..cfg.iterations, on the
    first ``cfg.n_eval`` test digits corrupted by :func:`corrupt_test`), ``to_mean_digit`` (the MSE between the
    prediction and the mean digit on the masked pixels, per t) and ``collapse_t``: the first t >= 1 at which that
    MSE is below :data:`MEAN_DIGIT_TOL` (None if it never is).
    """
    if not epochs or any(not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in epochs):
        raise ValueError(f"epochs must be positive ints, got {epochs!r}")
    spins = im.pixels_to_spins(im.patchify(data.train, cfg.patch)).to(device)
    test = data.test[:cfg.n_eval].to(device)
    mean_patches = im.patchify(data.train.mean(0, keepdim=True), cfg.patch).to(device)
    spe = EpochOrder(len(spins), cfg.batch_size, drop_last=False, stride=1000).steps_per_epoch
    at_step = {k * spe - 1: k for k in epochs}
    rows = {}

    def watch(model, step):
        if step not in at_step:
            return
        was = model.training
        model.eval()
        curve, pix, target, mask = bare_curve(model, cfg, test, "masked", cfg.iterations)
        to_mean = [float(im.masked_mse(p, mean_patches.expand_as(p), mask).mean()) for p in pix]
        collapse = next((t for t in range(1, len(to_mean)) if to_mean[t] < MEAN_DIGIT_TOL), None)
        rows[at_step[step]] = {"cos_JC": coupling_alignment(model, spins), "mse": curve, "to_mean_digit": to_mean,
                               "collapse_t": collapse}
        model.train(was)

    train_bare(dataclasses.replace(cfg, epochs=max(epochs)), data, device, watch=watch)
    _, target, mask = corrupt_test("masked", test, cfg.patch, cfg)
    mean_digit = float(im.masked_mse(mean_patches.expand_as(target), target, mask).mean())
    return {"mean_digit": mean_digit, "epochs": {k: rows[k] for k in sorted(rows)}}
