"""What a committed or published chapter must not carry: one home for the clean-up both build scripts apply.

- per-run noise: execution timestamps, papermill's run metadata;
- papermill's injected-parameters cell: the values go into the chapter's own ``parameters`` cell instead, so a page
  shows its parameters once;
- stream outputs split by flushes: consecutive outputs of one stream are merged, so a table prints in one box.
"""
from __future__ import annotations


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
