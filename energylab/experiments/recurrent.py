"""Looped self-attention beyond energies (paper 003): test-time scaling, Lyapunov exponents, pseudo-energy.

For each layer spec (a looped layer name, optionally "+<regulariser>", e.g. ``"itrsa+spectral"``) one model is
trained on Sudoku with the harness of :mod:`energylab.tasks.sudoku_harness` and then

1. evaluated on the ID and OOD sets after every iteration up to max(test_iterations) (test-time scaling, Figs. 4-5);
2. perturbed along a one-factor sweep (input scale s: c ↦ s c; value scale v: W_V ↦ v W_V; step scale e: η or
   γ ↦ e η), and at each point: OOD board accuracy at the training T and the max Lyapunov exponent of the step
   x ↦ layer(x, c) from x_0 = c over ``lyap_steps`` steps on one OOD board (paper 003's Fig. 3, T = 16);
3. for the first Kuramoto model: the pseudo-energy −Tr(XᵀY) (mean over boards) and the contribution index of
   the top-k eigenspace (one board) after each iteration (Fig. 6).

Results: ``tables["test_time"]`` rows (layer, set, iterations, board, cell); ``tables["lyapunov"]`` rows
(layer, factor, scale, board, lyapunov, lyapunov_warm: after ``lyap_warmup`` uncounted steps; the trained model's row,
factor "none", also holds ``lyapunov_boards`` / ``lyapunov_warm_boards``: the same readings on the first
:data:`SPREAD_BOARDS` OOD boards, each from its own random start vector, :func:`lyapunov_spread`);
``extra["curves"][layer][set]`` board accuracy at every T; ``extra["trace"]`` {"iterations", "pseudo_energy",
"contribution"}; ``final`` the headline numbers.
Also here, without training: :func:`oscillator_eigenvalues` (Sec. 5.2) and :func:`jacobian_norms` (Fig. 1).
"""
from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass

import torch

from energylab import baselines as bl
from energylab._checks import check_instance, check_int, check_interval, check_positive
from energylab.engine.runs import config_record
from energylab.engine.train import Results, TrainConfig, train
from energylab.engine.verdicts import compare
from energylab.experiments import sudoku
from energylab.jacobians import (
    check_finite_matrix,
    contribution_index,
    lyapunov_spectrum,
    pseudo_energy,
    spectral_norm,
)
from energylab.layers import recurrent
from energylab.sphere import normalize
from energylab.tasks import sudoku as tasks
from energylab.tasks import sudoku_harness as harness

CHAPTER = "09_jacobians"  # the chapter that trains it: notebooks/09_jacobians.ipynb
SPREAD_BOARDS = 6  # OOD boards of the trained models' λ_max spread (paper 003's protocol reads one board)
# The working models of the medium run's Fig. 3 sweep (OOD accuracy above GOOD_BOARD) have λ_max at most
# GOOD_LYAPUNOV_MAX: chapter 9 quotes it and tests/claims/test_recurrent_medium.py asserts it (the largest is
# +0.0009: a rerun can fail it)
GOOD_BOARD, GOOD_LYAPUNOV_MAX = 0.5, 0.001
# A 16-step warm-up moves every quick model's λ_max by at least WARMUP_SHIFT; after it the normalised models sit within
# WARM_NEAR_ZERO of 0 and the unnormalised ItrSA above WARM_CHAOTIC (chapter 9, section 9.7; tests/models/
# test_recurrent_models.py asserts them on a rerun of the quick models)
WARMUP_SHIFT, WARM_NEAR_ZERO, WARM_CHAOTIC = 0.02, 0.05, 0.1


