"""Every "rule N" a file names is a rule that exists (issue 31): a module keeps its rules as the numbered lines of
its docstring (`1.`, `7b.`, `D.`), and the comments of other modules point at them by number, so a rule that
is renumbered, or a module that is renamed or moved, leaves references that point at nothing.

A reference is `rule N` or `rules N, M and K` / `rules N-M` / `rules N to M` (N: a number with an optional
letter, `4a`, or one capital, `D`), with what comes before it saying whose rules:

| form | whose rules |
|---|---|
| `` `_x`'s rule N ``, `` `_x` rule N ``, `_x rule N`, ``rule N of `_x` ``, `rule N of _x.py` (`.py` optional) | module `_x` of the same package (a folder's module: `` `core/_chain` ``) |
| `` `mosaic.<pkg>.<module>` rule N `` | that module of that package |
| `` `ci/layers.py` rule N `` (any path from the repository's root) | that file |
| `the core's rule N` | the module `NAMED` gives for "the core's" |
| `README rule N`, `the README's rule N` | the numbered lines of the package's README.md (pi-format's "Rules") |
| `rule N`, `module rule N` (bare) | the file's own: a module's docstring, a Markdown file's numbered lines |

Other documents' rules are not this check's: a reference with `brief`, `seed`, `R3-1`, `CHAT-0`, `RFC` or `§`
shortly before it on its line is left alone. An ambiguous form (`its rule 4`, `core rule 8`: a word that names
no module) fails, as does a module that does not exist or an id it does not define. A module's rules are the
labels of its docstring's numbered lines (`^\\s*(\\d+[a-z]?|[A-Z])\\.\\s`); a Markdown file's, the numbered lines
of the whole file.

Checked: every package's source, tests, benchmarks and README, `ci/*.py`, `noxfile.py`, `docs/*.md`, except
`UNCHECKED` (the packages whose files are being moved: their references are rewritten as they move) and the
CHANGELOGs (history: a rule renumbered later is not rewritten there). Exit 0 when every
reference resolves, 1 with one line per reference that does not.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import workspace

# Packages not checked yet: the controller's files move into folders in issue 31 (its helper rewrites the
# references as they move; most name a file that moves: `_core_drift`, `_core_chain`, `_server`), and the
# terminal is not touched by that helper's sibling. Empty when issue 31 is done.
UNCHECKED: set[str] = {"controller"}

# Names that stand for a module: "the core's rule 8" is the core's entry module's docstring.
NAMED: dict[str, str] = {"the core's": "packages/controller/src/mosaic/controller/_core.py"}

_ID = r"(?:\d+[a-z]?|[A-Z])\b"
_LIST = rf"{_ID}(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+|\s+or\s+|\s*[-–]\s*|\s+to\s+){_ID})*"
_REF = re.compile(
    r"(?P<before>"
    r"`(?P<tick>[\w./]+?)`(?:'s)?\s+"          # `_x`'s / `_x` / `mosaic.pkg.mod` / `ci/layers.py`
    r"|(?<![\w`./])(?P<file>[\w/]+\.py)(?:'s)?\s+"  # ci/layers.py rule 7, _x.py rule 2
    r"|(?<![\w`.])(?P<plain>_[a-z0-9_]+)(?:'s)?\s+"  # _access rule 6
    r"|(?P<named>the\s+core's)\s+"
    r"|(?P<readme>(?:the\s+)?README(?:'s)?)\s+"  # README rule 3: the package README's numbered lines
    r"|(?P<word>[A-Za-z]+(?:'s)?)\s+"          # module rule 4 (bare), its rule 4 (ambiguous), the brief's ...
    r")?"
    rf"\b[Rr]ules?\s+(?P<ids>{_LIST})"
    r"(?:\s+of\s+(?P<oftick>`?)(?P<of>(?:_|mosaic\.)[\w./]*?|[\w/]+\.py)(?P=oftick)(?![\w/]))?"
)
_LABEL = re.compile(r"^\s*(\d+[a-z]?|[A-Z])\.\s", re.M)
_OTHER_DOCUMENT = re.compile(r"brief|seed|R3-1|CHAT-0|RFC|§|docs?/|FACTS|\.md")
# Words before "rule" that name no module: ambiguous (any other word leaves the reference bare).
_AMBIGUOUS_WORDS = {"core", "its", "their", "server", "client", "lifecycle", "link"}
SKIP_WORDS_BEFORE = 40  # characters before a reference searched for another document's name


@dataclass(frozen=True)
class Reference:
    path: pathlib.Path
    line: int
    text: str
    target: pathlib.Path | None  # the file whose rules it means; None: ambiguous or no such module
    ids: tuple[str, ...]
    why: str = ""  # for target None: why


def expand(ids: str) -> tuple[str, ...]:
    """`2, 3, 5 and 6` -> 2 3 5 6; `1-7` and `1 to 7` -> 1..7; `A-C` -> A B C."""
    out: list[str] = []
    parts = re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+|\s+or\s+", ids.strip())
    for part in parts:
        m = re.fullmatch(rf"({_ID})\s*(?:[-–]|to)\s*({_ID})", part.strip())
        if m is None:
            out.append(part.strip())
            continue
        a, b = m.group(1), m.group(2)
        if a.isdigit() and b.isdigit():
            out += [str(i) for i in range(int(a), int(b) + 1)]
        elif len(a) == 1 and len(b) == 1 and a.isupper() and b.isupper():
            out += [chr(c) for c in range(ord(a), ord(b) + 1)]
        else:
            out += [a, b]
    return tuple(out)


def labels(path: pathlib.Path) -> set[str]:
    """The rule ids a file defines: a Python module's docstring's numbered lines, a Markdown file's."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        try:
            text = ast.get_docstring(ast.parse(text), clean=False) or ""
        except SyntaxError:
            return set()
    return set(_LABEL.findall(text))


