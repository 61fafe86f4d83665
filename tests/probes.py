"""Inputs shared by the tests of the forms and of the checks (issue 13): seeded float64 draws, the tensors that the
bad-input probes call the forms with, and a catalog form's sample; and :func:`script`, a file of scripts/ loaded as a
module. Imported as ``tests.probes``; not a test file."""
import importlib.util
import pathlib

import torch

from energylab import catalog

F64 = torch.float64
D, N = 4, 5
ROOT = pathlib.Path(__file__).resolve().parents[1]


def script(name):
    """scripts/<name>.py as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gen(seed):
    return torch.Generator().manual_seed(seed)


def rel(a, b):
    return float((a - b).norm() / b.norm())


def randn(*shape, seed=0, dtype=F64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def unit(*shape, seed=0, dtype=F64):
    x = randn(*shape, seed=seed, dtype=dtype)
    return x / x.norm(dim=-1, keepdim=True)


def sample(name, n=5, d=6, seed=0, dtype=F64):
    return catalog.FORMS[name].sample(n, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def zero_heads(t):
    return t[:0]


# queries Z (3, D), tokens H (N, D), a coupling W (D, D), per-head maps W1, W2 (2 heads, 2, D), no tokens at all,
# the coupling as two heads (H, d_h, d), a symmetric matrix
Z, H, W = randn(3, D, seed=1), randn(N, D, seed=2), torch.eye(D, dtype=F64) + 0.1 * randn(D, D, seed=3)
W1, W2 = randn(2, 2, D, seed=4), randn(2, 2, D, seed=5)
NO_KEYS = torch.zeros(0, D, dtype=F64)
W_HEADS = W.reshape(2, D // 2, D)  # multi-head weights (H, d_h, d), two heads
SYM = (lambda B: (B + B.T) / 2)(randn(D, D, seed=6))
