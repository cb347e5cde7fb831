"""What writer-claim's own tests walk, and its reviewers read: no compatibility promise (any release may
change or drop a name here; a caller uses `mosaic.writer_claim` and its promised modules).

- The decision core, sans I/O: how a pair of keys is observed and classified after a crash (`classify`,
  `GroupDecision`, `Publication`), what an acquisition refuses (`refusal_for`), which owner transitions are
  allowed (`check_owner_transition`), what it reads (`PairObservation`, `KeyObservation`, `Unreadable`) and
  the questions it asks an `Oracle`.
- A revision's bytes: the strict canonical JSON codec (`encode_revision`, `decode_revision`,
  `revision_to_json`), the record formats (`FORMAT`, `FORMAT_ELIGIBILITY`, `FORMAT_ENGINE_UID`) and their
  bound (`MAX_REVISION_BYTES`); a record that does not decode raises `RecordError`.
- The names on disk: `revision_name(number)`, `unit_name_for(claim_id)`; the stop's reserve files:
  `RESERVE_STEPS`, `reserve_name`.
- `store_os`, a test seam (never used in production).

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
from ._codec import (
    FORMAT,
    FORMAT_ELIGIBILITY,
    FORMAT_ENGINE_UID,
    MAX_REVISION_BYTES,
    RecordError,
    decode_revision,
    encode_revision,
    revision_to_json,
)
from ._core import (
    GroupDecision,
    KeyObservation,
    Oracle,
    PairObservation,
    Publication,
    Unreadable,
    check_owner_transition,
    classify,
    refusal_for,
)
from ._disk import RESERVE_STEPS, reserve_name
from ._model import revision_name, unit_name_for

__all__ = [
    "FORMAT",
    "FORMAT_ELIGIBILITY",
    "FORMAT_ENGINE_UID",
    "MAX_REVISION_BYTES",
    "RESERVE_STEPS",
    "GroupDecision",
    "KeyObservation",
    "Oracle",
    "PairObservation",
    "Publication",
    "RecordError",
    "Unreadable",
    "check_owner_transition",
    "classify",
    "decode_revision",
    "encode_revision",
    "refusal_for",
    "revision_name",
    "revision_to_json",
    "reserve_name",
    "store_os",
    "unit_name_for",
]

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