@dataclass
class Config:
    # specs "layer[:<H>h][+regulariser]": ":1h" trains that model with H heads instead of ``heads``
    layers: tuple[str, ...] = ("itrsa", "itrsa-nonorm", "akorn", "akorn-rmsnorm", "itrsa+spectral")
    reg_weight: float = 0.01  # weight of the regulariser of "+<name>" specs (our choice; not in our notes)
    size: int = 4  # board side
    train_set: str = "4x4-id"  # training boards (generated)
    test_sets: tuple[str, ...] = ("4x4-id", "4x4-ood")  # in and out of distribution
    n_train: int = 1600  # training boards (quick: small, to fit the chapter's 2-minute budget)
    n_test: int = 300  # test boards per set
    dim: int = 32  # width d (8 oscillators of size 4 for the Kuramoto layers)
    heads: int = 4  # attention heads
    iterations: int = 4  # training T (the paper: 16; quick scales it down 4x)
    test_iterations: tuple[int, ...] = (2, 4, 8, 16)  # T/2 .. 4T
    epochs: int = 12  # passes over the boards (600 steps at batch 32)
    batch_size: int = 32  # boards per step
    lr: float = 3e-3  # AdamW peak rate (measured: 1e-3 is too slow for 600 steps)
    warmup_steps: int = 20  # linear warm-up
    sweep: tuple[float, ...] = (0.5, 2.0)  # factors of the one-factor sweep (input, value, step); 1 = trained
    lyap_steps: int = 16  # horizon of the Lyapunov exponent (paper 003: T = 16)
    lyap_warmup: int = 16  # steps run before the horizon for the warm-up reading "lyapunov_warm" (paper 003: none)
    n_sweep: int = 200  # OOD boards per sweep point
    trace_iterations: int = 16  # iterations of the pseudo-energy trace (0: none; it forms (N d)² Jacobians)
    trace_k: int = 16  # top-k eigenspace of the contribution index (our choice: N, one direction per cell)
    device: str = "cpu"  # "cpu", "cuda", ...: quick is small, the CPU is fastest for it
    seed: int = 0  # model seed (data seed 0)
    checkpoint_every: int = 0  # steps between checkpoints in out_dir (0: only at the end of each model)


PROFILES = {
    # measured 41 s on one idle CPU thread (5 models x 600 steps, sweeps and traces included), 112 s on a loaded one
    "quick": Config(),
    # the paper's protocol at 4x4 for one CPU core: T = 16, d = 64, more boards, all regularisers
    "medium": Config(layers=("itrsa", "itrsa-nonorm", "akorn", "akorn-rmsnorm", "itrsa+spectral", "itrsa+e-multi",
                             "itrsa+e-single", "akorn+spectral"), n_train=2500, n_test=500, dim=64,
                     iterations=16, test_iterations=(8, 16, 32, 64), epochs=30, batch_size=64, lr=1e-3,
                     warmup_steps=50, n_sweep=500, trace_iterations=64),
    # issue 36: the paper's E-single is a single-head model; the quick settings with one head and with four, each
    # with and without E-single (no sweep, no trace); run once per seed 0, 1, 2 and committed as e-single-heads-s<k>
    "e-single-heads": Config(layers=("itrsa:1h", "itrsa:1h+e-single", "itrsa", "itrsa+e-single"), sweep=(),
                             trace_iterations=0),
    # chapter 9's regulariser table at quick scale (E-multi, E-single, spectral on the Kuramoto layer): run once,
    # committed as quick-regularisers (it does not fit in the chapter's budget beside the quick models)
    "quick-regularisers": Config(layers=("itrsa+e-multi", "itrsa+e-single", "akorn+spectral")),
    # paper 003's protocol (App. B): 9x9, SATNet-like ID / RRN-like OOD, D = 512, H = 8, T = 16, 100 epochs,
    # batch 100; no contribution-index trace (it forms a (81·512)² Jacobian); lr is our choice (the paper tunes it)
    "full": Config(layers=("itrsa", "itrsa-nonorm", "akorn", "akorn-rmsnorm", "itrsa+spectral", "itrsa+e-multi",
                           "itrsa+e-single", "akorn+spectral"), size=9, train_set="satnet-like",
                   test_sets=("satnet-like", "rrn-like"), n_train=9000, n_test=1000, dim=512, heads=8,
                   iterations=16, test_iterations=(8, 16, 32, 64), epochs=100, batch_size=100, lr=5e-4,
                   warmup_steps=500, n_sweep=1000, trace_iterations=0, device="cuda"),
}
COST = {
    "quick": "about 1 min on one CPU thread (measured 41 s idle, 112 s loaded: 5 models x 600 steps, d = 32, T = 4)",
    "full": "paper 003 scale: 8 models x 9,000 steps at d = 512, T = 16: several GPU hours (estimate, not run)",
    "quick-regularisers": "about 1 min on one CPU thread (3 models x 600 steps, d = 32, T = 4); committed as "
                          "results/recurrent/quick-regularisers.json",
    "e-single-heads": "about 1 min on one CPU thread per seed (4 models x 600 steps, d = 32, T = 4)",
    "medium": "13 min on one CPU core (measured: 8 models x 1,170 steps at d = 64, T = 16, with the sweeps and the "
              "64-iteration trace); committed as results/recurrent/medium.json",
}


