"""Run folders, owned here: which folder holds which run, its files, and what identifies a run.

A run folder (``out_dir``) holds one run. An experiment run (:func:`experiment_folder`, called once by
:func:`energylab.experiments.run_experiment`) records its experiment, profile and config in ``run.json`` when it
starts and writes ``results.json`` when it finishes; each model it trains checkpoints ``checkpoint.pt`` in a
folder of its own (:func:`claim_run_dir`, called once by :func:`energylab.engine.train.train` and the ensemble mode).
A run is identified by its config (:func:`config_record`): resuming or loading a folder written under another
config is a ValueError naming the differing fields (:func:`config_diff`), and a fresh run refuses a folder that
already holds one. Every file is written atomically through a temporary file unique to its writer, so a reader
never sees half a file and two writers never tear one. What a run produced (:class:`energylab.engine.results.History`,
:class:`~energylab.engine.results.Results`) is data, in :mod:`energylab.engine.results`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import uuid
from typing import IO, Any, Callable, Iterator

import torch

RESULTS = "results.json"  # file name of an experiment's Results inside out_dir, written when the run finished
MANIFEST = "run.json"  # experiment, profile and config an experiment run in out_dir was started with
CHECKPOINT = "checkpoint.pt"  # file name of a training run's checkpoint inside its out_dir
CHECKSUM = "checksum"  # key of a checkpoint's own checksum (:func:`state_checksum`)
RUN_FILES = (RESULTS, MANIFEST, CHECKPOINT)
# config fields that say where or how visibly a run computes, not what: they may change between resumes
VOLATILE = frozenset({"device", "progress", "compile", "checkpoint_every"})


# ------------------------------------------------------------------------------------ files and folders


def prepare_out_dir(out_dir: str) -> str:
    """Create ``out_dir`` and check it is writable; ValueError otherwise."""
    try:
        os.makedirs(out_dir, exist_ok=True)
        probe = _unique_tmp(os.path.join(out_dir, ".write_test"))
        with open(probe, "x") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as err:
        raise ValueError(f"out_dir={out_dir!r} is not writable: {err}") from None
    return out_dir


def claim_run_dir(out_dir: str, resume: bool) -> bool:
    """Prepare ``out_dir`` for one training run; return whether it holds a checkpoint to resume.

    A fresh run (``resume=False``) refuses a folder that already holds a checkpoint: it never overwrites
    another run.
    """
    prepare_out_dir(out_dir)
    path = os.path.join(out_dir, CHECKPOINT)
    if os.path.exists(path) and not resume:
        raise ValueError(f"out_dir {out_dir!r} already holds a run ({CHECKPOINT}); pass resume=True (--resume) "
                         f"to continue it, or choose another folder")
    return os.path.exists(path)


def run_files(out_dir: str, names: tuple[str, ...] = RUN_FILES) -> list[str]:
    """Paths relative to ``out_dir`` of the run files (``names``) anywhere under it, sorted; [] if no folder."""
    found = []
    for root, dirs, files in os.walk(out_dir):
        dirs.sort()
        found += [os.path.relpath(os.path.join(root, n), out_dir) for n in sorted(files) if n in names]
    return found


def atomic_write(path: str, write: Callable[[IO], None], binary: bool = False) -> str:
    """Call ``write(file)`` on a temporary file unique to this writer next to ``path``, then ``os.replace`` it.

    Readers see the old file or the new one, never a part; concurrent writers never share a temporary file.
    """
    tmp = _unique_tmp(path)
    try:
        with open(tmp, "xb" if binary else "x") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return path


def read_json(path: str) -> Any:
    """``json.load`` of ``path``; a truncated or corrupt file is a ValueError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is truncated or corrupt ({err}); delete it and run again") from None


def write_json(path: str, data: Any) -> str:
    """``json.dump`` of ``data`` to ``path`` atomically (:func:`atomic_write`)."""
    return atomic_write(path, lambda f: json.dump(data, f))


def _unique_tmp(path: str) -> str:
    return f"{path}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp"


# ------------------------------------------------------------------------------------- identity of a run


def config_record(config: Any) -> Any:
    """A config (dataclass or dict) as plain JSON data: nested dataclasses become dicts, tuples lists.

    This is how :class:`Results` and checkpoints record the config a run was made with.
    """
    data = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
    return json.loads(json.dumps(data, default=str))


