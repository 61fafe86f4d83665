"""Inputs shared by the tests of the forms and of the checks (issue 13): seeded float64 draws, the tensors that the
bad-input probes call the forms with, and a catalog form's sample; and :func:`script`, a file of scripts/ loaded as a
module; an independent Sudoku solution counter (:func:`brute_count`); and :func:`value_and_grads`, a function's value
and input gradients (the kernels' tests). Imported as ``tests.probes``; not a test file."""
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


def value_and_grads(fn, inputs, weight):
    """fn(*inputs) (detached) and the gradients of Σ fn(*inputs) ⊙ weight with respect to every input."""
    inputs = [t.detach().clone().requires_grad_(True) for t in inputs]
    y = fn(*inputs)
    return y.detach(), torch.autograd.grad((y * weight.to(y.dtype)).sum(), inputs)


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


SUDOKU_BOX = {4: (2, 2), 6: (2, 3), 9: (3, 3)}  # written here, not imported: the Sudoku checks are independent


def sudoku_groups(n: int) -> list[list[int]]:
    """Cell indices of every row, column and box of an n×n Sudoku board (row-major)."""
    br, bc = SUDOKU_BOX[n]
    rows = [[n * r + c for c in range(n)] for r in range(n)]
    cols = [[n * r + c for r in range(n)] for c in range(n)]
    boxes = [[n * (r0 + r) + c0 + c for r in range(br) for c in range(bc)]
             for r0 in range(0, n, br) for c0 in range(0, n, bc)]
    return rows + cols + boxes


def brute_count(flat: list[int], n: int, limit: int = 2) -> int:
    """Solutions of a flat n×n Sudoku board, up to ``limit``: plain backtracking over the first blank, no
    propagation and nothing from the library, so it can check the library's solver and generators."""
    units = sudoku_groups(n)
    peers = [set().union(*(u for u in units if i in u)) - {i} for i in range(n * n)]

    def count(g: list[int]) -> int:
        try:
            i = g.index(0)
        except ValueError:
            return 1
        total = 0
        for v in range(1, n + 1):
            if all(g[p] != v for p in peers[i]):
                g[i] = v
                total += count(g)
                g[i] = 0
                if total >= limit:
                    break
        return total

    return count(list(flat))
