"""What a committed or published chapter must not carry: one home for the clean-up both build scripts apply.

- per-run noise: execution timestamps, papermill's run metadata;
- papermill's injected-parameters cell: the values go into the chapter's own ``parameters`` cell instead, so a page
  shows its parameters once;
- stream outputs split by flushes: consecutive outputs of one stream are merged, so a table prints in one box.

It also says what an output must not show (:func:`notebook_problems`: stderr, errors, warnings), which
tests/book/test_output_hygiene.py checks in the committed chapters and scripts/drift_check.py reports under newer
libraries.
"""
from __future__ import annotations

import re

WARNING = re.compile(r"Warning\b|warnings\.warn")  # UserWarning, FastPathWarning, ... and the line that raised it
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def merge_streams(outputs: list) -> list:
    """Consecutive stream outputs of the same name (stdout, stderr) merged into one."""
    merged = []
    for out in outputs:
        if (out.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                and merged[-1].get("name") == out.get("name")):
            merged[-1]["text"] = "".join(merged[-1]["text"]) + "".join(out["text"])
        else:
            merged.append(out)
    return merged


def clean(nb) -> None:
    """Clean an executed notebook (an nbformat node) in place."""
    injected = [c for c in nb.cells if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    params = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    for cell in injected:
        if params:  # the injected assignments replace the defaults they override, in the chapter's own cell
            params[0].source = _override(params[0].source, cell.source)
        nb.cells.remove(cell)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("papermill", None)
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
    nb.metadata.pop("papermill", None)


def _override(source: str, injected: str) -> str:
    values = {}
    for line in injected.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            name, value = line.split("=", 1)
            values[name.strip()] = value.strip()
    lines = []
    for line in source.splitlines():
        name = line.split("=", 1)[0].strip() if "=" in line else None
        if name in values:
            comment = line[line.index("#"):] if "#" in line else ""
            line = f"{name} = {values[name]}" + (f"  {comment}" if comment else "")
        lines.append(line)
    return "\n".join(lines)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _excerpt(text: str, match) -> str:
    return repr(text[max(0, match.start() - 60):match.end() + 60])


def output_problems(output: dict) -> list[str]:
    """What one output shows that a reader should not see: stderr, an error, a warning (empty when clean)."""
    kind = output.get("output_type")
    if kind == "stream":
        text = _text(output.get("text", ""))
        if output.get("name") == "stderr":
            return [f"stderr: {text.strip()[:120]!r}"]
        match = WARNING.search(text)
        return [f"warning in {output.get('name')}: {_excerpt(text, match)}"] if match else []
    if kind == "error":
        return [f"error output: {output.get('ename')}: {str(output.get('evalue'))[:120]}"]
    found = []
    for mime, value in (output.get("data") or {}).items():
        if mime.startswith("text/"):  # images and JSON twins are not text a reader reads
            text = _text(value)
            match = WARNING.search(text)
            if match:
                found.append(f"warning in {mime}: {_excerpt(text, match)}")
    return found


def notebook_problems(nb: dict) -> list[str]:
    """Every such problem of a notebook (its JSON, or an nbformat node), as 'cell <index> (<id>): ...' or
    'widget <model id>: ...' for the saved outputs of ipywidgets Output widgets, which the website shows too."""
    found = []
    for index, cell in enumerate(nb.get("cells", [])):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            found += [f"cell {index} ({cell.get('id', '?')}): {p}" for p in output_problems(output)]
    state = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for model_id, model in state.items():
        for output in model.get("state", {}).get("outputs", []) or []:
            found += [f"widget {model_id}: {p}" for p in output_problems(output)]
    return found
