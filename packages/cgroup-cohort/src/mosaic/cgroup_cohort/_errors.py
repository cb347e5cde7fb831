"""The package's refusal class and its one code table, plus the reasons a stop ends uncertain.

``CohortRefusal`` subclasses ``mosaic.safe_open.Refusal``, the base of every Mosaic refusal (DESIGN.md
principle 2): one refusal family, so the controller reports a launcher's refusal the way it reports a claim's
or a reader's (code, reconcile, message, ``to_dict()``; refusals compare by value).

Two tables, kept apart on purpose (DESIGN.md principle 2, "unavailable is not empty"):

* ``CODES``: refusals. The operation was not done (no proof, no launch).
* ``UNCERTAIN_REASONS``: why a force stop that did run ended ``uncertain`` rather than ``stopped``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from mosaic.safe_open import Refusal

__all__ = ["CODES", "UNCERTAIN_REASONS", "CohortRefusal", "EvidenceUnavailable"]

# code -> reconcile. Seed codes (seeds/000 "Refusals", seeds/003 §2/§6) and the ones this package adds.
CODES: Mapping[str, bool] = MappingProxyType(
    {
        # seed: the claim was recorded on another host (/etc/machine-id differs). K16. No proof.
        "foreign-host": False,
        # seed: a required argument is missing or unsafe (socket directory not private, bad unit name,
        # no cgroup2 mount, an engine uid that owns an ancestor of engine/ when containment is required).
        "configuration": False,
        # added: a boot proof was asked for a claim whose recorded boot is the current boot.
        "boot-unchanged": False,
        # added: the unit name is still loaded or the cgroup name exists after the bounded retries.
        "unit-busy": True,
        # added: the shim or the engine did not come up; nothing is running under the claim.
        "launch-failed": False,
        # added: the fixture verifier refuses a proof (digest not registered, altered, or not a stop).
        "verification": False,
        # added: a shim operation was refused by the shim (release while the engine is populated, ...).
        "shim-refused": False,
    }
)

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


class CohortRefusal(Refusal):
    """A refusal of this package: a code from ``CODES``, its reconcile flag and a human message.

    Raised by the launchers, the proof builders and the verifier; the operation was not done. ``reconcile``
    defaults to the table's flag. An unknown code is a programming error (ValueError), not a refusal.
    """

    CODES: ClassVar[Mapping[str, bool]] = CODES


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
