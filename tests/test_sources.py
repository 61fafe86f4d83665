"""Files the library reads and commands it runs (issue 35): torch.load always with weights_only=True (a pickle
in a checkpoint or a downloaded file cannot run code), and no shell command line built from strings."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = sorted(p for folder in ("energylab", "scripts", "tests") for p in (ROOT / folder).rglob("*.py"))


def _calls(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def _name(func) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _keyword(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def test_the_scan_sees_the_library():
    assert len(SOURCES) > 100 and any(p.name == "results.py" for p in SOURCES)


CALLS = {path: _calls(path) for path in SOURCES}


def test_torch_load_always_passes_weights_only_true():
    bad = [f"{path.relative_to(ROOT)}:{call.lineno}" for path, calls in CALLS.items() for call in calls
           if _name(call.func) == "torch.load" and not (isinstance(_keyword(call, "weights_only"), ast.Constant)
                                                        and _keyword(call, "weights_only").value is True)]
    assert bad == [], f"torch.load without weights_only=True at {bad}"


SHELL_CALLS = {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput"}


def _shell_problem(call):
    name = _name(call.func)
    if name in SHELL_CALLS:
        return f"{name} runs a shell"
    if name.startswith("subprocess."):
        shell = _keyword(call, "shell")
        if shell is not None and not (isinstance(shell, ast.Constant) and shell.value is False):
            return "shell=True"
        if call.args and isinstance(call.args[0], (ast.Constant, ast.JoinedStr, ast.BinOp)):
            return "a command line string instead of an argument list"
    return None


def test_no_shell_command_lines():
    bad = [f"{path.relative_to(ROOT)}:{call.lineno}: {_shell_problem(call)}" for path, calls in CALLS.items()
           for call in calls if _shell_problem(call)]
    assert bad == []


def test_the_shell_scan_would_catch_one():
    call = ast.parse("subprocess.run(f'git -C {repo} log', shell=True)").body[0].value
    assert _shell_problem(call) == "shell=True"
    call = ast.parse("os.system('ls ' + user)").body[0].value
    assert _shell_problem(call) == "os.system runs a shell"
