"""Seed ensembles: train S copies of a small model, one per seed, as one batched computation.

The papers average their curves over 5-16 seeds. For a small model one optimiser step costs mostly Python and
kernel-launch overhead, so S sequential runs waste S times that overhead. Here the S models' parameters are
stacked along a new leading dimension (``torch.func.stack_module_state``), ``torch.func.vmap`` runs the S
forward passes as one batched computation, and one backward pass of Σ_s L_s gives every member its own gradient
(members share no parameters):

    θ_s ← OptStep(θ_s, ∇_θ L(θ_s; batch_s)),   s = 1..S,

with an elementwise optimiser (AdamW, SGD with momentum) applied to the stacked tensors, which is exactly S
independent optimisers. The steps, logging, evaluation, checkpoints and progress bar are the one training loop's
(:func:`energylab.engine.loop.training_loop`): the ensemble is its vmapped mode. ``TrainConfig(compile=True)`` compiles
the vmapped forward and backward once per process: on one CPU thread that halves a step of the tiny NT model
(N2T5), whose eager vmapped step is dominated by dispatching its ~300 small kernels. Gradient clipping uses each
member's own global norm. Evaluation runs member by member through the ordinary ``eval_fn(model)``. Models that
cannot be vmapped (data-dependent control flow, in-place updates of buffers) fall back to S sequential
:func:`energylab.engine.train.train` runs.
"""
from __future__ import annotations

import copy
import math
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from energylab import kernels, portable
from energylab._setup import choose_device, seed_everything
from energylab.engine.batches import to_device
from energylab.engine.loop import Members, evaluate, optimizer_step, training_loop
from energylab.engine.results import History
from energylab.engine.runs import (
    CHECKPOINT,
    claim_run_dir,
    load_checkpoint,
    run_identity,
    set_rng_state,
)
from energylab.engine.train import TrainConfig, check_config, make_optimizer, train


@dataclass
class Ensemble:
    """The outcome of :func:`train_ensemble`: one trained model and one History per seed."""

    seeds: list[int]
    models: list[nn.Module]
    histories: list[History]
    vmapped: bool  # False when the sequential fallback ran

    def curve(self, name: str) -> tuple[list[int], torch.Tensor]:
        """Steps and an (S, T) tensor of the curve ``name`` across members."""
        return curve_stack(self.histories, name)


def curve_stack(histories: Sequence[History], name: str) -> tuple[list[int], torch.Tensor]:
    """Stack curve ``name`` of several histories (same steps) into an (S, T) float64 tensor."""
    steps = histories[0].steps[name]
    if any(h.steps[name] != steps for h in histories):
        raise ValueError(f"curve {name!r} was logged at different steps across histories")
    return steps, torch.tensor([h.curves[name] for h in histories], dtype=torch.float64)


class _LossModule(nn.Module):
    """Lets ``functional_call`` run ``loss_fn(model, batch)`` with swapped-in parameters."""

    def __init__(self, model: nn.Module, loss_fn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, batch):
        return self.loss_fn(self.model, batch)


def train_ensemble(make_model: Callable[[int], nn.Module], loss_fn, batches: Callable[[int, int], Any],
                   config: TrainConfig, seeds: Sequence[int], *,
                   eval_fn: Callable[[nn.Module], dict] | None = None,
                   after_step: Callable[[dict[str, torch.Tensor], int], None] | None = None,
                   out_dir: str | None = None, resume: bool = False, identity: Any = None,
                   vmapped: bool | str = "auto") -> Ensemble:
    """Train one model per seed; equals ``[train(make_model(s), ...) for s in seeds]`` up to float rounding.

    Args:
        make_model: ``seed -> model``; called right after ``seed_everything(seed)``.
        loss_fn: ``(model, batch) -> (loss, metrics)`` as for :func:`~energylab.engine.train.train`, except that every
            metric must be a 0-d tensor (vmap cannot return Python numbers).
        batches: ``(step, seed) -> batch`` for member ``seed``; the members' batches are stacked on a new dim 0.
        config: a :class:`~energylab.engine.train.TrainConfig` (``config.seed`` is ignored: ``seeds`` rule; no
            ``epochs``, AMP or DDP here). ``config.compile`` compiles the vmapped forward and its backward with
            ``torch.compile`` (the sequential fallback compiles each model as :func:`~energylab.engine.train.train`
            does): the first run in a process pays the compilation (tens of seconds on a CPU), later runs with the same
            shapes reuse it; the fused kernels round differently, so the members then equal the sequential runs
            only up to float rounding.
        seeds: the S seeds.
        eval_fn: ``model -> metrics``, called for each member model in turn.
        after_step: ``(params, step)`` with ``params`` the dict name -> stacked (S, ...) parameter tensors
            (modify them in place under ``torch.no_grad()``), after every optimiser step.
        out_dir, resume, identity: checkpoints as in :func:`~energylab.engine.train.train` (a fresh run refuses a
            folder holding a checkpoint; resuming under another config or identity is a ValueError).
        vmapped: True (must vmap), False (sequential runs) or "auto" (vmap, fall back to sequential on error).
    """
    check_config(config)
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be a non-empty list of distinct ints, got {seeds}")
    if config.epochs is not None:
        raise ValueError("train_ensemble counts steps; set config.steps, not config.epochs")
    if config.ema:
        raise ValueError(f"train_ensemble keeps no weight average: set config.ema=0 (got {config.ema}), or train "
                         f"each seed with energylab.engine.train.train")
    if vmapped not in (True, False, "auto"):
        raise ValueError(f"vmapped must be True, False or 'auto', got {vmapped!r}")
    if out_dir is not None:
        claim_run_dir(out_dir, resume)
    args = (make_model, loss_fn, batches, config, seeds, eval_fn, after_step, out_dir, resume, identity)
    if vmapped is False:
        return _sequential(*args)
    try:
        return _vmapped(*args)
    except _NotVmappable as err:
        if vmapped is True:
            raise ValueError(f"this model cannot be trained under vmap: {err.__cause__}") from err.__cause__
        warnings.warn(f"vmap failed ({err.__cause__}); training the {len(seeds)} seeds one after another")
        return _sequential(*args)


