"""The layers contract of docs/design.md and the public-surface rule, checked over every Python file we ship.

import-linter cannot see a PEP 420 namespace split over one distribution per package, so this is a small check of
our own. It fails when:

1. a package declares a Mosaic dependency that docs/design.md's "may import" column does not allow, or a
   test dependency (its `test` extra) that neither that column nor `workspace.MAY_IMPORT_IN_TESTS` allows;
2. any module of a package (src, tests, tests_*, bench: every .py under packages/<pkg>/) imports
   `mosaic.<other>` that the package does not declare (tests count: a test that imports an undeclared
   package would pass here and fail for a user); its tests, tests_* and bench may also import what its
   `test` extra declares, its source never (the terminal's source reaches the client, never the controller);
3. the package imports itself through a dependency cycle (implied by 1, since the table is acyclic);
4. a file outside package <pkg> (another package, ci/, fixtures/, noxfile.py) imports a private part of
   it: `mosaic.<pkg>._x` (any dotted component after the package that starts with `_`, at any depth,
   e.g. `mosaic.pi_rpc.testing._fake_control`), or a private name from one of its modules
   (`from mosaic.<pkg> import _x`). What a caller needs is exported; what is not is private (issue 9,
   "Public surfaces"). A package's own source and benchmarks may import its private modules;
5. a package's own tests (tests/, tests_*/) import a private part of it: a test asserts what a user of the
   package can reach, through the names the package exports (issue 23). A test may still reach a private
   attribute of a public object (`client._state`), where it checks an internal promise by name;
6. a module under packages/<pkg>/src is over 800 lines, or a class there has over 40 methods or spans
   over 600 lines (issue 23): a concept that big is split into the concepts it holds;
7. two or more files of a package's source import each other in a circle (issue 31): every import counts,
   at the top, under `if TYPE_CHECKING:` and inside a function, and importing a module inside a folder
   from outside that folder also imports the folder's `__init__.py` (Python runs it first), so a circle
   closed through a facade counts too. `workspace.KNOWN_CIRCLES` names the circles not broken yet, each
   by its files; a known circle that is gone is a violation too, so the list only shrinks;
8. a private module of a package with folder rows (`workspace.FOLDERS`) imports a module of its package
   from a folder its row does not list, or another Mosaic package its row does not list
   (`workspace.FOLDER_PACKAGES`), or lies in a folder with no row (issue 31: the controller's core, server,
   client, lifecycle and engine adapters). `workspace.KNOWN_FOLDER_EXCEPTIONS` names the crossings not
   removed yet, each with why; one that no longer crosses is a violation too;
9. a package with a name budget (`workspace.PUBLIC_BUDGET`) has a public module whose `__all__` is not kept
   from its private modules' `__all__`, promises more names than its budget, or has a README whose "Public
   names" table differs from its modules (issue 31; `ci/facades.py` holds the check and says how).

Exit status 0 when all hold, 1 with one line per violation otherwise.
"""

from __future__ import annotations

import ast
import pathlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import facades
import workspace

MAX_MODULE_LINES = 800
MAX_CLASS_METHODS = 40
MAX_CLASS_LINES = 600


@dataclass(frozen=True)
class MosaicImport:
    """One import of `mosaic.<package>...` found in a file."""

    line: int
    module: str  # the dotted module imported from, e.g. "mosaic.pi_rpc._link"
    names: tuple[str, ...]  # for `from X import a, b`: ("a", "b"); for `import X`: ()

    @property
    def package(self) -> str:
        """The top-level Mosaic module (`pi_rpc` for `mosaic.pi_rpc._link`)."""
        return self.module.split(".")[1]

    def private_part(self) -> str | None:
        """The first private component this import reaches (a module or a name), or None."""
        parts = self.module.split(".")
        for i, part in enumerate(parts[2:], start=2):
            if part.startswith("_"):
                return ".".join(parts[: i + 1])
        for name in self.names:
            if name.startswith("_"):
                return f"{self.module}.{name}"
        return None


def mosaic_imports(source: str, filename: str = "<source>") -> list[MosaicImport]:
    """Every import of a `mosaic.<x>` module in Python source (relative imports are package-internal)."""
    tree = ast.parse(source, filename=filename)
    found: list[MosaicImport] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("mosaic.") and len(alias.name.split(".")) > 1:
                    found.append(MosaicImport(node.lineno, alias.name, ()))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "mosaic":
                # `from mosaic import pi_rpc` imports the package itself.
                for alias in node.names:
                    found.append(MosaicImport(node.lineno, f"mosaic.{alias.name}", ()))
            elif node.module.startswith("mosaic."):
                found.append(MosaicImport(node.lineno, node.module, tuple(a.name for a in node.names)))
    return found


