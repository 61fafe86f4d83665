"""Export the pretrained Sudoku models (energylab.pretrained) for the page's solver (book/assets/js/sudoku_solver.js).

    python scripts/export_sudoku_js.py

Writes into book/assets/js/ (copied to the site's _static/ with the other scripts):

* ``<name>.weights.js`` for every pretrained model: its config for the JavaScript layers, its record (accuracy,
  commit) and every state_dict tensor as base64 of its little-endian float32 bytes, exactly the package's weights;
* ``sudoku4-boards.js``: the first BOARDS puzzles (with solutions) of each committed test set, for the board picker.

``tests/models/test_pretrained.py`` checks that these files equal what this script writes now (so they cannot drift from
the package) and that the decoded weights equal the package's bit for bit.
"""
from __future__ import annotations

import base64
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "assets" / "js"
BOARDS = 12  # boards per test set offered by the picker
LABELS = {"transformer": "looped Transformer", "itrsa": "ItrSA", "akorn": "AKOrN", "hyperset": "Hyper-SET"}


def js_config(model) -> dict:
    """What the JavaScript layers need beyond the tensors; ValueError for a layer variant it does not implement."""
    cfg = model.config
    if cfg.layer not in LABELS:
        raise ValueError(f"the page implements the layers {sorted(LABELS)}, not {cfg.layer!r}")
    out = {"family": cfg.layer, "label": LABELS[cfg.layer], "size": cfg.size, "dim": cfg.dim, "heads": cfg.heads,
           "ffn_mult": cfg.ffn_mult, "iterations": cfg.iterations, "inject": cfg.inject}
    layer = model.layer
    if cfg.layer == "hyperset":
        if layer.steps is None or layer.lora_rank or layer.gains is not None or layer.inject or layer.condition != "x0":
            raise ValueError("the page implements Hyper-SET's default layer only (learned steps from x_0, no LoRA, "
                             "no gains)")
        out.update(hidden=layer.hidden, eps=layer.eps, time_dim=layer.steps.time_dim, step_horizon=layer.step_horizon)
    if cfg.layer == "akorn":
        if layer.gain is not None:
            raise ValueError("the page implements AKOrN without the RMSNorm gain")
        out["oscillator"] = layer.n
    return out


def tensor_b64(t) -> dict:
    import numpy as np

    a = t.detach().cpu().contiguous().numpy().astype("<f4")
    return {"shape": list(a.shape), "b64": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")}


def payload(model, record: dict) -> dict:
    """The object the page registers for one model: config, a short record and the base64 tensors."""
    T = model.config.iterations
    return {"config": js_config(model),
            "record": {"name": record.get("name"), "commit": record.get("commit", "")[:10], "date": record.get("date"),
                       "accuracy": {s: {t: a[t] for t in a if int(t) in (T, 2 * T, 4 * T)}
                                    for s, a in record.get("accuracy", {}).items()}},
            "tensors": {k: tensor_b64(v) for k, v in model.state_dict().items()}}


def weights_text(name: str) -> str:
    """The text of ``<name>.weights.js``."""
    from energylab import pretrained

    data = payload(pretrained.load(name), pretrained.info(name))
    return ("// written by scripts/export_sudoku_js.py from energylab/pretrained: do not edit\n"
            "window.SudokuSolverData = window.SudokuSolverData || {};\n"
            f"window.SudokuSolverData[{json.dumps(name)}] = {json.dumps(data, separators=(',', ':'))};\n")


def boards_text() -> str:
    """The text of ``sudoku4-boards.js``."""
    from energylab import pretrained

    with open(pathlib.Path(pretrained.DIRECTORY) / pretrained.TEST_BOARDS) as f:
        data = json.load(f)
    sets = {s: {k: v[:BOARDS] for k, v in d.items()} for s, d in data["sets"].items()}
    return ("// written by scripts/export_sudoku_js.py from energylab/pretrained: do not edit\n"
            f"window.SudokuSolverBoards = {json.dumps({'size': data['size'], 'sets': sets}, separators=(',', ':'))};\n")


def decode_weights(text: str) -> dict:
    """{key: float32 numpy array} from the text of a ``.weights.js`` file (for the tests)."""
    import numpy as np

    payload = json.loads(text.split(" = ", 2)[-1].rstrip().rstrip(";"))
    return {k: np.frombuffer(base64.b64decode(v["b64"]), dtype="<f4").reshape(v["shape"])
            for k, v in payload["tensors"].items()}


def expected_files() -> dict[str, str]:
    from energylab import pretrained

    files = {f"{name}.weights.js": weights_text(name) for name in pretrained.names()}
    files["sudoku4-boards.js"] = boards_text()
    return files


def main() -> int:
    for file, text in expected_files().items():
        (OUT / file).write_text(text)
        print(f"{file}: {len(text.encode()) / 1024:.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
