"""Each package's public names, read from its files: the facades kept from their private modules' `__all__`,
a budget of promised names, and the README's one table of them (issue 31; `ci/layers.py` rule 9).

A public module is any module of a package's source with no `_` component after the package's name. For each
package of `workspace.PUBLIC_BUDGET`, this check fails when:

1. a public module (a script, run as a program with no `__all__` and no `__dir__`, is no module) has no
   literal `__all__` (a list or tuple of strings, possibly grown by `__all__ += _x.__all__`
   or `__all__ += [...]`), no `__dir__`, or lists a name it does not bind;
2. a **facade** (a public module that defines nothing but `__dir__`, and, for a lazy top level, `__getattr__`
   and its `_LAZY` table) lists other than exactly what it imports: the `__all__` of each private module it
   star-imports (`from ._x import *`, paired with `__all__ += _x.__all__`), plus each name it imports by name;
3. a name a promised public module imports from a private module of its package is not in that module's
   `__all__` (the private module's `__all__` is the one list of what it offers; a facade follows it), or that
   private module has no literal `__all__` (the unstable module may show any name: it promises nothing);
4. a lazy top level (`_LAZY`: name -> private module, loaded on first use) lists a name whose module's
   `__all__` does not hold it, or its `if TYPE_CHECKING:` block imports other than exactly `_LAZY`'s names
   from `_LAZY`'s modules;
5. the package promises more names than its budget: the promised names are every public module's `__all__`
   but the unstable module's (`workspace.UNSTABLE`, `mosaic.<pkg>.internals`: what only the package's own
   tests and its reviewers use, with no compatibility promise, which its docstring must say);
6. the README's "Public names" table is not exactly the public modules, each once, with their `__all__` and
   "promised" or "unstable".

Run alone (`python ci/facades.py [PKG...]`) it prints each package's count against its budget; `--table PKG`
prints the README table the files imply (to paste after a reviewed change).
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys
from dataclasses import dataclass, field

import workspace

UNSTABLE_PROMISE = "no compatibility promise"
TABLE_HEADING = "## Public names"


@dataclass
class Module:
    """What this check reads of one module of a package's source."""

    name: str  # dotted inside the package: "" for the package, "testing.lab", "_root"
    path: pathlib.Path
    all_names: list[str] | None = None  # None: no literal __all__
    all_problem: str | None = None
    all_from: list[str] = field(default_factory=list)  # modules whose __all__ is added (`__all__ += _x.__all__`)
    stars: list[str] = field(default_factory=list)  # modules star-imported
    named: dict[str, tuple[str, str]] = field(default_factory=dict)  # bound name -> (module, its name there)
    module_imports: dict[str, str] = field(default_factory=dict)  # `from . import _x`: bound name -> module
    defined: set[str] = field(default_factory=set)  # def, class, assignment (other than __all__, _LAZY)
    lazy: dict[str, str] | None = None  # _LAZY: name -> module (resolved)
    type_checking: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (module, its name)
    has_dir: bool = False
    docstring: str = ""
    script: bool = False  # run as a program (`if __name__ == "__main__":`) with no `__all__`: not a module
    foreign: dict[str, str] = field(default_factory=dict)  # bound name -> another Mosaic package's module

    @property
    def public(self) -> bool:
        return not any(part.startswith("_") for part in self.name.split(".") if part)

    @property
    def facade(self) -> bool:
        return not (self.defined - {"__dir__", "__getattr__"})

    @property
    def shown(self) -> str:
        return self.name or "(package)"


def _resolve(base: list[str], level: int, module: str | None, package: str) -> str | None:
    """A `from` import's module, dotted inside the package, or None when it is outside the package."""
    package = workspace.module_name(package)
    if level == 0:
        if module is None or not (module == f"mosaic.{package}" or module.startswith(f"mosaic.{package}.")):
            return None
        return module[len(f"mosaic.{package}"):].lstrip(".")
    parts = base[: len(base) - (level - 1)] + (module.split(".") if module else [])
    return ".".join(parts)


