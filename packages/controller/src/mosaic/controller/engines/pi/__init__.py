"""The Pi engine adapter: everything that knows Pi's wire and files. For now Pi's session drift check
(`check_drift`, `check_appended`, `engine_list`: the `get_entries` answer; `DRIFT_REASONS`,
`PERSISTENCE_DRIFT`)."""

from __future__ import annotations

from ._drift import DRIFT_REASONS, PERSISTENCE_DRIFT, check_appended, check_drift, engine_list

__all__ = ["DRIFT_REASONS", "PERSISTENCE_DRIFT", "check_appended", "check_drift", "engine_list"]


def __dir__() -> list[str]:
    return list(__all__)
