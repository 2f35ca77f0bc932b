"""The type stubs (python/reel/*.pyi) against the package they describe: mypy's stubtest
(scripts/install-deps.sh installs mypy), and a check of names and signatures: every public name of
the stubs exists at runtime with the same parameters, and every public name has a stub."""

import ast
import importlib
import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest

import reel

PACKAGE = pathlib.Path(reel.__file__).parent
ALLOWLIST = pathlib.Path(__file__).with_name("stubtest_allowlist.txt")
MYPY_CONFIG = pathlib.Path(__file__).with_name("stubtest_mypy.ini")
STUBBED = ["reel", "reel.metrics", "reel.sklearn", "reel.optuna"]


def test_stubtest_finds_no_difference(tmp_path):
    try:
        import mypy.stubtest  # noqa: F401
    except ImportError:
        pytest.fail("mypy is not installed (Debian package mypy, scripts/install-deps.sh)")
    env = dict(os.environ, PYTHONPATH=str(PACKAGE.parent))
    p = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--allowlist", str(ALLOWLIST),
                        "--mypy-config-file", str(MYPY_CONFIG), "reel"], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    checked = int(re.search(r"(\d+) modules", p.stdout).group(1))
    assert checked >= len(STUBBED), p.stdout  # "reel" and its submodules


def _public(name):
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _stub_tree(module):
    path = PACKAGE / (module.split(".", 1)[1] + ".pyi" if "." in module else "__init__.pyi")
    return ast.parse(path.read_text(), str(path))


def _stub_params(fn):
    a = fn.args
    params = [(p.arg, "positional") for p in a.posonlyargs + a.args]
    if a.vararg:
        params.append((a.vararg.arg, "*"))
    params += [(p.arg, "keyword") for p in a.kwonlyargs]
    if a.kwarg:
        params.append((a.kwarg.arg, "**"))
    defaults = len(a.defaults)
    positional = a.posonlyargs + a.args
    with_default = {p.arg for p in positional[len(positional) - defaults:]}
    with_default |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
    return params, with_default


def _runtime_params(obj):
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "positional",
             inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
             inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.KEYWORD_ONLY: "keyword",
             inspect.Parameter.VAR_KEYWORD: "**"}
    sig = inspect.signature(obj)
    params = [(p.name, kinds[p.kind]) for p in sig.parameters.values()]
    return params, {p.name for p in sig.parameters.values() if p.default is not p.empty}


def _compare_function(where, fn, obj, problems):
    if not callable(obj):
        problems.append(f"{where}: a function in the stub, {type(obj).__name__} at runtime")
        return
    if _stub_params(fn) != _runtime_params(obj):
        problems.append(f"{where}: stub {_stub_params(fn)} != runtime {_runtime_params(obj)}")


def _has_source(cls):
    try:
        inspect.getsource(cls)
        return True
    except (OSError, TypeError):
        return False


def _compare_class(where, node, cls, problems):
    # An attribute may be set by a base class (scikit-learn's sets n_features_in_).
    source = "".join(inspect.getsource(c) for c in cls.__mro__ if c is not object
                     and not inspect.isbuiltin(c) and _has_source(c))
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and _public(item.name):
            if any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list):
                if not isinstance(inspect.getattr_static(cls, item.name, None), property):
                    problems.append(f"{where}.{item.name}: a property in the stub only")
                continue
            if not hasattr(cls, item.name):
                problems.append(f"{where}.{item.name}: not present at runtime")
            else:
                _compare_function(f"{where}.{item.name}", item, getattr(cls, item.name), problems)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            name = item.target.id
            if not hasattr(cls, name) and f"self.{name} =" not in source:
                problems.append(f"{where}.{name}: an attribute in the stub, never set at runtime")


@pytest.mark.parametrize("module", STUBBED)
def test_stub_names_and_signatures_match_the_runtime(module):
    runtime = importlib.import_module(module)
    problems = []
    stubbed = set()
    for node in _stub_tree(module).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.ImportFrom):
            names = [a.asname for a in node.names if a.asname]  # re-exports: "X as X"
        else:
            continue
        for name in names:
            stubbed.add(name)
            if not _public(name):
                continue
            if not hasattr(runtime, name):
                problems.append(f"{module}.{name}: in the stub, not present at runtime")
            elif isinstance(node, ast.FunctionDef):
                _compare_function(f"{module}.{name}", node, getattr(runtime, name), problems)
            elif isinstance(node, ast.ClassDef):
                _compare_class(f"{module}.{name}", node, getattr(runtime, name), problems)
    if hasattr(runtime, "__all__") and "__all__" not in stubbed:
        problems.append(f"{module}.__all__: at runtime, not in the stub")
    own = [n for n, v in vars(runtime).items() if _public(n) and not n.startswith("__")
           and not inspect.ismodule(v) and getattr(v, "__module__", module) == module]
    for name in set(own) | set(getattr(runtime, "__all__", [])):
        if name not in stubbed:
            problems.append(f"{module}.{name}: at runtime, not in the stub")
    assert not problems, "\n".join(problems)


def test_the_check_sees_a_wrong_stub(tmp_path):
    # The comparison itself: a stub that names a class the runtime lacks and misses a parameter.
    tree = ast.parse("class Reader: ...\ndef train(config): ...\n")
    problems = []
    _compare_function("reel.train", tree.body[1], reel.train, problems)
    assert problems and "reel.train" in problems[0]
    assert not hasattr(reel, "Reader")