def _package_files(name: str) -> Iterator[pathlib.Path]:
    yield from sorted(p for p in workspace.package_dir(name).glob("**/*.py") if ".nox" not in p.parts)


def _outside_files() -> Iterator[pathlib.Path]:
    """Python files that belong to no package: the CI scripts, the fixture makers, the noxfile."""
    for sub in ("ci", "fixtures"):
        yield from sorted((workspace.ROOT / sub).glob("**/*.py"))
    yield workspace.ROOT / "noxfile.py"


def check_imports(owner: str | None, path: pathlib.Path, source: str) -> list[str]:
    """Violations of rules 2 and 4 in one file. `owner` is the package the file belongs to (None: no
    package, e.g. ci/)."""
    by_module = {workspace.module_name(n): n for n in workspace.PACKAGES}
    declared = workspace.declared_mosaic_deps(owner) if owner is not None else None
    if owner is not None and declared is not None and (_is_test(owner, path) or _is_bench(owner, path)):
        declared = declared | workspace.declared_test_deps(owner)
    try:
        rel: pathlib.Path | str = path.relative_to(workspace.ROOT)
    except ValueError:
        rel = path
    problems: list[str] = []
    for imp in mosaic_imports(source, str(path)):
        target = by_module.get(imp.package)
        if target is None:
            problems.append(f"{rel}:{imp.line}: imports {imp.module}, which no package provides")
            continue
        if declared is not None and target != owner and target not in declared:
            problems.append(f"{rel}:{imp.line}: imports mosaic.{imp.package} but {owner} does not declare "
                            f"mosaic-{target}")
        private = imp.private_part()
        if private is not None and target != owner:
            problems.append(f"{rel}:{imp.line}: imports {private}, a private part of {target} "
                            f"(only {target}'s own files may; export what callers need)")
        elif private is not None and _is_test(owner, path):
            problems.append(f"{rel}:{imp.line}: a test imports {private}, a private part of its own package "
                            f"(tests import what a user can: export it, or test through what is exported)")
    return problems


def _is_bench(owner: str, path: pathlib.Path) -> bool:
    """Whether `path` is one of package `owner`'s benchmarks (bench/ directly under the package)."""
    try:
        return path.relative_to(workspace.package_dir(owner)).parts[0] == "bench"
    except (ValueError, IndexError):
        return False


def _is_test(owner: str | None, path: pathlib.Path) -> bool:
    """Whether `path` is one of package `owner`'s tests (tests/ or tests_<kind>/ directly under the package)."""
    if owner is None:
        return False
    try:
        first = path.relative_to(workspace.package_dir(owner)).parts[0]
    except (ValueError, IndexError):
        return False
    return first == "tests" or first.startswith("tests_")


def check_sizes(path: pathlib.Path, source: str) -> list[str]:
    """Violations of rule 6 in one source module."""
    try:
        rel: pathlib.Path | str = path.relative_to(workspace.ROOT)
    except ValueError:
        rel = path
    problems: list[str] = []
    lines = source.count("\n")
    if lines > MAX_MODULE_LINES:
        problems.append(f"{rel}: {lines} lines, over {MAX_MODULE_LINES}: split it along its concepts")
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.ClassDef):
            methods = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
            span = (node.end_lineno or node.lineno) - node.lineno + 1
            if methods > MAX_CLASS_METHODS or span > MAX_CLASS_LINES:
                problems.append(f"{rel}:{node.lineno}: class {node.name} has {methods} methods over {span} lines, "
                                f"over {MAX_CLASS_METHODS} methods or {MAX_CLASS_LINES} lines")
    return problems


@dataclass(frozen=True)
class Edge:
    """One import between two modules of one package's source."""

    source: str  # the importing module, dotted, e.g. "mosaic.pi_format._tree"
    target: str  # the imported module (a folder's `__init__` is the folder's dotted name)
    path: pathlib.Path  # the importing file
    line: int
    kind: str  # "top" | "type-checking" | "local"
    via: str | None = None  # for an edge to a folder's __init__: the module inside it that was imported


