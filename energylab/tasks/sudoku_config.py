"""Checks of a looped Sudoku run's settings (:class:`energylab.experiments.sudoku.Config`), before any data is made."""
from __future__ import annotations

from energylab._checks import check_bool, check_int, check_interval
from energylab.tasks.sudoku import NAMED_SETS, SHAPES

__all__ = ["check_run_config"]


def check_run_config(config) -> None:
    """Validate the settings of a looped Sudoku run (:class:`energylab.experiments.sudoku.Config`) before any data
    is generated or loaded: a ValueError or TypeError naming the field.

    Board size 4, 6 or 9; width, heads (dividing the width), feed-forward multiple, T (``iterations``) and every
    test T positive ints; set names known and of that board size; batch, board and seed counts usable.
    """
    size = check_int("size", config.size)
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)} (board sides with boxes), got {size}")
    dim = check_int("dim", config.dim, minimum=1)
    check_int("heads", config.heads, minimum=1)
    if dim % config.heads:
        raise ValueError(f"dim={dim} must be divisible by heads={config.heads} (each head gets d / H dims)")
    check_int("ffn_mult", config.ffn_mult, minimum=1)
    check_int("iterations", config.iterations, minimum=1)  # T of the loop during training
    if not isinstance(config.test_iterations, (tuple, list)) or not config.test_iterations:
        raise ValueError(f"test_iterations must be a non-empty tuple of positive ints, got {config.test_iterations!r}")
    for t in config.test_iterations:
        check_int("test_iterations", t, minimum=1)
    for name in ("epochs", "batch_size", "n_test", "n_eval"):
        check_int(name, getattr(config, name), minimum=1)
    if check_int("n_train", config.n_train, minimum=1) < config.batch_size:
        raise ValueError(f"n_train={config.n_train} must be >= batch_size={config.batch_size}")
    if not isinstance(config.seeds, (tuple, list)) or not config.seeds:
        raise ValueError(f"seeds must be a non-empty tuple of ints, got {config.seeds!r}")
    for s in config.seeds:
        check_int("seeds", s, minimum=0)
    check_int("data_seed", config.data_seed, minimum=0)
    check_bool("augment", config.augment)
    check_interval("ema", config.ema, 0, 1, high_open=True)
    if not isinstance(config.test_sets, (tuple, list)):
        raise TypeError(f"test_sets must be a tuple of set names, got {type(config.test_sets).__name__}")
    for field, name in [("train_set", config.train_set), *(("test_sets", n) for n in config.test_sets)]:
        if not isinstance(name, str):
            raise TypeError(f"{field} must name a set (a string), got {name!r}")
        if name.startswith(("satnet:", "rrn:")):
            if size != 9:
                raise ValueError(f"{field}={name!r}: the public files hold 9x9 boards, the config says size={size}")
        elif name not in NAMED_SETS:
            raise ValueError(f"{field}: unknown set {name!r}; use one of {sorted(NAMED_SETS)}, 'satnet:<dir>' or "
                             f"'rrn:<dir>'")
        elif NAMED_SETS[name].size != size:
            raise ValueError(f"{field}={name!r} has {NAMED_SETS[name].size}x{NAMED_SETS[name].size} boards, the "
                             f"config says size={size}")
