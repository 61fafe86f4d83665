"""The settings of the looped Sudoku runs (:mod:`energylab.experiments.sudoku`): its :class:`Config`, the named
profiles and what each costs."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Config:
    size: int = 4  # board side: 4 (2×2 boxes), 6 (2×3) or 9 (3×3)
    train_set: str = "4x4-id"  # a NAMED_SETS name, or "satnet:<dir>" / "rrn:<dir>" for the public files
    test_sets: tuple[str, ...] = ("4x4-id", "4x4-ood")  # evaluated at every test T (test split of each)
    n_train: int = 2500  # training boards (the papers: 9,000)
    n_test: int = 500  # test boards per test set (the papers: 1,000)
    layer: str = "transformer"  # the looped layer, a name in energylab.layers.registry.LAYERS
    dim: int = 64  # width d
    heads: int = 4  # attention heads H
    ffn_mult: int = 4  # feed-forward width / d
    inject: bool = True  # inject the embedded board c at every iteration
    iterations: int = 8  # T during training
    test_iterations: tuple[int, ...] = (4, 8, 16, 32)  # T at test time (T/2, T, 2T, 4T)
    epochs: int = 30  # passes over the training boards
    batch_size: int = 64  # boards per step
    lr: float = 1e-3  # AdamW peak learning rate
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW moment decay rates
    schedule: str = "cosine"  # "constant" or "cosine" (to 0)
    warmup_steps: int = 50  # linear warm-up steps
    grad_clip: float | None = 1.0  # max gradient norm (004: 1.0)
    eval_every: int = 0  # steps between evaluations on the first test set at the training T (0: at the end)
    n_eval: int = 200  # boards of that evaluation
    seeds: tuple[int, ...] = (0,)  # one model per seed, trained one after the other (003: 5 seeds)
    data_seed: int = 0  # seed of the generated sets (SudokuSetConfig.seed) and of RRN's random subset
    amp: bool = False  # bf16 autocast on CUDA
    checkpoint_every: int = 0  # steps between checkpoints in out_dir (0: only at the end of each seed)
    device: str = "auto"  # "auto", "cpu", "cuda", ...
    progress: bool = True  # progress bars
    regulariser: str = "none"  # "none", "spectral", "e-multi" or "e-single" (energylab.models.regularisers)
    reg_weight: float = 0.0  # weight w of the regulariser: loss = CE + w · R (0: off)
    layers: tuple[str, ...] = ()  # a league: one run of ``layer`` per name here (() = just ``layer``), merged
    layer_lr: tuple[str, ...] = ()  # per-layer learning rates in a league, "name=lr" (others use ``lr``)
    n_trace: int = 200  # boards of the first test set on which a layer's ``metrics`` are traced along t (0: off)
    augment: bool = False  # a random Sudoku symmetry per training board and step (energylab.tasks.sudoku_symmetry)
    ema: float = 0.0  # decay of the weights' moving average, evaluated and kept (energylab.engine.train.WeightAverage)


# The learning rate of the quick and league profiles, 3e-3: for each of the four layers the better of 1e-3 and 3e-3
# on the quick 4×4 profile (board accuracy on 4x4-id at T = 8, one seed, 2026-11-25): Transformer 0.97 / 0.994,
# ItrSA 0.940 / 0.992, AKOrN 0.724 / 0.912, Hyper-SET 0.040 / 0.878 (chapter 8, section 8.5)
LEAGUE_LR = 3e-3

PROFILES = {
    # 4×4, d = 64, T = 8: measured 78-93 s on one CPU thread (1,170 steps, data and evaluation included);
    # Transformer 4x4-id 99.4% / 4x4-ood 87.6% boards at T = 8, 99.8% / 92.6% at T = 32
    "quick": Config(lr=LEAGUE_LR),
    # 6×6 (2×3 boxes) for one CPU core: 5,600 steps, measured 16 min; committed (results/sudoku/medium-cpu.json):
    # 6x6-id 87% / 6x6-ood 23% boards at T = 8, 92% / 46% at T = 32
    "medium-cpu": Config(size=6, train_set="6x6-id", test_sets=("6x6-id", "6x6-ood"), n_train=9000, n_test=1000,
                         dim=64, heads=4, iterations=8, epochs=40, batch_size=64, warmup_steps=200, eval_every=500),
    # the league of papers 003/004 at 6×6 on one CPU: the four looped layers, same boards, steps, width and T,
    # 3 seeds each, all at LEAGUE_LR
    "league-6x6": Config(size=6, train_set="6x6-id", test_sets=("6x6-id", "6x6-ood"), n_train=9000, n_test=1000,
                         dim=64, heads=4, iterations=8, epochs=30, batch_size=64, warmup_steps=200, eval_every=500,
                         lr=LEAGUE_LR, seeds=(0, 1, 2), checkpoint_every=500,
                         layers=("transformer", "itrsa", "akorn", "hyperset")),
    # 9×9 on one CPU core (issue 27, item 3), the one configuration tried: d = 64, T = 16, batch 32 (0.3-0.4 s/step
    # against 11 s/step for ``medium``); committed (results/sudoku/medium-cpu-9x9.json, 60 min): satnet-like 29% /
    # rrn-like 3% / rrn-17 6% boards at T, 36% / 5% / 10% at 2T
    "medium-cpu-9x9": Config(size=9, train_set="satnet-like", test_sets=("satnet-like", "rrn-like", "rrn-17"),
                             n_train=9000, n_test=1000, dim=64, heads=4, iterations=16,
                             test_iterations=(8, 16, 32, 64), epochs=32, batch_size=32, lr=LEAGUE_LR,
                             warmup_steps=300, eval_every=1000, checkpoint_every=500, n_trace=0),
    # the same 9×9 run with what the small Sudoku models since HRM/TRM (2025) train with: every board through a
    # random symmetry at every step, decoupled weight decay 0.1, the weights' moving average (decay 0.999); 5,620
    # steps, about two hours of one core with the pinned numerics on an Intel Xeon (1.0 s/step there against
    # 0.38 s/step with its own kernels; 0.4 s/step pinned on the AMD EPYC of medium-cpu-9x9) (issue 51)
    "aug-cpu-9x9": Config(size=9, train_set="satnet-like", test_sets=("satnet-like", "rrn-like", "rrn-17"),
                          n_train=9000, n_test=1000, dim=64, heads=4, iterations=16,
                          test_iterations=(8, 16, 32, 64), epochs=20, batch_size=32, lr=LEAGUE_LR, weight_decay=0.1,
                          warmup_steps=300, eval_every=1000, checkpoint_every=250, n_trace=0, augment=True,
                          ema=0.999),
    # the same augmented 9×9 run for the four looped layers of papers 003/004 (same boards, steps, width and T; one
    # seed each); the Transformer's run is aug-cpu-9x9's (a copy of its folder resumes at its last step) (issue 51)
    "aug-league-9x9": Config(size=9, train_set="satnet-like", test_sets=("satnet-like", "rrn-like", "rrn-17"),
                             n_train=9000, n_test=1000, dim=64, heads=4, iterations=16,
                             test_iterations=(8, 16, 32, 64), epochs=20, batch_size=32, lr=LEAGUE_LR,
                             weight_decay=0.1, warmup_steps=300, eval_every=1000, checkpoint_every=250, n_trace=0,
                             augment=True, ema=0.999, layers=("transformer", "itrsa", "akorn", "hyperset")),
    # 9×9 SATNet-like training, tested on SATNet-like, RRN-like (22–34) and RRN-17 (17–34) boards
    "medium": Config(size=9, train_set="satnet-like", test_sets=("satnet-like", "rrn-like", "rrn-17"), n_train=9000,
                     n_test=1000, dim=256, heads=8, iterations=16, test_iterations=(8, 16, 32, 64), epochs=60,
                     batch_size=100, lr=5e-4, warmup_steps=300, eval_every=500, amp=True),
    # paper 003 (with AKOrN's protocol): D = 512, H = 8, Adam, 100 epochs, batch 100, T = 16, 5 seeds;
    # SATNet-like in distribution, RRN out of distribution; lr is not in our notes (our choice)
    "full": Config(size=9, train_set="satnet-like", test_sets=("satnet-like", "rrn-like", "rrn-17"), n_train=9000,
                   n_test=1000, dim=512, heads=8, iterations=16, test_iterations=(8, 16, 32, 64, 128), epochs=100,
                   batch_size=100, lr=5e-4, weight_decay=0.0, warmup_steps=500, eval_every=1000,
                   seeds=(0, 1, 2, 3, 4), amp=True),
    # paper 004 (Hyper-SET): d = 768, 12 heads, 24 iterations, 200 epochs, batch 16, AdamW(0.9, 0.95), wd 0.1,
    # lr 1e-4 cosine, clip 1, 9k/1k RRN boards (rrn-like stands in; pass train_set="rrn:<dir>" for the files)
    "full-hyperset": Config(size=9, train_set="rrn-like", test_sets=("rrn-like", "rrn-17"), n_train=9000,
                            n_test=1000, dim=768, heads=12, iterations=24, test_iterations=(12, 24, 48),
                            epochs=200, batch_size=16, lr=1e-4, weight_decay=0.1, betas=(0.9, 0.95),
                            warmup_steps=0, grad_clip=1.0, eval_every=5000, amp=True),
}
CHAPTER = "08_hyperset"  # the chapter that trains it: notebooks/08_hyperset.ipynb
COST = {
    "quick": "about 1.5 min on one CPU thread (measured 78-93 s: 4x4 boards, d = 64, 1,170 steps, evaluation included)",
    "league-6x6": "about 90 min of one CPU core (an estimate: the committed run was finished with --resume, and its "
                  "file "
                  "records only the last segment's time; 4 layers x 3 seeds x 4,200 steps at 6x6, d = 64, T = 8; run "
                  "as two processes); committed as results/sudoku/league-6x6.json",
    "medium-cpu": "16 min on one CPU core (measured 976 s: 6x6 boards, d = 64, 5,600 steps; committed as "
                  "results/sudoku/medium-cpu.json)",
    "medium-cpu-9x9": "60 min of one CPU core (measured 3,625 s: 9x9, d = 64, T = 16, 8,992 steps of 32 boards; "
                      "committed as results/sudoku/medium-cpu-9x9.json)",
    "aug-cpu-9x9": ("about 2 h of one CPU core with pinned numerics on an Intel Xeon (measured 127 min, evaluation "
                    "included: 9x9, d = 64, T = 16, 5,620 steps of 32 augmented boards); committed as "
                    "results/sudoku/aug-cpu-9x9.json"),
    "aug-league-9x9": ("about 4 h of one CPU core with pinned numerics on an Intel Xeon beyond aug-cpu-9x9's run "
                       "(training steps measured at 0.42 / 0.55 / 0.88 s for ItrSA / AKOrN / Hyper-SET against 0.82 s "
                       "for the Transformer; 5,620 steps each)"),
    "medium": "about 3 min (Transformer) to 10 min (Hyper-SET) on one GPU for its 5,400 steps (9x9, d = 256, T = 16; "
              "measured on an H200 shared with other jobs: 0.03 and 0.12 s/step, results/sudoku/gpu-9x9-d256.json); "
              "about 16 h on one CPU core (11 s/step measured)",
    "full": "paper 003 scale: 5 seeds x 9,000 steps at d = 512, T = 16: a few GPU hours (estimate)",
    "full-hyperset": "paper 004 scale: 112,500 steps at d = 768, T = 24: about a GPU day (estimate)",
}