class _NotVmappable(Exception):
    pass


def _vmapped(make_model, loss_fn, batches, config, seeds, eval_fn, after_step, out_dir, resume, identity
             ) -> Ensemble:
    device = choose_device(config.device)
    models = []
    for seed in seeds:
        seed_everything(seed)
        models.append(make_model(seed).to(device))
    params, buffers = stack_module_state(models)  # name -> (S, ...) leaf tensors
    wrapper = _LossModule(copy.deepcopy(models[0]).to("meta"), loss_fn)
    prefixed = {f"model.{k}": v for k, v in params.items()}
    shared = _shared_buffers(models, buffers)  # e.g. a causal mask: passed once, not stacked
    prefixed_buffers = {f"model.{k}": v for k, v in buffers.items() if k not in shared}
    prefixed_shared = {f"model.{k}": v for k, v in shared.items()}

    forward_all = _forward(wrapper, prefixed_shared, config.compile)
    optimizer = make_optimizer(list(params.values()), config)
    histories, windows, start = [History() for _ in seeds], [{} for _ in seeds], 0
    ckpt = out_dir is not None and os.path.exists(os.path.join(out_dir, CHECKPOINT))
    ident = run_identity(config, identity)
    if resume and ckpt:
        state = load_checkpoint(out_dir, ident)
        if state.get("seeds") != seeds or set(state.get("params", {})) != set(params):
            raise ValueError(f"{state['path']} does not match this ensemble (seeds or parameter names differ)")
        with torch.no_grad():
            for k, v in params.items():
                if state["params"][k].shape != v.shape:
                    raise ValueError(f"{state['path']} does not match the model: {k} has shape "
                                     f"{tuple(state['params'][k].shape)}, expected {tuple(v.shape)}")
                v.copy_(state["params"][k])
            for k, v in buffers.items():
                v.copy_(state["buffers"][k])
        optimizer.load_state_dict(state["optimizer"])
        histories = [History.from_dict(h) for h in state["histories"]]
        windows, start = state["windows"], state["step"]
        set_rng_state(state["rng"])
    else:
        seed_everything(seeds[0])
    stacked = list(params.values())

    def forward(step):
        batch = _stack([to_device(batches(step, s), device) for s in seeds])
        try:
            loss, metrics = forward_all(prefixed, prefixed_buffers, batch)  # loss: (S,)
        except Exception as err:  # noqa: BLE001 - any failure inside vmap means: not vmappable
            if step == start:
                raise _NotVmappable() from err
            raise
        return loss, loss.detach().tolist(), metrics

    def update(loss, factor, step):
        optimizer_step(optimizer, loss.sum(), config, factor,
                       lambda max_norm: _clip_per_member([p.grad for p in stacked], max_norm))
        if after_step is not None:
            after_step(params, step)

    def numbers(metrics):
        per_member = {k: v.detach().tolist() for k, v in metrics.items()}
        return [{k: v[i] for k, v in per_member.items()} for i in range(len(seeds))]

    def evaluate_members(fn):
        _unstack_into(models, params, buffers)
        return [evaluate(model, fn) for model in models]

    def diverged_seeds(step, values):
        bad = [s for s, v in zip(seeds, values) if not math.isfinite(v)]
        return f"loss is not finite at step {step} (0-based) for seeds {bad}" if bad else None

    members = Members(forward=forward, update=update, numbers=numbers, evaluate=evaluate_members,
                      state=lambda: {"seeds": seeds, "params": {k: v.detach() for k, v in params.items()},
                                     "buffers": dict(buffers), "optimizer": optimizer.state_dict()},
                      diverged=diverged_seeds)
    histories = training_loop(members, config, config.steps, start, histories, windows, eval_fn=eval_fn,
                              out_dir=out_dir, identity=ident, progress=config.progress, ensemble=True)
    _unstack_into(models, params, buffers)
    return Ensemble(seeds, models, histories, vmapped=True)