# ----------------------------------------------------------------------------- no training
def oscillator_eigenvalues(omega: float, dim: int = 8) -> dict[str, torch.Tensor]:
    """Eigenvalues of one step of ẋ = Ωx (Ω: dim/2 rotation blocks, all of frequency ω; paper 003, Sec. 5.2).

    "continuous": of Ω (±iω); "discrete": of I + Ω (1 ± iω, |λ| = √(1+ω²)); "normalised": of the Jacobian of
    x ↦ (I+Ω)x/‖(I+Ω)x‖ at a unit x (|λ| = 1 on the tangent directions, 0 on the radial one).
    omega: a finite real number; dim: an even int >= 2 (ValueError otherwise: a NaN ω crashed LAPACK, an
    infinite one hung it).
    """
    omega = check_interval("omega", omega)  # finite: the matrices below go to LAPACK
    dim = check_int("dim", dim, minimum=2)
    if dim % 2:
        raise ValueError(f"dim must be an even int >= 2 (Ω rotates channel pairs), got {dim}")
    I = torch.eye(dim, dtype=torch.float64)
    Omega = recurrent.omega_rotate(I, omega).T  # rows of omega_rotate(I) are Ω e_k: transpose to get Ω
    x = normalize(torch.ones(dim, dtype=torch.float64))
    J = torch.func.jacrev(lambda v: normalize(v + Omega @ v))(x)
    return {"continuous": torch.linalg.eigvals(Omega), "discrete": torch.linalg.eigvals(I + Omega),
            "normalised": torch.linalg.eigvals(check_finite_matrix(f"the normalised step's Jacobian at omega={omega}",
                                                                   J))}


def jacobian_norms(tokens, dim: int = 32, heads: int = 4, scale: float = 4.0, seed: int = 0) -> list[dict]:
    """σ_max of the Jacobian of X ↦ X + MSA(X) and of X ↦ RMSNorm(X + MSA(X)) for N random tokens (Fig. 1).

    Random Gaussian tokens of RMS ``scale`` (paper 003 uses text tokens; we use random ones), an initialised
    (untrained) MSA, float64. One row per N: {"tokens", "plain", "normalised"}.
    """
    scale = check_positive("scale", scale, scalar=True)  # a NaN scale gave NaN norms without a word
    if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__iter__"):
        raise TypeError(f"tokens must be a collection of token counts (ints >= 1), e.g. [4, 16], got {tokens!r}")
    tokens = [check_int("tokens[]", n, minimum=1) for n in tokens]
    if not tokens:
        raise ValueError("tokens must hold at least one token count, got none")
    seed = check_int("seed", seed)  # 1.5 was a raw manual_seed error
    torch.manual_seed(seed)
    msa = recurrent.MSA(dim, heads).double()
    norm = torch.nn.RMSNorm(dim).double()
    rows = []
    for n in tokens:
        x = scale * torch.randn(n, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed + n))
        with torch.no_grad():
            plain = spectral_norm(lambda v: v + msa(v), x, iters=100, tol=1e-8)
            normed = spectral_norm(lambda v: norm(v + msa(v)), x, iters=100, tol=1e-8)
        rows.append({"tokens": int(n), "plain": float(plain), "normalised": float(normed)})
    return rows


