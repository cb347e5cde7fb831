"""The layers contract of DESIGN.md, checked over source and tests.

import-linter cannot see a PEP 420 namespace split over eight distributions, so this is a small check of
our own. For every package it fails when:

1. the package declares a Mosaic dependency that DESIGN.md's "may import" column does not allow;
2. any module in its src/ or tests/ imports `mosaic.<other>` that the package does not declare
   (tests count: a test that imports an undeclared package would pass here and fail for a user);
3. the package imports itself through a dependency cycle (implied by 1, since the table is acyclic).

Exit status 0 when all hold, 1 with one line per violation otherwise.
"""

from __future__ import annotations

import ast
import pathlib
import sys

import workspace


def _mosaic_imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, top-level mosaic subpackage) for every import of mosaic.<x> in a file."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "mosaic":
                names = [f"mosaic.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "mosaic" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
    return found


def check() -> list[str]:
    by_module = {workspace.module_name(n): n for n in workspace.PACKAGES}
    problems: list[str] = []
    for name in workspace.PACKAGES:
        declared = workspace.declared_mosaic_deps(name)
        for dep in sorted(declared - workspace.MAY_IMPORT[name]):
            problems.append(f"{name}: declares mosaic-{dep}, which DESIGN.md does not let it import")
        for dep in sorted(declared - set(workspace.PACKAGES)):
            problems.append(f"{name}: declares mosaic-{dep}, which is not a package of this repository")
        pkg_dir = workspace.package_dir(name)
        for sub in ("src", "tests"):
            for path in sorted((pkg_dir / sub).glob("**/*.py")):
                for line, mod in _mosaic_imports(path):
                    target = by_module.get(mod)
                    rel = path.relative_to(workspace.ROOT)
                    if target is None:
                        problems.append(f"{rel}:{line}: imports mosaic.{mod}, which no package provides")
                    elif target != name and target not in declared:
                        problems.append(
                            f"{rel}:{line}: imports mosaic.{mod} but {name} does not declare mosaic-{target}"
                        )
    return problems


def main() -> int:
    problems = check()
    for p in problems:
        print(p)
    if problems:
        print(f"layers: {len(problems)} violation(s)")
        return 1
    print(f"layers: {len(workspace.PACKAGES)} packages checked against DESIGN.md, no violation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