def config_diff(recorded: Any, wanted: Any, ignore: frozenset = VOLATILE, _name: str = "") -> dict[str, tuple]:
    """``{field: (recorded, wanted)}`` for every field that differs; nested fields as ``outer.inner`` (lists of
    equal length as ``outer.0.inner``). Fields named in ``ignore`` are skipped at any depth."""
    if isinstance(recorded, dict) and isinstance(wanted, dict):
        diff = {}
        for key in list(recorded) + [k for k in wanted if k not in recorded]:
            if key not in ignore:
                diff.update(config_diff(recorded.get(key, "<missing>"), wanted.get(key, "<missing>"), ignore,
                                        f"{_name}.{key}" if _name else str(key)))
        return diff
    if isinstance(recorded, list) and isinstance(wanted, list) and len(recorded) == len(wanted) and any(
            isinstance(v, (dict, list)) for v in recorded):
        diff = {}
        for i, (a, b) in enumerate(zip(recorded, wanted)):
            diff.update(config_diff(a, b, ignore, f"{_name}.{i}"))
        return diff
    return {} if recorded == wanted else {_name or "config": (recorded, wanted)}


def format_diff(diff: dict[str, tuple], old: str = "recorded", new: str = "requested") -> str:
    """``"n_batch: 40 (recorded) != 20 (requested); ..."`` on one line, long values shortened."""
    def short(v):
        text = repr(v)
        return text if len(text) <= 80 else text[:77] + "..."
    return "; ".join(f"{k}: {short(a)} ({old}) != {short(b)} ({new})" for k, (a, b) in diff.items())


def run_identity(train_config: Any, identity: Any = None) -> dict:
    """What a checkpoint must match to be resumed: the training config and ``identity`` (e.g. the experiment's
    config), as JSON data."""
    return {"train": config_record(train_config), "config": config_record(identity)}


# ------------------------------------------------------------------------------------------- checkpoints


def save_checkpoint(out_dir: str, state: dict) -> str:
    """Write ``state`` to ``out_dir/checkpoint.pt`` atomically (:func:`atomic_write`); rank 0 only.

    ``state`` holds tensors, numbers, strings, lists and dicts (loadable with ``weights_only=True``) and an
    ``"identity"`` (:func:`run_identity`).
    """
    path = os.path.join(out_dir, CHECKPOINT)
    if process_rank() == 0:
        state = {**state, CHECKSUM: state_checksum(state)}
        atomic_write(path, lambda f: torch.save(state, f), binary=True)
    return path


def state_checksum(state: Any) -> str:
    """SHA-256 of a checkpoint's contents: every tensor's dtype, shape and bytes and every other value, in the
    order of the (nested) dicts and lists; the ``"checksum"`` entry itself is left out.

    The zip container torch writes carries CRCs that ``torch.load`` does not check, so a flipped bit inside a
    tensor would otherwise resume silently from corrupted weights."""
    digest = hashlib.sha256()

    def visit(value):
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous()
            digest.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(value, dict):
            items = [(key, item) for key, item in value.items() if key != CHECKSUM]
            digest.update(f"D{len(items)}".encode())
            for key, item in items:
                digest.update(repr(key).encode())
                visit(item)
        elif isinstance(value, (list, tuple)):
            digest.update(f"L{len(value)}".encode())
            for item in value:
                visit(item)
        else:
            digest.update(f"V{value!r}".encode())

    visit(state)
    return digest.hexdigest()


def load_checkpoint(out_dir: str, identity: dict) -> dict:
    """Read ``out_dir/checkpoint.pt`` with ``weights_only=True``; check it was written under ``identity``.

    ValueError for an unreadable file, or one written under another identity (naming the differing fields);
    :func:`load_module_state` checks the model itself. The returned dict has the file's ``"path"`` added.
    """
    path = os.path.join(out_dir, CHECKPOINT)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        step = state["step"]
    except Exception as err:  # noqa: BLE001 - any unpickling failure means the file is unusable
        raise ValueError(f"checkpoint {path} is corrupt or not an energylab checkpoint ({err}); "
                         f"delete it or run without resume") from None
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"checkpoint {path} has an invalid step {step!r}")
    # checkpoints written before the checksum existed have none: they are accepted as they were
    if CHECKSUM in state and state[CHECKSUM] != state_checksum(state):
        raise ValueError(f"checkpoint {path} is corrupt: its contents do not match the checksum written with it "
                         f"(a damaged file); delete it or run without resume")
    state.pop(CHECKSUM, None)
    if "identity" not in state:
        raise ValueError(f"checkpoint {path} records no run identity (written by an older energylab); "
                         f"delete it or choose another out_dir")
    diff = config_diff(state["identity"], identity)
    if diff:
        raise ValueError(f"checkpoint {path} was written with another config: "
                         f"{format_diff(diff, 'checkpoint', 'now')}; continue it with the config it was written "
                         f"with, or start a fresh run in another out_dir")
    state["path"] = path
    return state