# ----------------------------------------------------------------------------- trained models
def _spec(spec: str, heads: int) -> tuple[str, str, int]:
    """(layer, regulariser, heads) of a spec "layer[:<H>h][+regulariser]" (heads: the config's, unless given)."""
    layer, _, reg = spec.partition("+")
    layer, _, h = layer.partition(":")
    if h:
        if not (h.endswith("h") and h[:-1].isdigit() and int(h[:-1]) >= 1):
            raise ValueError(f"a head count in a layer spec reads ':<H>h' with H >= 1, e.g. 'itrsa:1h'; got {spec!r}")
        heads = int(h[:-1])
    return layer, reg or "none", heads


def train_model(config: Config, spec: str, train_data, out_dir: str | None = None, resume: bool = False):
    """One looped model for ``spec``, trained with the sudoku harness (seeded by config.seed); checkpoints in
    ``out_dir`` (continued with ``resume``) when given."""
    layer, reg, heads = _spec(spec, config.heads)
    scfg = sudoku.Config(size=config.size, layer=layer, dim=config.dim, heads=heads,
                         iterations=config.iterations, batch_size=config.batch_size, device=config.device)
    torch.manual_seed(config.seed)
    model = sudoku.make_model(scfg)
    batches, per_epoch = harness.epoch_batches(train_data, config.batch_size, config.seed)
    tcfg = TrainConfig(steps=config.epochs * per_epoch, optimizer="adamw", lr=config.lr, schedule="cosine",
                       warmup_steps=config.warmup_steps, grad_clip=1.0, log_every=per_epoch,
                       checkpoint_every=config.checkpoint_every, device=config.device, seed=config.seed,
                       progress=False)
    history = train(model, harness.regularised_loss(reg, config.reg_weight if reg != "none" else 0.0), batches, tcfg,
                    out_dir=out_dir, resume=resume, identity=config_record(config))
    return model.eval(), history


def perturbed(model, factor: str, scale: float):
    """A copy of ``model`` with the input c, the value map W_V or the step (η / γ) multiplied by ``scale``."""
    scale = check_interval("scale", scale)  # finite: a NaN scale made every weight it touched NaN
    model = copy.deepcopy(model)
    with torch.no_grad():
        if factor == "input":
            model.embed.weight.mul_(scale)
            model.pos.mul_(scale)
        elif factor == "value":
            model.layer.msa.v.weight.mul_(scale)
        elif factor == "step":
            (model.layer.eta if hasattr(model.layer, "eta") else model.layer.gamma).mul_(scale)
        else:
            raise ValueError(f"factor must be 'input', 'value' or 'step', got {factor!r}")
    return model


def max_lyapunov(model, tokens: torch.Tensor, steps: int, warmup: int = 0,
                 generator: torch.Generator | None = None) -> float:
    """Max Lyapunov exponent of x ↦ layer(x, c) from x_0 = c on one board (tokens (N,)): (1/T) Σ ln |R_11| over
    ``steps`` steps after ``warmup`` uncounted ones (paper 003's protocol: warmup = 0, T = 16, one sample).
    NaN (not an error) when the exponent is not finite (−inf from a direction the step annihilates, or a Jacobian that
    overflows, e.g. after :func:`perturbed` with an enormous step scale): the sweep of :func:`run` records such a point
    and goes on. ``generator`` draws the random start vector (None: the same one every call, seed 0)."""
    n = model.pos.shape[0]
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a torch.Tensor of one board's digits (N={n},), got {type(tokens).__name__}")
    if tokens.shape != (n,):
        raise ValueError(f"tokens must have shape (N={n},): one board, got {tuple(tokens.shape)}")
    with torch.no_grad():
        c = model.inputs(tokens[None].to(model.pos.device))[0]
    layer = model.layer
    value = lyapunov_spectrum(lambda x: layer(x[None], c[None])[0], c, steps, k=1, warmup=warmup,
                              generator=generator)[0].detach()
    return float(value) if torch.isfinite(value) else float("nan")


