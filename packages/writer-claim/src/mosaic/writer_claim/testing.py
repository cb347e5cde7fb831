"""Test seams of the writer claim (never used in production).

`store_os` swaps the `os` module the claim store's own file-system calls go through (finding heads,
reading, publishing, reserving) for a stand-in, so a test can record or count exactly those calls: the
crash-prefix test records every mutating call to replay each prefix of it (README "Persistence model"),
and the head-lookup test counts the existence checks. The stand-in must forward every call to the real
`os`; the swap is undone when the block ends, whatever happens in it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from . import _disk, _store

__all__ = ["store_os"]

_MODULES: tuple[ModuleType, ...] = (_store, _disk)  # every module of the store that calls os


@contextmanager
def store_os(stand_in: Any) -> Iterator[Any]:
    """Within the block, the store's file-system calls go through `stand_in` instead of `os`. Not
    thread-safe, not reentrant (one swap at a time)."""
    saved = [(module, module.os) for module in _MODULES]
    for module, real in saved:
        if real is not os:
            raise RuntimeError(f"{module.__name__}.os is already swapped")
    try:
        for module, _ in saved:
            module.os = stand_in  # type: ignore[attr-defined]
        yield stand_in
    finally:
        for module, real in saved:
            module.os = real  # type: ignore[attr-defined]


def __dir__() -> list[str]:
    return list(__all__)
