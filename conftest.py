"""Pytest setup shared by library tests and nbval notebook checks.

One thread everywhere: the committed notebook outputs were produced with one thread, and float sums
in another order differ at ~1e-6, which would make nbval comparisons flaky. Set before torch is
imported here, and inherited by the notebook kernels nbval starts.
"""
import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