def lyapunov_spread(model, boards: torch.Tensor, steps: int, warmup: int = 0) -> list[float]:
    """:func:`max_lyapunov` on each board of ``boards`` (B, N), board b from the random start vector of seed b: what
    one reading (one board, one start vector, paper 003's protocol) leaves out."""
    if not isinstance(boards, torch.Tensor) or boards.dim() != 2:
        raise ValueError(f"boards must be a (B, N) tensor of boards' digits, got {getattr(boards, 'shape', boards)}")
    return [max_lyapunov(model, b, steps, warmup, torch.Generator(device=model.pos.device).manual_seed(k))
            for k, b in enumerate(boards)]


def warmup_readings(results: Results) -> dict[str, dict[str, float]]:
    """Per trained model: λ_max by paper 003's protocol ("paper": 16 steps from X⁽⁰⁾ = C), after the warm-up
    ("warm": the same horizon after ``lyap_warmup`` uncounted steps), and the shift between them."""
    if "lyapunov" not in results.tables:
        raise ValueError(f"results has no 'lyapunov' table (a recurrent run's); its tables: {sorted(results.tables)}")
    out = {}
    for row in results.tables["lyapunov"]:
        if row["factor"] == "none":
            out[row["layer"]] = {"paper": row["lyapunov"], "warm": row["lyapunov_warm"],
                                 "shift": row["lyapunov_warm"] - row["lyapunov"]}
    return out


def baselines(config) -> dict[str, dict[str, dict[str, float]]]:
    """The no-learning rungs of :data:`energylab.baselines.SUDOKU_RUNGS` (input-blind vote, one elimination,
    propagation without search) on the test sets of a run's ``config`` (a :class:`Config` or a Results.config), the
    run's training boards as the reference, the same boards :func:`run` tests on: set -> rung -> {"board", "cell"}."""
    cfg = dataclasses.asdict(config) if isinstance(config, Config) else dict(config)
    train_data = harness.load_set(cfg["train_set"], "train", cfg["n_train"], cfg["size"])
    return {name: bl.sudoku_rungs(harness.load_set(name, "test", cfg["n_test"], cfg["size"]), train_data)
            for name in cfg["test_sets"]}


def e_single_heads(runs: list[Results]) -> tuple[list[dict], dict[str, str]]:
    """The ``e-single-heads`` probe, one run per seed: rows (layer, set, T, per-seed board accuracies, their mean)
    and the verdicts (:func:`energylab.engine.verdicts.compare` over seeds, at the training T) on paper 003's reading
    that E-single fails because it is single-head: does E-single cost accuracy with one head as with four, and does one
    head without it?"""
    config = runs[0].config
    T, rows = config["iterations"], []
    for layer in config["layers"]:
        for name in config["test_sets"]:
            for t in config["test_iterations"]:
                seeds = [r.final[f"{layer}/{name}/board@T{t}"] for r in runs]
                rows.append({"layer": layer, "set": name, "iterations": t, "seeds": seeds,
                             "mean": sum(seeds) / len(seeds)})

    def at(layer, name):
        return next(r["seeds"] for r in rows if (r["layer"], r["set"], r["iterations"]) == (layer, name, T))

    verdicts = {}
    for name in config["test_sets"]:
        for label, a, b in (("1 head + E-single vs 1 head", "itrsa:1h+e-single", "itrsa:1h"),
                            ("4 heads + E-single vs 4 heads", "itrsa+e-single", "itrsa"),
                            ("1 head vs 4 heads", "itrsa:1h", "itrsa")):
            verdicts[f"{label}, {name} @T"] = compare(at(a, name), at(b, name))
    return rows, verdicts


