"""Pytest setup shared by library tests and nbval notebook checks.

1. Processor-independent numerics (:mod:`energylab.portable`): one thread and kernels that run the same
   instructions on every x86-64 processor, set here before torch is imported and inherited by the notebook
   kernels nbval starts. ``pytest --emulate-other-processor`` also lowers the instruction sets of the libraries
   left unpinned, as another processor would: the committed outputs must still match.
2. A summary line: how many cells nbval compared (exactly) and how many it did not.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the library of this checkout

from energylab import portable  # noqa: E402 - torch-free; must run before torch is imported

_EMULATE = "--emulate-other-processor" in sys.argv
portable.pin_environment(emulate_other=_EMULATE)
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

_COUNTS = {"exact": 0, "ignored": 0}


def pytest_addoption(parser):
    parser.addoption("--emulate-other-processor", action="store_true",
                     help="lower the instruction sets of unpinned libraries in notebook kernels "
                          "(energylab.portable.EMULATED_OTHER_PROCESSOR) to check outputs do not depend on them")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if type(item).__name__ != "IPyNbCell":
            continue
        if not item.options.get("check") or item.options.get("skip"):
            _COUNTS["ignored"] += 1
        else:
            _COUNTS["exact"] += 1


def pytest_terminal_summary(terminalreporter):
    if any(_COUNTS.values()):
        where = " (emulating another processor)" if _EMULATE else ""
        terminalreporter.write_line(f"nbval{where}: {_COUNTS['exact']} cells compared exactly, {_COUNTS['ignored']} "
                                    f"not compared (NBVAL_IGNORE_OUTPUT)")
