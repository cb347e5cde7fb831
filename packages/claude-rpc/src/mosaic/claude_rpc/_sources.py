"""The protocol sources of Claude Code 2.1.283 by hash (brief §8 B1 part 2; docs/claude-2.1.283.md).

``pin/sources.json`` lists each source with its kind:

* ``npm-installed``: the files of the two pinned npm packages, checked in every install by
  :func:`mosaic.claude_rpc.install.verify_claude`;
* ``npm-tarball``: ``@anthropic-ai/claude-agent-sdk`` 0.3.283, the TypeScript SDK whose ``package.json``
  names ``claudeCodeVersion: 2.1.283``, fetched with ``npm pack`` and checked against its sha512 integrity;
* ``pypi-sdist``: ``claude-agent-sdk`` 0.2.160, the Python SDK release whose ``_cli_version.py`` names
  exactly 2.1.283, fetched with ``pip download`` (source distribution, no dependencies) and checked
  against its sha256.

For the two archives, every cited file is hashed straight from the archive's members (nothing is
extracted). :func:`fetch_sources` fetches what is missing into a directory the caller chooses and
:func:`verify_fetched_sources` returns every difference; both need no Claude install.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mosaic.claude_rpc._install import sources_manifest

__all__ = ["SourceMismatch", "SourcesError", "archive_sources", "fetch_sources", "verify_fetched_sources"]

SourceMismatchKind = Literal[
    "archive-missing",  # the archive was not fetched
    "archive-digest",  # the archive's sha512 integrity (npm) or sha256 (PyPI) differs from the manifest
    "member-missing",  # a cited file is not in the archive
    "member-digest",  # a cited file's sha256 differs
]


@dataclass(frozen=True)
class SourceMismatch:
    """One way a fetched source differs from ``sources.json``."""

    kind: SourceMismatchKind
    source: str
    path: str
    expected: str | None = None
    actual: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}: {self.source} {self.path} (expected {self.expected!r}, found {self.actual!r})"


class SourcesError(Exception):
    """A fetch failed (npm or pip missing, failing or timing out) or the result does not verify."""

    def __init__(self, message: str, mismatches: tuple[SourceMismatch, ...] = ()) -> None:
        super().__init__(message)
        self.mismatches = mismatches


def archive_sources() -> list[Mapping[str, Any]]:
    """The ``npm-tarball`` and ``pypi-sdist`` entries of ``sources.json``."""
    return [s for s in sources_manifest()["sources"] if s.get("kind") in ("npm-tarball", "pypi-sdist")]


def _archive_digest(source: Mapping[str, Any], path: Path) -> tuple[str, str]:
    """(expected, actual) digest of an archive in the manifest's own form."""
    data = path.read_bytes()
    if source["kind"] == "npm-tarball":
        return source["integrity"], "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    return source["sha256"], hashlib.sha256(data).hexdigest()


def _members(path: Path, root: str, names: Iterator[str]) -> Iterator[tuple[str, str | None]]:
    with tarfile.open(path, "r:gz") as archive:
        for name in names:
            try:
                member = archive.getmember(root + name)
            except KeyError:
                yield name, None
                continue
            handle = archive.extractfile(member) if member.isfile() else None
            yield name, None if handle is None else hashlib.sha256(handle.read()).hexdigest()


def verify_fetched_sources(directory: str | os.PathLike[str],
                           sources: Sequence[Mapping[str, Any]] | None = None) -> list[SourceMismatch]:
    """Check each archive source in ``directory`` (by its ``archive`` file name) against its entry (those of
    ``sources.json`` unless ``sources`` is given): the archive's own digest, then the sha256 of every cited
    file read from the archive. ``[]`` = all match."""
    out: list[SourceMismatch] = []
    base = Path(directory)
    for source in archive_sources() if sources is None else sources:
        path = base / source["archive"]
        if not path.is_file():
            out.append(SourceMismatch("archive-missing", source["id"], source["archive"]))
            continue
        expected, actual = _archive_digest(source, path)
        if expected != actual:
            out.append(SourceMismatch("archive-digest", source["id"], source["archive"], expected, actual))
            continue
        files: Mapping[str, str] = source["files"]
        for name, digest in _members(path, source["root"], iter(sorted(files))):
            if digest is None:
                out.append(SourceMismatch("member-missing", source["id"], name, files[name], None))
            elif digest != files[name]:
                out.append(SourceMismatch("member-digest", source["id"], name, files[name], digest))
    return out


def _run(argv: list[str], cwd: Path, timeout: float) -> None:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise SourcesError(f"{argv[0]} did not finish within {timeout} s") from exc
    except OSError as exc:
        raise SourcesError(f"{argv[0]} could not be started: {exc}") from exc
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()
        raise SourcesError(f"{' '.join(argv[:4])} failed with exit {proc.returncode}: "
                           f"{tail[-1] if tail else '(no output)'}")


def _pip() -> list[str]:
    """This interpreter's pip when it has one, else ``pip3`` on PATH."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    found = shutil.which("pip3") or shutil.which("pip")
    if found is None:
        raise SourcesError("pip is not available (neither this interpreter's nor pip3 on PATH)")
    return [found]


def fetch_sources(directory: str | os.PathLike[str], *, npm: str = "npm", pip: Sequence[str] | None = None,
                  timeout: float = 300.0) -> Path:
    """Fetch each archive source that is missing from ``directory`` (created if needed) and verify all.

    The npm tarball comes from ``npm pack <package>@<version>``, the PyPI source distribution from
    ``pip download --no-deps --no-binary :all: <package>==<version>`` (the registries' ordinary clients;
    ``pip`` is this interpreter's pip, else ``pip3`` on PATH, unless given). An archive already present is not fetched again. Raises :class:`SourcesError` when a
    client fails or the result differs from ``sources.json``.
    """
    base = Path(directory).resolve()
    base.mkdir(parents=True, exist_ok=True)
    for source in archive_sources():
        if (base / source["archive"]).is_file():
            continue
        spec = f"{source['package']}@{source['version']}"
        if source["kind"] == "npm-tarball":
            _run([npm, "pack", spec, "--pack-destination", str(base), "--silent"], base, timeout)
        else:
            _run([*(pip or _pip()), "download", "--no-deps", "--no-binary", ":all:",
                  "--disable-pip-version-check", "-q", "-d", str(base),
                  f"{source['package']}=={source['version']}"], base, timeout)
    found = verify_fetched_sources(base)
    if found:
        raise SourcesError(f"the sources in {base} differ from sources.json: "
                           + "; ".join(str(m) for m in found[:5]), tuple(found))
    return base