def load_module_state(module: torch.nn.Module, state_dict: dict, path: str = "checkpoint") -> None:
    """``module.load_state_dict`` with a ValueError naming the file when the checkpoint is another model's."""
    try:
        module.load_state_dict(state_dict)
    except RuntimeError as err:
        raise ValueError(f"{path} does not match the model: {err}") from None


def get_rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def process_rank() -> int:
    """This process's rank under torch.distributed; 0 when not distributed."""
    dist = torch.distributed
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


# ------------------------------------------------------------------------------------ an experiment's folder


@contextlib.contextmanager
def experiment_folder(out_dir: str, name: str, profile: str, record: dict, resume: bool) -> Iterator[None]:
    """Own ``out_dir`` for one run of experiment ``name`` at config ``record`` while the body trains into it.

    A fresh run refuses a folder that already holds a run; ``resume=True`` accepts only a folder whose
    ``run.json`` / ``results.json`` recorded this experiment and config (``device`` and ``progress`` may
    differ), and starts an empty one fresh. ``run.json`` is written before the body runs. When the body fails,
    the checkpoints written so far are kept; if there are none, the files and folders this run created go.
    """
    before = run_files(out_dir) if os.path.isdir(out_dir) else []
    if resume:
        for path in (os.path.join(out_dir, MANIFEST), os.path.join(out_dir, RESULTS)):
            if os.path.exists(path):
                data = read_json(path)
                check_recorded(path, data.get("experiment"), data.get("config"), name, record)
    elif before:
        shown = ", ".join(before[:3]) + (f" and {len(before) - 3} more" if len(before) > 3 else "")
        raise ValueError(f"out_dir {out_dir!r} already holds a run ({shown}); pass resume=True (--resume) to "
                         f"continue it, or choose another folder")
    had_manifest = os.path.exists(os.path.join(out_dir, MANIFEST))
    folders = {root for root, _, _ in os.walk(out_dir)}
    _barrier()  # under torchrun every rank checks the folder before rank 0 writes to it
    segments = _recorded_numerics(out_dir) if resume else []
    if process_numerics() not in segments:
        segments.append(process_numerics())
    if process_rank() == 0:
        prepare_out_dir(out_dir)
        write_json(os.path.join(out_dir, MANIFEST), {"experiment": name, "profile": profile, "config": record,
                                                     "numerics": segments})
    try:
        yield
    except BaseException:
        if process_rank() == 0 and not had_manifest:
            _undo(out_dir, folders, held_run=bool(before))
        raise


def process_numerics() -> dict:
    """How this process computes on the CPU: ``numerics`` ("pinned", or "unpinned: " and the variables, as a
    committed file's provenance says) and ``torch_threads``. run.json lists those of every segment of its run."""
    from energylab import portable

    unpinned = portable.unpinned()
    return {"numerics": "pinned" if not unpinned else "unpinned: " + ", ".join(unpinned),
            "torch_threads": torch.get_num_threads()}


def _recorded_numerics(out_dir: str) -> list:
    """The numerics run.json in ``out_dir`` records for the segments trained so far ([] if none or unreadable)."""
    path = os.path.join(out_dir, MANIFEST)
    try:
        segments = read_json(path).get("numerics") if os.path.exists(path) else []
    except (ValueError, OSError):
        return []
    return list(segments) if isinstance(segments, list) else []


def check_recorded(path: str, experiment, recorded, name: str, wanted: dict) -> None:
    """ValueError unless ``path`` recorded experiment ``name`` with config ``wanted``."""
    if experiment != name:
        raise ValueError(f"{path} holds experiment {experiment!r}, not {name!r}; choose another folder")
    diff = config_diff(recorded, wanted)
    if diff:
        raise ValueError(f"{path} was written with another config: {format_diff(diff)}; pass the config it was "
                         f"written with, or choose another folder")


def _undo(out_dir: str, keep: set[str], held_run: bool) -> None:
    """After a failed run that wrote ``run.json``: remove it if the folder held a run before (whose config it may
    not be) or holds no checkpoint now, and in the latter case also the empty folders not in ``keep``."""
    trained = run_files(out_dir, (CHECKPOINT, RESULTS)) if os.path.isdir(out_dir) else []
    manifest = os.path.join(out_dir, MANIFEST)
    if (held_run or not trained) and os.path.exists(manifest):
        os.remove(manifest)
    if trained:
        return
    for root, _, _ in sorted(os.walk(out_dir), key=lambda w: -len(w[0])):  # deepest first
        if root not in keep:
            try:
                os.rmdir(root)  # only empty folders go
            except OSError:
                pass


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