def akorn_trace(model, data, iterations: int, k: int) -> dict:
    """Pseudo-energy (mean over boards) and contribution index (first board) after each iteration, for a looped
    model with a Kuramoto layer ("akorn", "akorn-rmsnorm"); data: a :class:`~energylab.tasks.sudoku.SudokuDataset`,
    iterations >= 1, k >= 1."""
    if not isinstance(getattr(model, "layer", None), recurrent.KuramotoLayer):
        raise TypeError(f"model must be a looped model with a Kuramoto layer ('akorn' or 'akorn-rmsnorm'), got layer "
                        f"{type(getattr(model, 'layer', model)).__name__}")
    check_instance("data", data, tasks.SudokuDataset)
    iterations = check_int("iterations", iterations, minimum=1)  # 0 or -1 gave an empty trace without a word
    k = check_int("k", k, minimum=1)
    layer, energies, index = model.layer, [], []
    with torch.no_grad():
        c = model.inputs(data.tokens.to(model.pos.device))
    x = c
    for _ in range(iterations):
        with torch.no_grad():
            x = layer(x, c)
            xn = recurrent.oscillator_normalize(x, layer.n)
            energies.append(float(pseudo_energy(xn, layer.drive(xn, c)).mean()))
        index.append(float(contribution_index(lambda v: layer.drive(v[None], c[:1])[0], xn[0], k=k)))
    return {"iterations": list(range(1, iterations + 1)), "pseudo_energy": energies, "contribution": index}


def run(config: Config, out_dir: str | None = None, resume: bool = False) -> Results:
    """Train one model per layer spec; test-time curves, Lyapunov sweep, Kuramoto trace.

    ``out_dir``: each spec's model checkpoints in ``out_dir/<spec>`` (":" written "_"); ``resume`` continues the
    unfinished ones and reloads the finished ones. Everything after training is recomputed from the models.
    """
    torch.manual_seed(config.seed)
    train_data = harness.load_set(config.train_set, "train", config.n_train, config.size)
    tests = {name: harness.load_set(name, "test", config.n_test, config.size) for name in config.test_sets}
    ood = tests[config.test_sets[-1]]
    sweep_data = tasks.SudokuDataset(ood.puzzles[:config.n_sweep], ood.solutions[:config.n_sweep])
    results = Results("recurrent", dataclasses.asdict(config))
    rows, lyap, curves = [], [], {}
    every = range(1, max(config.test_iterations) + 1)
    for spec in config.layers:
        folder = None if out_dir is None else os.path.join(out_dir, spec.replace(":", "_"))  # no ":" on Windows
        model, history = train_model(config, spec, train_data, folder, resume)
        results.histories[spec] = history
        curves[spec] = {}
        for name, data in tests.items():
            accs = harness.test_time(model, data, every)
            curves[spec][name] = [accs[t]["board"] for t in every]
            rows += [{"layer": spec, "set": name, "iterations": t, **accs[t]} for t in config.test_iterations]
        for factor, scale in [("none", 1.0)] + [(f, s) for f in ("input", "value", "step") for s in config.sweep]:
            m = model if factor == "none" else perturbed(model, factor, scale)
            board = harness.test_time(m, sweep_data, (config.iterations,))[config.iterations]["board"]
            lyap.append({"layer": spec, "factor": factor, "scale": scale, "board": board,
                         "lyapunov": max_lyapunov(m, ood.tokens[0], config.lyap_steps),
                         "lyapunov_warm": max_lyapunov(m, ood.tokens[0], config.lyap_steps, config.lyap_warmup)})
            if factor == "none":
                spread = ood.tokens[:SPREAD_BOARDS]
                lyap[-1].update(lyapunov_boards=lyapunov_spread(m, spread, config.lyap_steps),
                                lyapunov_warm_boards=lyapunov_spread(m, spread, config.lyap_steps,
                                                                     config.lyap_warmup))
        if config.trace_iterations and "trace" not in results.extra and isinstance(model.layer,
                                                                                    recurrent.KuramotoLayer):
            results.extra["trace"] = {"layer": spec, **akorn_trace(model, sweep_data, config.trace_iterations,
                                                                   config.trace_k)}
    results.tables.update(test_time=rows, lyapunov=lyap)
    results.extra.update(curves=curves, iterations=list(every), trained_iterations=config.iterations)
    for row in rows:
        results.final[f"{row['layer']}/{row['set']}/board@T{row['iterations']}"] = row["board"]
    for row in lyap:
        if row["factor"] == "none":
            results.final[f"{row['layer']}/lyapunov"] = row["lyapunov"]
            results.final[f"{row['layer']}/lyapunov_warm"] = row["lyapunov_warm"]
    return results