def _forward(wrapper: nn.Module, shared: dict, compile: bool):
    """``(params, buffers, batch) -> (losses (S,), metrics)``: the S members' forward passes as one vmapped call.

    vmap covers only the forward: autograd then records the batched kernels, and one ordinary backward of Σ_s L_s
    gives every member its own gradient (the members share no parameters); much cheaper than vmap(grad).
    ``compile``: the same function under ``torch.compile`` (fast path ``"ensemble-compiled"`` of
    :data:`energylab.kernels.FAST_PATHS`: the same gradients); where it cannot be built or run (no C++ compiler,
    a broken one, an unwritable cache folder) one warning and the eager function.
    """
    def member(p, b, common, batch):
        return functional_call(wrapper, (p, b, common), (batch,), tie_weights=False)

    vmapped_member = vmap(member, in_dims=(0, 0, None, 0), randomness="different")

    def forward(p, b, batch):
        return vmapped_member(p, b, shared, batch)
    if not compile:
        return forward
    problem = kernels.cache_problem()
    if problem is not None:
        kernels.fall_back("ensemble-compiled", problem, stacklevel=4)
        return forward
    chosen = []  # the function that worked on the first call: compiled, or eager after a failed build

    def compiled_or_eager(p, b, batch):
        if chosen:
            return chosen[0](p, b, batch)
        try:  # the build happens on the first call: forward graph, then the backward graph on the probe below
            compiled = torch.compile(forward, dynamic=False)  # dynamo caches it per process
            leaves = [t for t in p.values() if t.requires_grad]
            if leaves:  # build the backward now, not inside the optimiser step: a probe pass whose gradients and
                # random draws are dropped (a compiled backward donates its buffers, so it cannot retain the graph)
                with torch.random.fork_rng():
                    probe = compiled(p, b, batch)
                    torch.autograd.grad(probe[0].sum(), leaves, allow_unused=True)
            out = compiled(p, b, batch)
            chosen.append(compiled)
            return out
        except Exception as err:  # noqa: BLE001 - any build failure; a model that does not vmap fails eagerly too
            out = forward(p, b, batch)
            kernels.fall_back("ensemble-compiled", f"torch.compile failed ({type(err).__name__}: {err})")
            chosen.append(forward)
            return out

    return compiled_or_eager


def _shared_buffers(models: list[nn.Module], buffers: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The non-persistent buffers (outside the state dict: masks, caches) that are equal in every member.

    vmap then sees one unbatched tensor instead of S copies, so the kernels that read it (a masked fill by a causal
    mask) skip the broadcast over members. Persistent buffers (running statistics) stay per member.
    """
    model = models[0]
    transient = set(dict(model.named_buffers())) - set(model.state_dict())
    return {k: v[0] for k, v in buffers.items() if k in transient and all(torch.equal(v[0], b) for b in v[1:])}


def _stack(batches: list):
    """Stack the members' batches (tensors, or tuples/lists/dicts of them) along a new dim 0."""
    first = batches[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(batches)
    if isinstance(first, (list, tuple)):
        return type(first)(_stack([b[i] for b in batches]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _stack([b[k] for b in batches]) for k in first}
    raise TypeError(f"ensemble batches must be tensors or tuples/lists/dicts of tensors, got {type(first).__name__}")


def _clip_per_member(grads: list[torch.Tensor], max_norm: float) -> None:
    """Scale each member's gradients by min(1, max_norm / ‖g_s‖), as clip_grad_norm_ does per model."""
    sq = sum(g.flatten(1).pow(2).sum(1) for g in grads)  # (S,)
    coef = (max_norm / (portable.exact_sqrt(sq) + 1e-6)).clamp(max=1.0)  # not VML's processor-dependent sqrt
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))  # (S, 1, ..., 1) broadcast over each member's tensor


def _unstack_into(models, params, buffers) -> None:
    with torch.no_grad():
        for i, model in enumerate(models):
            for name, p in model.named_parameters():
                p.copy_(params[name][i])
            for name, b in model.named_buffers():
                b.copy_(buffers[name][i])


def _sequential(make_model, loss_fn, batches, config, seeds, eval_fn, after_step, out_dir, resume, identity
                ) -> Ensemble:
    models, histories = [], []
    for seed in seeds:
        seed_everything(seed)
        model = make_model(seed)
        hook = None
        if after_step is not None:
            def hook(m, step):  # the same (S=1, ...) view of the parameters the vmapped path passes
                views = {k: v.unsqueeze(0) for k, v in m.named_parameters()}
                after_step(views, step)
        cfg = TrainConfig(**{**config.__dict__, "seed": seed})
        sub = None if out_dir is None else os.path.join(out_dir, f"seed{seed}")
        histories.append(train(model, loss_fn, lambda step, s=seed: batches(step, s), cfg, eval_fn=eval_fn,
                               after_step=hook, out_dir=sub, resume=resume, identity=identity))
        models.append(model)
    return Ensemble(seeds, models, histories, vmapped=False)
