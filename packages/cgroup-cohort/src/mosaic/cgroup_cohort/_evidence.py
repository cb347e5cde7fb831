"""Why a force stop ends uncertain, and the internal "an observation could not be made" exception.

Kept apart from ``_errors`` (which re-exports both) because it imports nothing beyond the standard library:
``cgroupfs`` raises ``EvidenceUnavailable``, and the shim imports ``cgroupfs`` before it starts the engine,
where importing ``mosaic.safe_open`` (the refusal base ``_errors`` needs) would add ~10 ms to every launch
(README "Threads": what a launch costs).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["UNCERTAIN_REASONS", "EvidenceUnavailable"]

# reason -> what it means. Every one of them is "evidence unavailable" or "evidence incomplete".
UNCERTAIN_REASONS: Mapping[str, str] = MappingProxyType(
    {
        "identity-unavailable": "the invocation ID or cgroup id could not be read (manager or shim unreachable)",
        "identity-mismatch": "the unit or cgroup under the recorded name is another cohort (K14); no signals",
        "shim-gone": "the shim does not answer; nothing can read engine/ for this scope (K15)",
        "cgroup-unavailable": "engine/ or its cgroup.events is missing or unreadable (K15), never empty",
        "kernel-feature-missing": "cgroup.freeze or cgroup.kill is missing on this kernel",
        "containment-not-held": "the launch canary escaped engine/ (K13 not refused): kill may be incomplete",
        "freeze-failed": "frozen 1 was not observed within the bound",
        "enumeration-incomplete": "the member list did not read the same twice while frozen",
        "kill-failed": "cgroup.kill could not be written",
        "populated-timeout": "populated 0 was not observed within the bound after cgroup.kill",
        "member-survived": "an enumerated member is alive outside engine/ after populated 0",
        "process-group-fallback": "a process group cannot be enumerated; a setsid member escapes it (K2)",
    }
)


class EvidenceUnavailable(Exception):
    """An observation could not be made. Never to be read as "empty" or "gone" (brief §6).

    Internal to this package and not a refusal: the stop executors turn it into an ``Unavailable`` event
    (the stop then ends ``uncertain`` with ``reason``), ``presence`` into ``"unavailable"``. ``reason`` is a
    key of ``UNCERTAIN_REASONS``; an unknown one is a programming error (ValueError).
    """

    def __init__(self, reason: str, detail: str) -> None:
        if reason not in UNCERTAIN_REASONS:
            raise ValueError(f"unknown uncertain reason {reason!r}")
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
