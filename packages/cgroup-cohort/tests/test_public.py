"""The package's public face: a short top level, named public modules for the rest, one object per name.

What a consumer needs (launch under the claim's unit name, stop with a proof, the reference, the refusal)
is ``mosaic.cgroup_cohort.__all__``; everything else public is in a named module (README "Public
modules"). Every public module has ``__all__`` and a ``__dir__`` that lists exactly it, and every name in it
resolves. A name that two public modules export is the same object in both. This package's own tests,
real-kernel tests and benchmark reach only public names (a private module is for the package itself).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import mosaic.cgroup_cohort

PACKAGE = Path(mosaic.cgroup_cohort.__file__).parent
HERE = Path(__file__).resolve().parent
PUBLIC = ["mosaic.cgroup_cohort", *(f"mosaic.cgroup_cohort.{m}" for m in (
    "cgroupfs", "internals", "launchers", "limits", "proof", "reference", "shim", "stop",
    "testing", "testing.account"))]


def test_the_public_modules_are_every_module_without_an_underscore():
    """No public module is missing from the list above (testing.lab is a pytest plugin, checked below;
    testing/misbehaving_tree.py is a script the engine runs, not a module anyone imports)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if parts and not any(part.startswith("_") for part in parts):
            found.add(".".join(("mosaic.cgroup_cohort", *parts)))
    assert found == set(PUBLIC[1:]) | {"mosaic.cgroup_cohort.testing.lab", "mosaic.cgroup_cohort.testing.misbehaving_tree"}


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_module_lists_what_it_exports_and_dir_says_exactly_that(name):
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported and len(exported) == len(set(exported)), name
    assert dir(module) == sorted(exported)
    for attr in exported:
        assert not attr.startswith("_"), attr
        getattr(module, attr)  # every exported name resolves


def test_the_top_level_is_short_and_says_what_a_consumer_needs():
    top = set(mosaic.cgroup_cohort.__all__)
    assert len(top) <= 20
    assert {"ScopeLauncher", "DirectCgroupLauncher", "PgroupLauncher", "Launcher", "CohortHandle",  # launch
            "CohortRef", "UnlaunchedCohort",                                                         # the refs
            "StopRequest", "force_stop", "FixtureVerifier", "build_boot_proof",                      # the proofs
            "CohortRefusal"} <= top                                                                  # the refusal


def test_a_name_two_modules_export_is_one_object():
    homes: dict[str, tuple[str, object]] = {}
    for name in PUBLIC:
        module = importlib.import_module(name)
        for attr in module.__all__:
            value = getattr(module, attr)
            if attr in homes and attr != "main":  # each runnable module has its own entry point
                assert homes[attr][1] is value, f"{attr}: {homes[attr][0]} and {name} differ"
            homes[attr] = (name, value)


def test_the_lab_plugin_exports_every_hook_and_fixture():
    """``testing.lab`` is a pytest plugin: pytest and pluggy find its hooks and fixtures through
    ``dir(module)``, which its ``__dir__`` limits to ``__all__``, so a public function missing there would be a
    fixture that silently does not exist. Read from the source: importing it needs the repository's harness."""
    tree = ast.parse((PACKAGE / "testing" / "lab.py").read_text(encoding="utf-8"))
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef) and not n.name.startswith("_")}
    exported = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                    and any(getattr(t, "id", None) == "__all__" for t in n.targets))
    assert set(exported) == defined


def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mosaic."):
            parts = (node.module or "").split(".")[2:] + [a.name for a in node.names]
            found += [f"{path.name}:{node.lineno}: {node.module}" for p in parts if p.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno}: {a.name}" for a in node.names
                      if a.name.startswith("mosaic.") and any(p.startswith("_") for p in a.name.split(".")[2:])]
    return found


def test_the_tests_and_the_benchmark_import_public_names_only():
    """A test that needs a mechanism reaches it in a public module or through the public API."""
    files = [p for d in ("tests", "tests_cohort", "bench") for p in sorted((HERE.parent / d).glob("*.py"))]
    assert len(files) > 20
    assert [hit for p in files for hit in _private_imports(p)] == []