def _literal_names(node: ast.expr) -> list[str] | None:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def read_module(name: str, path: pathlib.Path, package: str) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    mod = Module(name, path, docstring=ast.get_docstring(tree) or "")
    own = name.split(".") if name else []
    base = own if path.name == "__init__.py" else own[:-1]
    modules_here = _modules_of(path, package)
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("__name__ == '__main__'",
                                                                   '__name__ == "__main__"'):
            mod.script = True
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                if isinstance(sub, ast.ImportFrom):
                    src = _resolve(base, sub.level, sub.module, package)
                    if src is None and sub.level == 0 and (sub.module or "").startswith("mosaic."):
                        src = sub.module  # another package's name, loaded lazily (its check holds its list)
                    if src is not None:
                        for a in sub.names:
                            mod.type_checking[a.asname or a.name] = (src, a.name)
            continue
        if isinstance(node, ast.ImportFrom):
            src = _resolve(base, node.level, node.module, package)
            if src is None and node.level == 0 and (node.module or "").startswith("mosaic."):
                # Another Mosaic package's names, re-exported (that package's own check holds its lists).
                for a in node.names:
                    if a.name != "*":
                        mod.foreign[a.asname or a.name] = node.module or ""
                continue
            if src is None or node.module == "__future__":
                continue
            for a in node.names:
                if a.name == "*":
                    mod.stars.append(src)
                elif (f"{src}.{a.name}" if src else a.name) in modules_here:
                    mod.module_imports[a.asname or a.name] = f"{src}.{a.name}" if src else a.name
                else:
                    mod.named[a.asname or a.name] = (src, a.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            mod.defined.add(node.name)
            mod.has_dir |= node.name == "__dir__"
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if "__all__" in names:
                _read_all(mod, node, base, package)
            elif "_LAZY" in names and node.value is not None and isinstance(node.value, ast.Dict):
                lazy = ast.literal_eval(node.value)
                mod.lazy = {k: _resolve(base, len(v) - len(v.lstrip(".")), v.lstrip(".") or None, package) or v
                            for k, v in lazy.items()}
            else:
                mod.defined.update(names)
    mod.script = mod.script and mod.all_names is None and not mod.has_dir
    return mod


def _read_all(mod: Module, node: ast.Assign | ast.AnnAssign | ast.AugAssign, base: list[str], package: str) -> None:
    value = node.value
    if value is None:
        return
    if isinstance(node, ast.AugAssign):
        if mod.all_names is None:
            mod.all_problem = "`__all__ +=` before `__all__ =`"
            return
        if (isinstance(value, ast.Attribute) and value.attr == "__all__" and isinstance(value.value, ast.Name)):
            mod.all_from.append(value.value.id)  # resolved once the module's imports are known
            return
        names = _literal_names(value)
        if names is None:
            mod.all_problem = f"`__all__ += {ast.unparse(value)}` is neither `_x.__all__` nor a literal list"
            return
        mod.all_names += names
        return
    names = _literal_names(value)
    if names is None:
        mod.all_problem = f"`__all__ = {ast.unparse(value)}` is not a literal list of strings"
        return
    mod.all_names = names


def _modules_of(path: pathlib.Path, package: str) -> set[str]:
    root = source_root(package)
    return {_module_name(p, root) for p in root.rglob("*.py")}


def source_root(package: str) -> pathlib.Path:
    return workspace.package_dir(package) / "src" / "mosaic" / workspace.module_name(package)


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_package(package: str) -> dict[str, Module]:
    root = source_root(package)
    return {_module_name(p, root): read_module(_module_name(p, root), p, package) for p in sorted(root.rglob("*.py"))}


def exports(mod: Module, modules: dict[str, Module]) -> list[str] | None:
    """A module's `__all__` with every `__all__ += _x.__all__` taken from `_x` (None: not literal)."""
    if mod.all_names is None:
        return None
    names = list(mod.all_names)
    for bound in mod.all_from:
        src = mod.module_imports.get(bound)
        other = modules.get(src) if src is not None else None
        if other is None or other.all_names is None:
            return None
        names += other.all_names
    return names


def check_package(package: str, readme: str | None = None) -> list[str]:
    modules = read_package(package)
    unstable = workspace.UNSTABLE.get(package)
    problems: list[str] = []
    promised: set[str] = set()

    def where(mod: Module) -> str:
        return f"{package}: mosaic.{workspace.module_name(package)}{'.' + mod.name if mod.name else ''}"

    def offered(src: str, name: str) -> bool:
        other = modules.get(src)
        return other is not None and name in (exports(other, modules) or [])

    for mod in modules.values():
        if not mod.public or mod.script:
            continue
        listed = exports(mod, modules)
        if mod.all_problem or listed is None:
            problems.append(f"{where(mod)}: no literal __all__ ({mod.all_problem or 'an `+=` of a module without one'})")
            continue
        if len(set(listed)) != len(listed):
            dupes = sorted({n for n in listed if listed.count(n) > 1})
            problems.append(f"{where(mod)}: __all__ lists {', '.join(dupes)} twice")
        if not mod.has_dir:
            problems.append(f"{where(mod)}: no __dir__ (dir() must list exactly __all__)")
        starred: list[str] = []
        for src in mod.stars:
            star_mod = modules.get(src)
            bound = next((b for b, m in mod.module_imports.items() if m == src), None)
            if star_mod is None or star_mod.all_names is None:
                problems.append(f"{where(mod)}: star-imports {src}, which has no literal __all__")
                continue
            if bound is None or bound not in mod.all_from:
                problems.append(f"{where(mod)}: star-imports {src} without `__all__ += {src.split('.')[-1]}.__all__`")
            starred += exports(star_mod, modules) or []
        for bound in mod.all_from:
            if mod.module_imports.get(bound) not in mod.stars:
                problems.append(f"{where(mod)}: adds {bound}.__all__ without star-importing it")
        lazy = mod.lazy or {}
        bound_names = set(mod.named) | set(starred) | mod.defined | set(lazy) | set(mod.foreign)
        unbound = [n for n in listed if n not in bound_names]
        if unbound:
            problems.append(f"{where(mod)}: __all__ lists {', '.join(unbound)}, which it does not bind")
        for name, (src, there) in mod.named.items():
            if mod.name == unstable:
                break  # the unstable module may show any name of a private module: it promises nothing
            if src in modules and not modules[src].public and name in listed and not offered(src, there):
                problems.append(f"{where(mod)}: re-exports {there} from {src}, whose __all__ does not list it "
                                f"(a private module's __all__ is the one list of what it offers)")
        if mod.facade:
            expected = (set(starred) | {n for n in mod.named if not n.startswith("_")} | set(lazy)
                        | {n for n in mod.foreign if not n.startswith("_")})
            if set(listed) - set(unbound) != expected:  # (an unbound name is reported once, above)
                extra, missing = sorted(set(listed) - expected - set(unbound)), sorted(expected - set(listed))
                problems.append(f"{where(mod)}: a facade's __all__ must be exactly what it imports"
                                + (f"; lists {', '.join(extra)} it does not import" if extra else "")
                                + (f"; imports {', '.join(missing)} it does not list" if missing else ""))
        for name, src in lazy.items():
            if src not in modules and src.startswith("mosaic."):
                continue  # another Mosaic package's name: that package's own check holds its list
            if not offered(src, name):
                problems.append(f"{where(mod)}: _LAZY loads {name} from {src}, whose __all__ does not list it")
        if lazy and {k: (s, k) for k, s in lazy.items()} != mod.type_checking:
            problems.append(f"{where(mod)}: the `if TYPE_CHECKING:` block must import exactly _LAZY's names from "
                            f"_LAZY's modules (for the type checker)")
        if mod.name == unstable:
            if UNSTABLE_PROMISE not in " ".join(mod.docstring.split()):
                problems.append(f"{where(mod)}: the unstable module's docstring must say '{UNSTABLE_PROMISE}'")
        else:
            promised |= set(listed)
    if unstable is not None and unstable not in modules:
        problems.append(f"{package}: workspace.UNSTABLE names {unstable}, which is no module of the package")
    budget = workspace.PUBLIC_BUDGET[package]
    if len(promised) > budget:
        problems.append(f"{package}: {len(promised)} promised public names, over its budget of {budget} "
                        f"(workspace.PUBLIC_BUDGET): keep what only tests need in "
                        f"mosaic.{workspace.module_name(package)}.{unstable or 'internals'}, or raise the budget")
    problems += check_table(package, modules, readme)
    return problems


def table(package: str, modules: dict[str, Module] | None = None) -> dict[str, tuple[list[str], str]]:
    """The README table the files imply: public module -> (its __all__, "promised" | "unstable")."""
    modules = modules if modules is not None else read_package(package)
    top = f"mosaic.{workspace.module_name(package)}"
    rows: dict[str, tuple[list[str], str]] = {}
    for mod in modules.values():
        if mod.public and not mod.script:
            names = exports(mod, modules) or []
            rows[f"{top}.{mod.name}" if mod.name else top] = (
                sorted(names), "unstable" if mod.name == workspace.UNSTABLE.get(package) else "promised")
    return rows


_ROW = re.compile(r"^\|\s*`(?P<module>mosaic\.[\w.]+)`\s*\|(?P<names>[^|]*)\|\s*(?P<promise>\w+)\s*\|\s*$")


def readme_table(text: str) -> dict[str, tuple[list[str], str]] | None:
    """The rows of the README's "Public names" table (None: no such section)."""
    start = text.find(f"\n{TABLE_HEADING}\n")
    if start < 0:
        return None
    section = text[start + len(TABLE_HEADING) + 2:]
    end = section.find("\n## ")
    section = section if end < 0 else section[:end]
    rows: dict[str, tuple[list[str], str]] = {}
    for line in section.splitlines():
        m = _ROW.match(line)
        if m is not None:
            names = sorted(re.findall(r"`([^`]+)`", m.group("names")))
            if m.group("module") in rows:
                rows[m.group("module") + " (twice)"] = (names, m.group("promise"))
            rows[m.group("module")] = (names, m.group("promise"))
    return rows


def check_table(package: str, modules: dict[str, Module], readme: str | None = None) -> list[str]:
    path = workspace.package_dir(package) / "README.md"
    text = readme if readme is not None else path.read_text(encoding="utf-8")
    found = readme_table(text)
    if found is None:
        return [f"{package}: README.md has no '{TABLE_HEADING}' section (one table: module | names | promised or "
                f"unstable; `python ci/facades.py --table {package}` prints it)"]
    expected = table(package, modules)
    problems: list[str] = []
    for module in sorted(set(found) | set(expected)):
        if module not in expected:
            problems.append(f"{package}: README's public names table has a row {module}, which is no public module")
        elif module not in found:
            problems.append(f"{package}: README's public names table has no row for {module}")
        elif found[module] != expected[module]:
            (got, got_p), (want, want_p) = found[module], expected[module]
            extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
            problems.append(f"{package}: README's row for {module} differs from its __all__"
                            + (f"; names {', '.join(extra)} it does not export" if extra else "")
                            + (f"; omits {', '.join(missing)}" if missing else "")
                            + (f"; says {got_p}, not {want_p}" if got_p != want_p else ""))
    return problems


def promised_count(package: str) -> int:
    unstable = workspace.UNSTABLE.get(package)
    modules = read_package(package)
    names: set[str] = set()
    for mod in modules.values():
        if mod.public and not mod.script and mod.name != unstable:
            names |= set(exports(mod, modules) or [])
    return len(names)


def render_table(package: str) -> str:
    lines = ["| module | names | promise |", "|---|---|---|"]
    for module, (names, promise) in sorted(table(package).items()):
        lines.append(f"| `{module}` | {', '.join(f'`{n}`' for n in names)} | {promise} |")
    return "\n".join(lines)


def check() -> list[str]:
    problems: list[str] = []
    for package in workspace.PACKAGES:
        if package in workspace.PUBLIC_BUDGET:
            problems += check_package(package)
    return problems


def main(argv: list[str]) -> int:
    if argv[:1] == ["--table"]:
        for package in argv[1:]:
            print(render_table(package))
        return 0
    packages = argv or [p for p in workspace.PACKAGES if p in workspace.PUBLIC_BUDGET]
    problems: list[str] = []
    for package in packages:
        found = check_package(package)
        problems += found
        print(f"{package}: {promised_count(package)} promised public names, budget {workspace.PUBLIC_BUDGET[package]}"
              + (f"; {len(found)} problem(s)" if found else ""))
    for p in problems:
        print(p)
    unbudgeted = [p for p in workspace.PACKAGES if p not in workspace.PUBLIC_BUDGET]
    if unbudgeted:
        print(f"facades: not budgeted yet: {', '.join(unbudgeted)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
