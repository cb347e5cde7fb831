"""The checks of `nox -s build` (ci/build.py) as pure functions over names, file lists and metadata text.

Each returns a list of problems (empty when the artifact keeps its promise), so ci/tests/test_build.py can
show every one of them rejecting a made-up bad artifact without building anything.
"""

from __future__ import annotations

import base64
import email.parser
import hashlib
import re
import tarfile
import zipfile
from collections.abc import Iterable, Mapping
from email.message import Message
from pathlib import Path
from typing import IO

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

MOSAIC_PREFIX = "mosaic-"


def is_mosaic(name: str) -> bool:
    """Whether a distribution name (any spelling: mosaic_x, Mosaic.X) is one of ours."""
    return canonicalize_name(name).startswith(MOSAIC_PREFIX)


def short_name(name: str) -> str:
    """mosaic-chat-pages, mosaic_chat_pages -> chat-pages (the package's directory name)."""
    return canonicalize_name(name)[len(MOSAIC_PREFIX):]


def parse_metadata(text: str) -> Message:
    return email.parser.Parser().parsestr(text)


def runtime_requirements(meta: Message) -> list[Requirement]:
    """Requires-Dist without the extras-only ones (`; extra == "test"`): what a plain install pulls in."""
    out: list[Requirement] = []
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        out.append(req)
    return out


def mosaic_requirements(meta: Message) -> set[str]:
    """The Mosaic packages a wheel requires at runtime, by short name."""
    return {short_name(r.name) for r in runtime_requirements(meta) if is_mosaic(r.name)}


def thirdparty_requirements(meta: Message) -> list[str]:
    """The runtime requirements that are not Mosaic packages, as requirement strings (for PyPI)."""
    return [str(r) for r in runtime_requirements(meta) if not is_mosaic(r.name)]


def console_scripts(entry_points_text: str) -> dict[str, str]:
    """The [console_scripts] section of an entry_points.txt, as {name: "module:function"}."""
    out: dict[str, str] = {}
    section = ""
    for raw in entry_points_text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]").strip()
        elif section == "console_scripts" and "=" in line:
            name, _, target = line.partition("=")
            out[name.strip()] = target.strip()
    return out


def closure_problems(package: str, installed: Iterable[str], expected: Iterable[str]) -> list[str]:
    """After installing mosaic-<package> alone, the venv must hold exactly its declared Mosaic closure.

    `installed` is every distribution name in the venv (third-party ones are ignored); `expected` the short
    names of the closure, `package` included.
    """
    have = {short_name(n) for n in installed if is_mosaic(n)}
    want = set(expected)
    problems = [f"{package}: installed mosaic-{n}, which it does not declare (directly or through a "
                f"declared package)" for n in sorted(have - want)]
    problems += [f"{package}: mosaic-{n} of its declared closure is not installed"
                 for n in sorted(want - have)]
    return problems


def wheel_file_problems(package: str, wheel_names: Iterable[str], source_files: Iterable[str]) -> list[str]:
    """The wheel built from the sdist holds every source file under src/ (code, py.typed, schemas, data) and
    nothing else besides its .dist-info: the sdist was complete. Paths are relative to src/."""
    have = {n for n in wheel_names if not n.split("/", 1)[0].endswith(".dist-info") and not n.endswith("/")}
    want = set(source_files)
    problems = [f"{package}: {n} is in src/ but not in the wheel built from the sdist"
                for n in sorted(want - have)]
    problems += [f"{package}: the wheel holds {n}, which is no source file under src/"
                 for n in sorted(have - want)]
    return problems


def import_problems(package: str, closure: Iterable[str], imports: Mapping[str, str | None],
                    site: Path) -> list[str]:
    """In the venv of mosaic-<package> alone, each module of its closure imports from the venv's
    site-packages (not from a checkout), and every other Mosaic module cannot be found at all.

    `imports` maps every Mosaic package to the file its module imported from, or None if not found."""
    need = set(closure)
    problems: list[str] = []
    for other, where in sorted(imports.items()):
        module = "mosaic." + other.replace("-", "_")
        if other in need and (where is None or not Path(where).is_relative_to(site)):
            problems.append(f"{package}: {module} imports from {where}, not from the venv's {site}")
        if other not in need and where is not None:
            problems.append(f"{package}: {module} is importable ({where}) though {package} does not need it")
    return problems


def record_hashes(record_text: str) -> dict[str, str]:
    """A RECORD as {path: "sha256=<urlsafe b64>"}, without the .dist-info entries (an installer rewrites
    those) and without entries that carry no hash."""
    out: dict[str, str] = {}
    for line in record_text.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) != 3 or not parts[1]:
            continue
        path = parts[0].strip('"')
        if path.split("/", 1)[0].endswith(".dist-info"):
            continue
        out[path] = parts[1]
    return out


