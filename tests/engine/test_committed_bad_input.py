"""Bad input to committed results (issue 35): missing, truncated and hand-edited committed files; commit_results
never overwrites without being asked. (The command line's --commit: tests/experiments/test_cli_bad_input.py.)"""
import json

import pytest

from energylab.engine import committed as C
from energylab.engine.results import Results


def _results():
    return Results("nt", {"a": 1}, final={"acc": 0.5})


def test_missing_truncated_and_hand_edited_committed_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no committed results at .*medium.json"):
        C.load_committed("nt", "medium", root=str(tmp_path))
    path = C.commit_results(_results(), "nt", "medium", root=str(tmp_path), source={"commit": "abc", "dirty": False})
    text = open(path).read()
    assert C.load_committed("nt", "medium", root=str(tmp_path))[0].final == {"acc": 0.5}
    for broken, expected in [
        (text[: len(text) // 2], "is truncated or corrupt"),
        ("[1, 2]", "is not a committed results file"),
        (json.dumps({**json.loads(text), "provenance": "by hand"}), "has no provenance block"),
        (json.dumps({**json.loads(text), "provenance": {"date": "2026"}}), r"lacks provenance fields \['commit', "
                                                                            r"'machine'\]"),
        (json.dumps({k: v for k, v in json.loads(text).items() if k != "histories"}),
         r"is not an energylab results file \(KeyError"),
        (json.dumps({**json.loads(text), "histories": {"s": {"steps": 3}}}), "is not an energylab results file"),
    ]:
        with open(path, "w") as f:
            f.write(broken)
        with pytest.raises(ValueError, match=expected):
            C.load_committed("nt", "medium", root=str(tmp_path))


def test_commit_never_overwrites_without_being_asked(tmp_path):
    root, src = str(tmp_path), {"commit": "abc", "dirty": False}
    path = C.commit_results(_results(), "nt", "medium", root=root, source=src)
    before = open(path).read()
    with pytest.raises(ValueError, match=f"^{path} already holds committed results; pass --force"):
        C.commit_results(Results("nt", {"a": 2}), "nt", "medium", root=root, source=src)
    assert open(path).read() == before
    C.commit_results(Results("nt", {"a": 2}), "nt", "medium", root=root, source=src, overwrite=True)
    assert json.load(open(path))["config"] == {"a": 2}
