"""Compare trained-model numbers in notebooks with a stated tolerance (an extension of nbval).

A code cell holding the line ``# NBVAL_TOLERANCE rtol=R atol=A`` (followed by a comment line saying why) has
every number in its outputs, printed or plotted, compared as ``|test - committed| <= A + R * |committed|``;
the text around the numbers must still match exactly. Every other cell is compared exactly, as nbval does.
"""
from __future__ import annotations

import re

TOLERANCE_MARKER = re.compile(r"^# NBVAL_TOLERANCE rtol=(\S+) atol=(\S+)\s*$", re.M)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def tolerance_of(source: str):
    """(rtol, atol) from a cell's ``# NBVAL_TOLERANCE`` line, or None."""
    match = TOLERANCE_MARKER.search(source)
    return None if match is None else (float(match.group(1)), float(match.group(2)))


def snap_numbers(test, ref, rtol: float, atol: float):
    """``test`` with each number replaced by ``ref``'s where the two agree within the tolerance.

    Strings are split into numbers and the text between them; JSON values are walked in parallel. Anything that
    does not line up (other text, another count of numbers) is left as it is, so the exact comparison that
    follows still reports it.
    """
    if isinstance(test, str) and isinstance(ref, str):
        t_parts, r_parts = _NUMBER.split(test), _NUMBER.split(ref)
        t_nums, r_nums = _NUMBER.findall(test), _NUMBER.findall(ref)
        if t_parts != r_parts or len(t_nums) != len(r_nums):
            return test
        nums = [r if abs(float(t) - float(r)) <= atol + rtol * abs(float(r)) else t for t, r in zip(t_nums, r_nums)]
        return "".join(p + n for p, n in zip(t_parts, nums + [""]))
    if isinstance(test, dict) and isinstance(ref, dict) and test.keys() == ref.keys():
        return {k: snap_numbers(test[k], ref[k], rtol, atol) for k in test}
    if isinstance(test, list) and isinstance(ref, list) and len(test) == len(ref):
        return [snap_numbers(t, r, rtol, atol) for t, r in zip(test, ref)]
    if isinstance(test, (int, float)) and isinstance(ref, (int, float)) and not isinstance(test, bool):
        return ref if abs(test - ref) <= atol + rtol * abs(ref) else test
    return test


def _snap_output(cell, test, ref, tol):
    """One output (a notebook node) with its stream text or its mimetype values snapped to ``ref``'s numbers."""
    import nbformat

    out = dict(test)
    if "text" in out and "text" in ref:
        out["text"] = snap_numbers(cell.sanitize(out["text"]), cell.sanitize(ref["text"]), *tol)
    if "data" in out and "data" in ref:
        out["data"] = {mime: snap_numbers(cell.sanitize(value), cell.sanitize(ref["data"].get(mime)), *tol)
                       for mime, value in out["data"].items()}
    return nbformat.from_dict(out)


def install(cell_class) -> None:
    """Make ``cell_class.compare_outputs`` (nbval's IPyNbCell) honour ``# NBVAL_TOLERANCE`` lines (idempotent)."""
    if getattr(cell_class, "_energylab_tolerance", False):
        return
    exact_compare = cell_class.compare_outputs

    def compare_outputs(self, test, ref, skip_compare=None):
        tol = tolerance_of(self.cell.source)
        if tol is not None and len(test) == len(ref):
            test = [_snap_output(self, t_out, r_out, tol) for t_out, r_out in zip(test, ref)]
        return exact_compare(self, test, ref, skip_compare)

    cell_class.compare_outputs = compare_outputs
    cell_class._energylab_tolerance = True
