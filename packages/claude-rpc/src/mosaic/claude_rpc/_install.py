"""Install the pinned Claude Code from the npm registry, and check an install against the pin.

The pin is package data in ``mosaic/claude_rpc/pin/`` (see its README.md): an npm manifest naming exactly
``@anthropic-ai/claude-code`` 2.1.283 and its native ``@anthropic-ai/claude-code-linux-x64`` 2.1.283, the
lockfile npm made from it (an ``integrity`` sha512 for every package), and ``sources.json``, the sha256 of
every file of the two packages (docs/claude-2.1.283.md "Sources by hash").

What runs is one file: ``node_modules/@anthropic-ai/claude-code-linux-x64/claude``, a self-contained native
executable (241,556,664 bytes). The wrapper package's ``postinstall`` (``install.cjs``) would hard-link it
over the 500-byte stub ``bin/claude.exe``; :func:`install_claude` runs ``npm ci --ignore-scripts``, so the
stub stays a stub and nothing but npm's own extraction runs at install time. No Node runs the engine.

:func:`verify_claude` compares an install with the pin and returns every difference as a
:class:`PinMismatch` value; ``check_pin`` turns a non-empty list into the ``engine-pin-mismatch`` refusal.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "BINARY_SHA256",
    "BINARY_SIZE",
    "CLAUDE_INTEGRITY",
    "CLAUDE_PACKAGE",
    "CLAUDE_VERSION",
    "NATIVE_INTEGRITY",
    "NATIVE_PACKAGE",
    "NPM_CI_ARGS",
    "VERSION_LINE",
    "ClaudeInstall",
    "ClaudeInstallError",
    "PinMismatch",
    "binary_version",
    "ensure_claude",
    "install_claude",
    "installed_files",
    "make_quiet_dirs",
    "pin_data",
    "quiet_env",
    "sha256_file",
    "sources_manifest",
    "verify_claude",
]

CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
NATIVE_PACKAGE = "@anthropic-ai/claude-code-linux-x64"
CLAUDE_VERSION = "2.1.283"
# `npm view @anthropic-ai/claude-code@2.1.283 dist.integrity`, and the committed lockfile.
CLAUDE_INTEGRITY = (
    "sha512-/8Y1pe7M15qMOU7RwUEjpFcM8XGVXNzWrWRXXp/0HlGm1k8FcOCxYMA9VR237JUUzzx5DkcQaGvELAo4si7TwA=="
)
# `npm view @anthropic-ai/claude-code-linux-x64@2.1.283 dist.integrity`, and the committed lockfile.
NATIVE_INTEGRITY = (
    "sha512-q9+Ke42t/I6oLb/bTmh6sI24jMw4KNwz3QbQLp9dVQ8ipQChfAW5L11SX8jcDzVCW/P2tId7ftI+lgBURvz9uQ=="
)
# sha256 of the binary that runs. The same value is the linux-x64 `checksum` of the release manifest that
# @anthropic-ai/claude-agent-sdk 0.3.283 ships (`manifest.json`: version 2.1.283), and FACTS.md §1's.
BINARY_SHA256 = "1859583ce32920595c61ef868bee52e1b1594f7486db209935e01f1e5e804ae2"
BINARY_SIZE = 241_556_664
# What `claude --version` prints (one line, then LF).
VERSION_LINE = "2.1.283 (Claude Code)"

# `npm ci` flags: --ignore-scripts keeps install.cjs (the postinstall that links the binary over the stub)
# from running; the engine is started by its path in the native package instead.
NPM_CI_ARGS = ("ci", "--no-audit", "--no-fund", "--ignore-scripts")

_PIN_FILES = ("package.json", "package-lock.json")
_BINARY_REL = f"node_modules/{NATIVE_PACKAGE}/claude"
_ALLOWED_IN_DEST = frozenset({"package.json", "package-lock.json", "node_modules"})
# The environment of `claude --version`: nothing of the caller's, a scratch HOME and config dir (removed
# afterwards), every switch that keeps it quiet (docs/claude-2.1.283.md "Switches").
_VERSION_TIMEOUT = 60.0

MismatchKind = Literal[
    "pin-data",  # the package data itself disagrees with the constants above
    "manifest-differs",  # dest/package.json is not the committed one
    "lockfile-differs",  # dest/package-lock.json is not the committed one
    "not-installed",  # dest/node_modules/.package-lock.json is missing or unreadable, or a package is absent
    "installed-version",  # a package npm installed has another version than the lockfile pins
    "installed-integrity",  # a package npm installed has another integrity than the lockfile pins
    "package-file-changed",  # a file of the two packages has another sha256 than sources.json records
    "package-file-missing",  # a file sources.json records is absent
    "package-file-extra",  # a file in one of the two packages is not in sources.json
    "binary-missing",  # the binary is absent or not a regular file
    "binary-sha256",  # the binary's sha256 differs from BINARY_SHA256
    "binary-version",  # the binary does not run or prints another version line
]


@dataclass(frozen=True)
class PinMismatch:
    """One way an install differs from the pin: what was checked (``path``, relative to the install root)
    and the expected and actual values (``None`` when there is nothing to show)."""

    kind: MismatchKind
    path: str
    expected: str | None = None
    actual: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}: {self.path} (expected {self.expected!r}, found {self.actual!r})"


class ClaudeInstallError(Exception):
    """Installing failed: npm failed, the destination is not ours, or the result does not match the pin.

    ``mismatches`` holds the differences when verification failed (empty otherwise).
    """

    def __init__(self, message: str, mismatches: tuple[PinMismatch, ...] = ()) -> None:
        super().__init__(message)
        self.mismatches = mismatches


@dataclass(frozen=True)
class ClaudeInstall:
    """An install of the pinned Claude Code under ``root``: the paths a launcher needs."""

    root: Path

    @property
    def package_dir(self) -> Path:
        """``node_modules/@anthropic-ai/claude-code``: the wrapper (README, ``sdk-tools.d.ts``, the stub)."""
        return self.root / "node_modules" / CLAUDE_PACKAGE

    @property
    def native_dir(self) -> Path:
        """``node_modules/@anthropic-ai/claude-code-linux-x64``."""
        return self.root / "node_modules" / NATIVE_PACKAGE

    @property
    def binary(self) -> Path:
        """The native executable that runs (``claude-code-linux-x64/claude``)."""
        return self.native_dir / "claude"


def pin_data() -> dict[str, bytes]:
    """The committed pin files (package data) by name: ``package.json``, ``package-lock.json``,
    ``sources.json``."""
    pin = resources.files("mosaic.claude_rpc").joinpath("pin")
    return {name: pin.joinpath(name).read_bytes() for name in (*_PIN_FILES, "sources.json")}


def sources_manifest() -> dict[str, Any]:
    """``pin/sources.json`` parsed (docs/claude-2.1.283.md "Sources by hash")."""
    doc = json.loads(pin_data()["sources.json"])
    if not isinstance(doc, dict):
        raise ValueError("sources.json is not an object")
    return doc


def installed_files() -> dict[str, str]:
    """The sha256 of every file of the two installed npm packages, keyed by the path under the install root
    (``node_modules/@anthropic-ai/...``), from ``sources.json``'s ``npm-installed`` entries."""
    out: dict[str, str] = {}
    for source in sources_manifest()["sources"]:
        if source.get("kind") == "npm-installed":
            base = f"node_modules/{source['package']}"
            for rel, digest in source["files"].items():
                out[f"{base}/{rel}"] = digest
    return out


