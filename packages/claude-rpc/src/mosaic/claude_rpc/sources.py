"""The protocol sources by hash (README "Sources by hash"; docs/claude-2.1.283.md): `fetch_sources(dir)`
fetches the two Agent SDK releases built for CLI 2.1.283 with npm and pip and checks them,
`verify_fetched_sources(dir)` lists every `SourceMismatch`, `archive_sources()` the manifest's archive
entries; `sources_manifest()` is `pin/sources.json`.
"""

from __future__ import annotations

from . import _sources
from ._install import sources_manifest
from ._sources import *  # noqa: F403

__all__: list[str] = []
__all__ += _sources.__all__
__all__ += ["sources_manifest"]


def __dir__() -> list[str]:
    return sorted(__all__)
