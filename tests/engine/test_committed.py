"""Committed results (energylab.engine.committed): provenance written and read back, the CLI's --commit, and every file
under results/<experiment>/ being a loadable Results of its folder's experiment with machine, date and commit."""
import glob
import os

import pytest

from energylab import experiments
from energylab.__main__ import main
from energylab.engine import committed
from energylab.engine.results import Results


def _results(experiment="toy"):
    return Results(experiment, {"steps": 3}, final={"loss": 0.25}, tables={"t": [{"a": 1}]})


def test_commit_and_load_round_trip(tmp_path):
    path = committed.commit_results(_results(), "toy", "medium", seconds=61.26, command="x", root=str(tmp_path))
    assert path == str(tmp_path / "toy" / "medium.json")
    res, prov = committed.load_committed("toy", "medium", root=str(tmp_path))
    assert res == _results()
    assert prov["seconds"] == 61.3 and prov["command"] == "x" and prov["date"][:2] == "20"
    assert prov["machine"]["cores"] == os.cpu_count() and "torch" in prov["machine"]
    assert prov["commit"] is None or len(prov["commit"]) == 40  # this repository's HEAD (None outside git)
    line = committed.describe_provenance(prov)
    assert line.startswith(f"run {prov['date'][:10]} on ")
    assert line.endswith(", 1.0 min, pinned numerics")  # conftest pins pytest's own numerics


def test_bad_names_and_missing_files_are_clear(tmp_path):
    with pytest.raises(ValueError, match="name must be lower-case"):
        committed.committed_path("toy", "../x")
    with pytest.raises(ValueError, match="not 'nt'"):
        committed.commit_results(_results(), "nt", "medium", root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="python -m energylab run toy --profile medium --commit"):
        committed.load_committed("toy", "medium", root=str(tmp_path))
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "bare.json").write_text('{"experiment": "toy", "config": {}, "histories": {}, "final": {},'
                                                ' "tables": {}, "extra": {}, "provenance": {"date": "2026"}}')
    with pytest.raises(ValueError, match=r"lacks provenance fields \['commit', 'machine'\]"):
        committed.load_committed("toy", "bare", root=str(tmp_path))