def _package_of(path: pathlib.Path) -> pathlib.Path | None:
    """The source folder `src/mosaic/<pkg>` of the package `path` is in, or None."""
    try:
        parts = path.relative_to(workspace.ROOT / "packages").parts
    except ValueError:
        return None
    return workspace.ROOT / "packages" / parts[0] / "src" / "mosaic" / workspace.module_name(parts[0])


def resolve(name: str, path: pathlib.Path) -> pathlib.Path | None:
    """The file a module name written in `path` means: `_x`, `core/_chain`, `_x.py` in the same package;
    `mosaic.<pkg>.<mod>`; a path from the repository's root (`ci/layers.py`)."""
    name = name.removesuffix(".py")
    if name.startswith("mosaic."):
        parts = name.split(".")
        if len(parts) < 2:
            return None
        pkg = {workspace.module_name(p): p for p in workspace.PACKAGES}.get(parts[1])
        if pkg is None:
            return None
        base = workspace.package_dir(pkg) / "src" / pathlib.Path(*parts)
    elif "/" in name and (workspace.ROOT / f"{name}.py").is_file():
        return workspace.ROOT / f"{name}.py"
    else:
        package = _package_of(path)
        if package is None:
            return None
        base = package / name
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def references(path: pathlib.Path, text: str | None = None) -> Iterator[Reference]:
    """Every rule reference in one file, with the file it means (None when it means none)."""
    if text is None:
        text = path.read_text(encoding="utf-8")
    for m in _REF.finditer(text):
        line = text.count("\n", 0, m.start("ids")) + 1
        start_of_line = text.rfind("\n", 0, m.start()) + 1
        before = text[max(start_of_line, m.start("ids") - SKIP_WORDS_BEFORE): m.start("ids")]
        shown = " ".join(m.group(0).split())
        if _OTHER_DOCUMENT.search(before):
            continue
        ids = expand(m.group("ids"))
        name = m.group("of") or m.group("tick") or m.group("file") or m.group("plain")
        if name is not None:
            if m.group("tick") and not m.group("of") and "/" not in name and not name.startswith(("_", "mosaic.")):
                # `something` rule N where `something` is no module name (a code span): bare.
                yield Reference(path, line, shown, path, ids)
                continue
            target = resolve(name, path)
            yield Reference(path, line, shown, target, ids, "" if target else f"no module {name}")
        elif m.group("readme"):
            package = _package_of(path)
            readme = package.parents[2] / "README.md" if package is not None else None
            yield Reference(path, line, shown, readme if readme is not None and readme.is_file() else None, ids,
                            "" if readme is not None else "README rule N outside a package names no README")
        elif m.group("named"):
            named = NAMED["the core's"]
            target = workspace.ROOT / named
            yield Reference(path, line, shown, target if target.is_file() else None, ids,
                            "" if target.is_file() else f"rules.NAMED gives {named}, which is no file")
        elif m.group("word") and m.group("word").lower().removesuffix("'s") in _AMBIGUOUS_WORDS:
            yield Reference(path, line, shown, None, ids,
                            f"'{m.group('word')} rule' names no module: write `_x` rule N or the core's rule N")
        else:
            yield Reference(path, line, shown, path, ids)


def checked_files() -> Iterator[pathlib.Path]:
    for name in workspace.PACKAGES:
        if name in UNCHECKED:
            continue
        pkg = workspace.package_dir(name)
        for part in ("src/**/*.py", "tests*/**/*.py", "bench/*.py"):
            yield from sorted(p for p in pkg.glob(part) if ".nox" not in p.parts)
        yield pkg / "README.md"
    yield from sorted(p for p in (workspace.ROOT / "ci").glob("*.py") if p.name != "rules.py")  # its forms
    yield workspace.ROOT / "noxfile.py"
    yield from sorted((workspace.ROOT / "docs").glob("*.md"))


def check_file(path: pathlib.Path, text: str | None = None) -> list[str]:
    problems: list[str] = []
    cache: dict[pathlib.Path, set[str]] = {}
    rel = _rel(path)
    for ref in references(path, text):
        if ref.target is None:
            problems.append(f"{rel}:{ref.line}: '{ref.text}': {ref.why}")
            continue
        if ref.target not in cache:
            cache[ref.target] = labels(ref.target) if ref.target != path or text is None else set(
                _LABEL.findall((ast.get_docstring(ast.parse(text), clean=False) or "") if path.suffix == ".py"
                               else text))
        missing = [i for i in ref.ids if i not in cache[ref.target]]
        if missing:
            whose = "its own" if ref.target == path else str(_rel(ref.target))
            problems.append(f"{rel}:{ref.line}: '{ref.text}': {whose} rules are "
                            f"{', '.join(sorted(cache[ref.target], key=_order)) or 'none'}, not {', '.join(missing)}")
    return problems


def _order(label: str) -> tuple[int, str]:
    digits = re.match(r"\d+", label)
    return (int(digits.group(0)) if digits else 10_000, label)


def _rel(path: pathlib.Path) -> pathlib.Path | str:
    try:
        return path.relative_to(workspace.ROOT)
    except ValueError:
        return path


def check() -> list[str]:
    problems: list[str] = []
    for path in checked_files():
        if path.is_file():
            problems += check_file(path)
    return problems


def main() -> int:
    problems = check()
    for p in problems:
        print(p)
    if problems:
        print(f"rules: {len(problems)} reference(s) to a rule that does not exist")
        return 1
    print(f"rules: every 'rule N' reference resolves (not checked yet: {', '.join(sorted(UNCHECKED)) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