def file_hash(data: bytes) -> str:
    """The RECORD form of a file's sha256."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def installed_bytes_problems(package: str, wheel_record: Mapping[str, str],
                             installed: Mapping[str, str]) -> list[str]:
    """Every file of mosaic-<package> in the venv has the bytes of the wheelhouse wheel, and no file is
    missing or added: the installed distribution is that wheel and came from nowhere else.

    `installed` maps each installed file of the distribution (relative to site-packages, .dist-info and
    __pycache__ excluded) to the hash of its bytes on disk."""
    problems: list[str] = []
    for path in sorted(set(wheel_record) | set(installed)):
        if path not in installed:
            problems.append(f"{package}: {path} of the wheelhouse wheel is not installed")
        elif path not in wheel_record:
            problems.append(f"{package}: {path} is installed but is not in the wheelhouse wheel")
        elif wheel_record[path] != installed[path]:
            problems.append(f"{package}: installed {path} differs from the wheelhouse wheel's bytes")
    return problems


def metadata_problems(package: str, meta: Message, version: str, declared_mosaic: set[str],
                      wheel_scripts: Mapping[str, str], declared_scripts: Mapping[str, str]) -> list[str]:
    """The wheel's metadata says what the package's pyproject.toml says, with a Markdown description."""
    problems: list[str] = []
    if canonicalize_name(meta.get("Name", "")) != MOSAIC_PREFIX + package:
        problems.append(f"{package}: the wheel is named {meta.get('Name')!r}")
    if meta.get("Version") != version:
        problems.append(f"{package}: the wheel has version {meta.get('Version')!r}, "
                        f"pyproject says {version!r}")
    if meta.get("Description-Content-Type", "").split(";")[0].strip() != "text/markdown":
        problems.append(f"{package}: Description-Content-Type is {meta.get('Description-Content-Type')!r}, "
                        "not text/markdown (the README)")
    if not (meta.get_payload() or meta.get("Description")):
        problems.append(f"{package}: the wheel carries no long description (its README)")
    if not meta.get("Requires-Python"):
        problems.append(f"{package}: the wheel does not say which Python it needs")
    if mosaic_requirements(meta) != declared_mosaic:
        problems.append(f"{package}: the wheel requires mosaic {sorted(mosaic_requirements(meta))}, "
                        f"pyproject declares {sorted(declared_mosaic)}")
    if dict(wheel_scripts) != dict(declared_scripts):
        problems.append(f"{package}: the wheel's console scripts {dict(wheel_scripts)} are not pyproject's "
                        f"[project.scripts] {dict(declared_scripts)}")
    return problems


def sdist_problems(package: str, sdist_names: Iterable[str]) -> list[str]:
    """The sdist carries what a build from it needs besides src/: the pyproject, the README, PKG-INFO."""
    tops = {n.split("/", 1)[1] for n in sdist_names if "/" in n}
    return [f"{package}: the sdist has no {need}" for need in ("pyproject.toml", "README.md", "PKG-INFO")
            if need not in tops]


def thirdparty_problems(filenames: Iterable[str]) -> list[str]:
    """The third-party wheels fetched from PyPI must hold no Mosaic distribution (a stranger's package
    named mosaic-* pulled in by a dependency); only the wheelhouse may provide one."""
    out: list[str] = []
    for f in sorted(filenames):
        dist = re.split(r"-\d", f, maxsplit=1)[0]
        if is_mosaic(dist):
            out.append(f"{f} came from PyPI, but a mosaic-* distribution may only come from the wheelhouse")
    return out


# README "Install one package": the sentence that names the wheels dist/thirdparty holds.
README_THIRDPARTY = re.compile(r"`dist/thirdparty/`: the wheels of the third-party runtime requirements and of what "
                               r"they require \(today\s+(\w+):\s+([^)]*)\)")
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}


def readme_thirdparty_names(readme: str) -> tuple[int | None, list[str]] | None:
    """The README's dist/thirdparty sentence: the count it says in words and the names it lists in
    backticks; None when the sentence is not there."""
    found = README_THIRDPARTY.search(readme)
    if found is None:
        return None
    return NUMBERS.get(found.group(1)), re.findall(r"`([^`]+)`", found.group(2))


def readme_thirdparty_problems(readme: str, filenames: Iterable[str]) -> list[str]:
    """The README's dist/thirdparty sentence names exactly the distributions of the wheels fetched, and
    says how many."""
    said = readme_thirdparty_names(readme)
    if said is None:
        return ["README.md: the sentence naming the dist/thirdparty wheels is missing"]
    count, names = said
    fetched = sorted({canonicalize_name(re.split(r"-\d", f, maxsplit=1)[0]) for f in filenames if f.endswith(".whl")})
    listed = sorted(canonicalize_name(n) for n in names)
    out = []
    if listed != fetched:
        out.append(f"README.md names the dist/thirdparty wheels {listed}, but the build fetched {fetched}")
    if count != len(names):
        out.append(f"README.md says {count} dist/thirdparty wheels and names {len(names)}")
    return out


def read_wheel(path: str | IO[bytes]) -> tuple[list[str], Message, str, dict[str, str]]:
    """A wheel's file names, METADATA, entry_points.txt text ('' when absent) and RECORD hashes."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        info = next(n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info"))
        meta = parse_metadata(zf.read(f"{info}/METADATA").decode())
        ep_name = f"{info}/entry_points.txt"
        entry_points = zf.read(ep_name).decode() if ep_name in names else ""
        record = record_hashes(zf.read(f"{info}/RECORD").decode())
    return names, meta, entry_points, record


def sdist_names(path: str) -> list[str]:
    with tarfile.open(path) as tf:
        return tf.getnames()