def test_cli_commit_writes_the_named_file(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", "tests.experiments.test_cli")
    monkeypatch.setattr(committed, "ROOT", str(tmp_path / "committed"))
    out = str(tmp_path / "run")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")  # as in a reader's shell (conftest pins pytest's own)
    args = ["run", "toy", "--profile", "quick", "--device", "cpu", "--out", out, "--commit", "medium"]
    # torch is loaded in this process and its numerics are this processor's: refused unless asked for
    assert main(args) == 2
    assert "needs the pinned numerics set before torch is imported" in capsys.readouterr().err
    assert main([*args, "--unpinned"]) == 0
    assert "committed results written to" in capsys.readouterr().out
    res, prov = committed.load_committed("toy", "medium")
    assert res == Results.load(out) and "--commit medium" in prov["command"] and prov["seconds"] >= 0
    assert prov["numerics"] == "unpinned: ATEN_CPU_CAPABILITY"
    assert "pinned numerics" not in committed.describe_provenance(prov)


def test_cli_commit_pins_the_numerics_and_one_thread(monkeypatch, tmp_path, capsys):
    from energylab import portable

    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", "tests.experiments.test_cli")
    monkeypatch.setattr(committed, "ROOT", str(tmp_path / "committed"))
    for key, value in portable.PINNED_ENV.items():  # as if set before torch loaded (a fresh CLI process)
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(portable, "configure_torch", lambda: True)  # keep oneDNN for the rest of the session
    args = ["run", "toy", "--profile", "quick", "--device", "cpu", "--commit", "medium"]
    assert main([*args, "--out", str(tmp_path / "a"), "--threads", "2"]) == 2
    assert "--commit runs on one thread" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    _, prov = committed.load_committed("toy", "medium")
    assert prov["numerics"] == "pinned" and prov["machine"]["torch_threads"] == 1
    assert committed.describe_provenance(prov).endswith(", pinned numerics")


def test_bench_commit_writes_one_file_per_section(monkeypatch, tmp_path):
    from energylab.bench import __main__ as bench_main

    monkeypatch.setattr(committed, "ROOT", str(tmp_path))
    monkeypatch.setitem(bench_main.SECTIONS, "toy", "toy_section")
    toy = type("M", (), {"run": staticmethod(lambda quick: [{"layer": "x", "ratio": 1.5 if quick else 2.0}])})
    monkeypatch.setitem(__import__("sys").modules, "energylab.bench.toy_section", toy)
    assert bench_main.main(["toy", "--quick", "--commit"]) == 0
    res, prov = committed.load_committed("bench", "toy")
    import torch

    capability = torch.backends.cpu.get_cpu_capability()  # each CPU row names the instruction set it ran with
    assert res.tables == {"toy": [{"layer": "x", "ratio": 1.5, "capability": capability, "mkl": "default"}]}
    assert res.config == {"section": "toy", "quick": True}
    assert prov["command"] == "python -m energylab.bench toy --quick --commit" and prov["seconds"] >= 0


def test_bench_capability_restarts_with_the_instruction_set_and_names_the_file(monkeypatch, tmp_path):
    from energylab.bench import __main__ as bench_main

    calls = []
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    with monkeypatch.context() as m:
        m.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
        m.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX512")  # a caller's setting does not leak into another capability
        m.setattr(bench_main.subprocess, "run", lambda cmd, env: calls.append(
            (cmd, env["ATEN_CPU_CAPABILITY"], env["TORCHINDUCTOR_CACHE_DIR"], env.get("MKL_ENABLE_INSTRUCTIONS")))
            or type("Done", (), {"returncode": 3})())
        assert bench_main.main(["attention", "--capability", "avx2"]) == 3  # the fresh process's exit code
        assert bench_main.main(["attention", "--capability", "default"]) == 3
    # with its own compiled-kernel cache (inductor's is not keyed on the instruction set), and MKL's matrix
    # products held to AVX2 as well
    assert calls == [([bench_main.sys.executable, "-m", "energylab.bench", "attention", "--capability", "avx2"],
                      "avx2", str(tmp_path / "inductor") + "-avx2", "AVX2"),
                     ([bench_main.sys.executable, "-m", "energylab.bench", "attention", "--capability", "default"],
                      "default", str(tmp_path / "inductor") + "-default", None)]
    # inside that process (the variable set): it measures, and commits under the processor and instruction set
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setattr(committed, "ROOT", str(tmp_path))
    monkeypatch.setitem(bench_main.SECTIONS, "toy", "toy_section")
    toy = type("M", (), {"run": staticmethod(lambda quick: [{"layer": "x"}])})
    monkeypatch.setitem(__import__("sys").modules, "energylab.bench.toy_section", toy)
    monkeypatch.setattr(bench_main, "processor_family", lambda: "intel")
    assert bench_main.main(["toy", "--quick", "--commit", "--capability", "avx2"]) == 0
    _, prov = committed.load_committed("bench", "toy-intel-avx2")
    assert prov["command"] == "python -m energylab.bench toy --quick --capability avx2 --commit"
    with pytest.raises(SystemExit):
        bench_main.main(["toy", "--capability", "sse2"])


def test_processor_family_reads_the_model_name(monkeypatch):
    from energylab.bench import __main__ as bench_main

    for model, family in (("Intel(R) Xeon(R) Processor", "intel"), ("AMD EPYC 9B14", "amd"),
                          ("Neoverse-V2", "arm"), ("QEMU Virtual CPU", "cpu")):
        monkeypatch.setattr(committed, "machine", lambda m=model: {"processor": m})
        assert bench_main.processor_family() == family


# results/<experiment>-<profile>/ are run folders (git-ignored, present only where a run was made): not committed
COMMITTED = sorted(p for p in glob.glob(os.path.join(committed.ROOT, "*", "*.json"))
                   if "-" not in os.path.basename(os.path.dirname(p)))


@pytest.mark.parametrize("path", COMMITTED or [None])
def test_every_committed_file_loads_with_provenance(path):
    if path is None:
        pytest.skip("no committed results yet")
    experiment, name = os.path.basename(os.path.dirname(path)), os.path.basename(path)[:-5]
    res, prov = committed.load_committed(experiment, name)
    assert res.experiment == experiment and (experiment in experiments.EXPERIMENTS or experiment == "bench")
    assert prov["commit"] and len(prov["commit"]) == 40 and prov["machine"]["processor"]


def test_cli_threads_option(monkeypatch, tmp_path, capsys):
    import torch

    monkeypatch.setitem(experiments.EXPERIMENTS, "toy", "tests.experiments.test_cli")
    before = torch.get_num_threads()
    try:
        assert main(["run", "toy", "--device", "cpu", "--out", str(tmp_path / "a"), "--threads", "1"]) == 0
        assert torch.get_num_threads() == 1
        assert main(["run", "toy", "--device", "cpu", "--out", str(tmp_path / "b"), "--threads", "0"]) == 2
        assert "--threads must be >= 1, got 0" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)