def _lock_packages(data: bytes) -> Mapping[str, Mapping[str, Any]]:
    doc = json.loads(data)
    packages = doc.get("packages") if isinstance(doc, dict) else None
    if not isinstance(packages, dict):
        raise ValueError("lockfile has no packages map")
    return packages


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_pin_data(pin: Mapping[str, bytes]) -> list[PinMismatch]:
    out: list[PinMismatch] = []
    deps = json.loads(pin["package.json"]).get("dependencies", {})
    for name in (CLAUDE_PACKAGE, NATIVE_PACKAGE):
        if deps.get(name) != CLAUDE_VERSION:
            out.append(PinMismatch("pin-data", f"pin/package.json:{name}", CLAUDE_VERSION, deps.get(name)))
    packages = _lock_packages(pin["package-lock.json"])
    for name, integrity in ((CLAUDE_PACKAGE, CLAUDE_INTEGRITY), (NATIVE_PACKAGE, NATIVE_INTEGRITY)):
        entry = packages.get(f"node_modules/{name}", {})
        if entry.get("integrity") != integrity or entry.get("version") != CLAUDE_VERSION:
            out.append(PinMismatch("pin-data", f"pin/package-lock.json:{name}", integrity, entry.get("integrity")))
    recorded = installed_files().get(_BINARY_REL)
    if recorded != BINARY_SHA256:
        out.append(PinMismatch("pin-data", "pin/sources.json:claude", BINARY_SHA256, recorded))
    return out