def source_modules(src: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module under a package's `src/` (the directory holding `mosaic/<pkg>/`), by dotted name; an
    `__init__.py` is its folder's name."""
    modules: dict[str, pathlib.Path] = {}
    for path in sorted(src.glob("mosaic/**/*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _import_kind(parents: tuple[ast.AST, ...]) -> str:
    for node in parents:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return "local"
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return "type-checking"
    return "top"


def _walk(node: ast.AST, parents: tuple[ast.AST, ...] = ()) -> Iterator[tuple[ast.AST, tuple[ast.AST, ...]]]:
    for child in ast.iter_child_nodes(node):
        yield child, parents
        yield from _walk(child, parents + (child,))


def module_edges(modules: dict[str, pathlib.Path], name: str, tree: ast.Module) -> list[Edge]:
    """The imports of module `name` that reach another module of `modules` (the same package), resolved:
    `from X import a` reaches module `X.a` when that is a module, else `X`; a relative import is resolved
    against the file's package; each is also an edge to the `__init__` of every folder the target sits in
    that `name` does not (Python runs it first)."""
    path = modules[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    edges: list[Edge] = []
    for node, parents in _walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        kind = _import_kind(parents + (node,))
        for target in dict.fromkeys(targets):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if not target:
                continue
            if target != name:
                edges.append(Edge(name, target, path, node.lineno, kind))
            folder = target.rpartition(".")[0]
            while folder.count(".") >= 2:  # a folder below mosaic.<pkg>: its __init__ runs first
                if folder in modules and folder != name and not name.startswith(folder + "."):
                    edges.append(Edge(name, folder, path, node.lineno, kind, via=target))
                folder = folder.rpartition(".")[0]
    return edges


def _components(nodes: list[str], edges: dict[str, list[Edge]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in edges.get(v, []):
            if e.target not in index:
                strong(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in on_stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or any(e.target == v for e in edges.get(v, [])):
                found.append(sorted(comp))

    for v in nodes:
        if v not in index:
            strong(v)
    return found


def package_graph(src: pathlib.Path) -> tuple[dict[str, pathlib.Path], dict[str, list[Edge]]]:
    """The modules of one package's `src/` and every import edge between them."""
    modules = source_modules(src)
    edges = {name: module_edges(modules, name, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
             for name, path in modules.items()}
    return modules, edges


def _short(name: str) -> str:
    """A module's name inside its package: "mosaic.pi_format._tree" -> "_tree" (the package itself: "")."""
    return ".".join(name.split(".")[2:])


def check_circles(src: pathlib.Path, known: list[frozenset[str]] | tuple[frozenset[str], ...] = ()) -> list[str]:
    """Violations of rule 7 in one package's source: one line per circle (its files and every edge that closes
    it), unless `known` names exactly its files (short names, as `workspace.KNOWN_CIRCLES`); and one line per
    known circle that no longer exists."""
    modules, edges = package_graph(src)
    problems: list[str] = []
    seen: set[frozenset[str]] = set()
    for comp in _components(sorted(modules), edges):
        files = frozenset(_short(m) for m in comp)
        seen.add(files)
        if files in known:
            continue
        inside = [e for m in comp for e in edges.get(m, []) if e.target in comp]
        shown = "; ".join(f"{_rel(e.path)}:{e.line} -> {_short(e.target) or e.target}"
                          + (f" (its __init__, importing {_short(e.via)})" if e.via else "") + f" [{e.kind}]"
                          for e in sorted(inside, key=lambda e: (str(e.path), e.line, e.target)))
        problems.append(f"{_rel(src)}: import circle between {', '.join(sorted(files))}: {shown} (break it: "
                        f"move what both need below both, or type against a Protocol)")
    for files in known:
        if files not in seen:
            problems.append(f"{_rel(src)}: workspace.KNOWN_CIRCLES lists {', '.join(sorted(files))}, which is no "
                            f"longer a circle: remove the entry")
    return problems


def _rel(path: pathlib.Path) -> pathlib.Path | str:
    try:
        return path.relative_to(workspace.ROOT)
    except ValueError:
        return path


def folder_of(module: str, rows: dict[str, set[str]]) -> str | None:
    """The row of a module named inside its package ("core._state", "_refusal", "engines.pi._wire"): the
    longest row that is its folder or a folder above it; row "" holds only the top-level files. None: no row."""
    folder = "/".join(module.split(".")[:-1])
    while folder:
        if folder in rows:
            return folder
        folder = folder.rpartition("/")[0]
    return "" if "." not in module and "" in rows else None


def check_folders(src: pathlib.Path, rows: dict[str, set[str]], packages: dict[str, set[str]] | None = None,
                  exceptions: dict[tuple[str, str], str] | None = None) -> list[str]:
    """Violations of rule 8 in one package's source (the directory holding `mosaic/<pkg>/`): `rows` is its
    `workspace.FOLDERS` entry, `packages` its `FOLDER_PACKAGES` entry (Mosaic package names, e.g.
    "pi-rpc"), `exceptions` its `KNOWN_FOLDER_EXCEPTIONS` entry."""
    packages = packages or {}
    exceptions = exceptions or {}
    modules, edges = package_graph(src)
    by_module = {workspace.module_name(n): n for n in workspace.PACKAGES}
    problems: list[str] = []
    used: set[tuple[str, str]] = set()
    for name, path in modules.items():
        short = _short(name)
        if path.name == "__init__.py" or not short:
            continue
        row = folder_of(short, rows)
        if row is None:
            problems.append(f"{_rel(path)}: folder {'/'.join(short.split('.')[:-1])} has no row in "
                            f"workspace.FOLDERS: say what it may import")
            continue
        allowed = rows[row]
        for e in edges.get(name, []):
            if e.via is not None:
                continue  # the folder's __init__, run on the way to e.via: judged by e.via's own edge
            target = _short(e.target)
            # A folder's __init__ (`from ..engines import Seam`) is in that folder's row.
            inside = f"{target}.__init__" if modules[e.target].name == "__init__.py" and target else target
            target_row = folder_of(inside, rows) if target else ""
            if target_row == row or "*" in allowed or target_row in allowed:
                continue
            if (short, target) in exceptions:
                used.add((short, target))
                continue
            where = "no row" if target_row is None else (target_row or "top level")
            problems.append(f"{_rel(path)}:{e.line}: {row or 'a top-level file'} imports {target or 'the package'}"
                            f" ({where}), which its row in workspace.FOLDERS does not list "
                            f"({', '.join(sorted(allowed)) or 'nothing'})")
        if row in packages:
            for imp in mosaic_imports(path.read_text(encoding="utf-8"), str(path)):
                other = by_module.get(imp.package)
                if other is None or imp.package == name.split(".")[1]:
                    continue  # no such package (rule 2's), or its own package: an edge judged above
                if other not in packages[row]:
                    problems.append(f"{_rel(path)}:{imp.line}: {row or 'a top-level file'} imports "
                                    f"mosaic.{imp.package}, which workspace.FOLDER_PACKAGES does not list for it "
                                    f"({', '.join(sorted(packages[row])) or 'none'})")
    for (importer, imported), why in sorted(exceptions.items()):
        if (importer, imported) not in used:
            problems.append(f"{_rel(src)}: workspace.KNOWN_FOLDER_EXCEPTIONS lists {importer} -> {imported} "
                            f"({why}), which no longer crosses a row: remove the entry")
    return problems


def check() -> list[str]:
    problems: list[str] = []
    for name in workspace.PACKAGES:
        declared = workspace.declared_mosaic_deps(name)
        for dep in sorted(declared - workspace.MAY_IMPORT[name]):
            problems.append(f"{name}: declares mosaic-{dep}, which docs/design.md does not let it import")
        for dep in sorted(workspace.declared_test_deps(name) - workspace.MAY_IMPORT[name]
                          - workspace.MAY_IMPORT_IN_TESTS.get(name, set())):
            problems.append(f"{name}: its tests declare mosaic-{dep}, which neither docs/design.md nor "
                            f"workspace.MAY_IMPORT_IN_TESTS lets them import")
        for dep in sorted(declared - set(workspace.PACKAGES)):
            problems.append(f"{name}: declares mosaic-{dep}, which is not a package of this repository")
        src = workspace.package_dir(name) / "src"
        problems += check_circles(src, workspace.KNOWN_CIRCLES.get(name, ()))
        if name in workspace.FOLDERS:
            problems += check_folders(src, workspace.FOLDERS[name], workspace.FOLDER_PACKAGES.get(name),
                                      workspace.KNOWN_FOLDER_EXCEPTIONS.get(name))
        for path in _package_files(name):
            source = path.read_text(encoding="utf-8")
            problems += check_imports(name, path, source)
            if src in path.parents:
                problems += check_sizes(path, source)
    for path in _outside_files():
        problems += check_imports(None, path, path.read_text(encoding="utf-8"))
    problems += facades.check()
    return problems


def main() -> int:
    problems = check()
    for p in problems:
        print(p)
    if problems:
        print(f"layers: {len(problems)} violation(s)")
        return 1
    print(f"layers: {len(workspace.PACKAGES)} packages checked against docs/design.md, their public surfaces, "
          f"the size bounds ({MAX_MODULE_LINES} lines a module; {MAX_CLASS_METHODS} methods, "
          f"{MAX_CLASS_LINES} lines a class), import circles between files, the folders' rows and the public "
          f"names of {len(workspace.PUBLIC_BUDGET)} budgeted packages, no violation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