def quiet_env(scratch: str | os.PathLike[str]) -> dict[str, str]:
    """The whole environment for a run of the pinned binary that reads nothing of the caller's: a minimal
    PATH, ``HOME``, ``CLAUDE_CONFIG_DIR`` and ``CLAUDE_CODE_TMPDIR`` under ``scratch`` and the two switches
    that keep it from updating itself or making any non-essential connection (docs/claude-2.1.283.md
    "Switches"). The caller adds ``ANTHROPIC_BASE_URL`` and a fake key for a model turn."""
    base = Path(scratch)
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(base / "home"),
        "CLAUDE_CONFIG_DIR": str(base / "claude"),
        "CLAUDE_CODE_TMPDIR": str(base / "tmp"),
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def make_quiet_dirs(scratch: str | os.PathLike[str]) -> dict[str, str]:
    """Create the three directories of :func:`quiet_env` (mode 0700) and return that environment."""
    env = quiet_env(scratch)
    for key in ("HOME", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR"):
        os.makedirs(env[key], mode=0o700, exist_ok=True)
    return env


def binary_version(binary: str | os.PathLike[str], *, timeout: float = _VERSION_TIMEOUT) -> str | None:
    """The first line ``binary --version`` prints, run with :func:`quiet_env` in a scratch directory that is
    removed afterwards; ``None`` when it does not start, fails or times out. A relative path names the file
    from the caller's directory, not the scratch one it runs in."""
    binary = os.path.abspath(binary)
    with tempfile.TemporaryDirectory(prefix="mosaic-claude-version-") as scratch:
        env = make_quiet_dirs(scratch)
        try:
            proc = subprocess.run([binary, "--version"], capture_output=True, timeout=timeout,
                                  check=False, env=env, cwd=scratch, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
    if proc.returncode != 0:
        return None
    lines = proc.stdout.decode(errors="replace").splitlines()
    return lines[0].strip() if lines else ""


def check_binary_file(binary: str | os.PathLike[str], *, sha256: str = BINARY_SHA256,
                      version_line: str = VERSION_LINE, shown: str | None = None) -> list[PinMismatch]:
    """The brief's L7 check of one executable: a regular file (not a symlink) whose sha256 is ``sha256``
    and, only then, whose ``--version`` prints ``version_line``. A file whose bytes differ is never run."""
    path = Path(binary)
    label = shown or str(path)
    try:
        mode = path.lstat().st_mode
    except OSError:
        return [PinMismatch("binary-missing", label, sha256, None)]
    if not stat.S_ISREG(mode):
        return [PinMismatch("binary-missing", label, sha256, "not a regular file")]
    actual = sha256_file(path)
    if actual != sha256:
        return [PinMismatch("binary-sha256", label, sha256, actual)]
    printed = binary_version(path)
    if printed != version_line:
        return [PinMismatch("binary-version", label, version_line, printed)]
    return []


def verify_claude(root: str | os.PathLike[str]) -> list[PinMismatch]:
    """Compare the install under ``root`` with the pin; return every difference (``[]`` = matches).

    Checks, in order (so a refusal's first lines name the binary): the package data itself; the binary is
    a regular file with the pinned sha256 and, only then, prints the pinned version; ``package.json`` and
    ``package-lock.json`` in ``root`` are the committed bytes; every package npm recorded in
    ``node_modules/.package-lock.json`` has the version and integrity the committed lockfile pins, and both
    pinned packages are among them; every other file of the two packages has the sha256 ``sources.json``
    records, none missing, none extra (a symlink counts as changed). Never raises for a bad install; an I/O
    error on ``root`` itself propagates.
    """
    base = Path(root)
    pin = pin_data()
    out = _check_pin_data(pin)
    out += check_binary_file(ClaudeInstall(base).binary, shown=_BINARY_REL)
    copies: tuple[tuple[str, MismatchKind], ...] = (
        ("package.json", "manifest-differs"), ("package-lock.json", "lockfile-differs"))
    for name, kind in copies:
        try:
            actual = (base / name).read_bytes()
        except FileNotFoundError:
            out.append(PinMismatch(kind, name, hashlib.sha256(pin[name]).hexdigest(), None))
            continue
        if actual != pin[name]:
            out.append(PinMismatch(kind, name, hashlib.sha256(pin[name]).hexdigest(),
                                   hashlib.sha256(actual).hexdigest()))
    out += _verify_lock(base, _lock_packages(pin["package-lock.json"]))
    out += _verify_files(base)
    return out


def _verify_lock(base: Path, pinned: Mapping[str, Mapping[str, Any]]) -> list[PinMismatch]:
    out: list[PinMismatch] = []
    hidden = base / "node_modules" / ".package-lock.json"
    try:
        installed = _lock_packages(hidden.read_bytes())
    except (OSError, ValueError) as exc:
        return [PinMismatch("not-installed", "node_modules/.package-lock.json", "npm's record", repr(exc))]
    for name in (CLAUDE_PACKAGE, NATIVE_PACKAGE):
        if f"node_modules/{name}" not in installed:
            out.append(PinMismatch("not-installed", f"node_modules/{name}", CLAUDE_VERSION, None))
    for key, entry in sorted(installed.items()):
        want = pinned.get(key)
        if want is None:
            out.append(PinMismatch("installed-version", key, None, entry.get("version")))
            continue
        if entry.get("version") != want.get("version"):
            out.append(PinMismatch("installed-version", key, want.get("version"), entry.get("version")))
        if entry.get("integrity") != want.get("integrity"):
            out.append(PinMismatch("installed-integrity", key, want.get("integrity"), entry.get("integrity")))
    return out


def _verify_files(base: Path) -> list[PinMismatch]:
    """The package files other than the binary (:func:`check_binary_file` hashes that one once)."""
    out: list[PinMismatch] = []
    expected = installed_files()
    expected.pop(_BINARY_REL, None)
    found: dict[str, Path] = {}
    for name in (CLAUDE_PACKAGE, NATIVE_PACKAGE):
        top = base / "node_modules" / name
        if not top.is_dir() or top.is_symlink():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            here = Path(dirpath)
            for entry in filenames + [d for d in dirnames if (here / d).is_symlink()]:
                found[(here / entry).relative_to(base).as_posix()] = here / entry
    found.pop(_BINARY_REL, None)
    for rel, digest in sorted(expected.items()):
        path = found.pop(rel, None)
        if path is None:
            out.append(PinMismatch("package-file-missing", rel, digest, None))
            continue
        if not stat.S_ISREG(path.lstat().st_mode):
            out.append(PinMismatch("package-file-changed", rel, digest, "not a regular file"))
            continue
        actual = sha256_file(path)
        if actual != digest:
            out.append(PinMismatch("package-file-changed", rel, digest, actual))
    for rel in sorted(found):
        out.append(PinMismatch("package-file-extra", rel, None, "present"))
    return out


def install_claude(dest: str | os.PathLike[str], *, npm: str | None = None,
                   timeout: float = 900.0) -> ClaudeInstall:
    """Install the pinned Claude Code into ``dest`` with ``npm ci --ignore-scripts`` and verify it.

    ``dest`` is created if needed and must hold nothing but a previous install (``package.json``,
    ``package-lock.json``, ``node_modules``); ``npm ci`` replaces ``node_modules`` wholesale. Needs ``npm``
    on PATH (or the ``npm`` argument) and the npm registry (about 231 MB). Raises
    :class:`ClaudeInstallError` when ``dest`` holds anything else, npm is missing, fails or times out, or
    the result does not verify (the mismatches are attached).
    """
    base = Path(dest).resolve()
    base.mkdir(parents=True, exist_ok=True)
    foreign = sorted(set(os.listdir(base)) - _ALLOWED_IN_DEST)
    if foreign:
        raise ClaudeInstallError(f"{base} holds files that are not a Claude Code install: {foreign}")
    npm_path = npm or shutil.which("npm")
    if npm_path is None:
        raise ClaudeInstallError("npm is not on PATH")
    pin = pin_data()
    for name in _PIN_FILES:
        (base / name).write_bytes(pin[name])
    try:
        proc = subprocess.run([npm_path, *NPM_CI_ARGS], cwd=base, capture_output=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise ClaudeInstallError(f"npm ci did not finish within {timeout} s in {base}") from exc
    except OSError as exc:
        raise ClaudeInstallError(f"npm could not be started: {exc}") from exc
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace")[-4000:]
        raise ClaudeInstallError(f"npm ci failed with exit {proc.returncode} in {base}:\n{tail}")
    mismatches = verify_claude(base)
    if mismatches:
        raise ClaudeInstallError(f"the install in {base} does not match the pin: "
                                 + "; ".join(str(m) for m in mismatches[:10]), tuple(mismatches))
    return ClaudeInstall(base)


def ensure_claude(dest: str | os.PathLike[str], *, npm: str | None = None,
                  timeout: float = 900.0) -> ClaudeInstall:
    """Return the install in ``dest`` when it already verifies, else :func:`install_claude` into it.

    Fails as :func:`install_claude` does.
    """
    base = Path(dest).resolve()
    if base.is_dir() and not verify_claude(base):
        return ClaudeInstall(base)
    return install_claude(base, npm=npm, timeout=timeout)
