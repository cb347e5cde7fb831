"""The package's refusal class and its one code table, plus the reasons a stop ends uncertain.

``CohortRefusal`` subclasses ``mosaic.safe_open.Refusal``, the base of every Mosaic refusal (DESIGN.md
principle 2): one refusal family, so the controller reports a launcher's refusal the way it reports a claim's
or a reader's (code, reconcile, message, ``to_dict()``; refusals compare by value).

Two tables, kept apart on purpose (DESIGN.md principle 2, "unavailable is not empty"):

* ``CODES``: refusals. The operation was not done (no proof, no launch).
* ``UNCERTAIN_REASONS``: why a force stop that did run ended ``uncertain`` rather than ``stopped``.

The second table and ``EvidenceUnavailable`` live in ``_evidence`` (re-exported here), which imports no
safe-open: the cgroup2 readers raise it, and the shim imports them before it starts the engine (README
"Threads": what a launch costs).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from mosaic.safe_open import Refusal

from ._evidence import UNCERTAIN_REASONS, EvidenceUnavailable

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


class CohortRefusal(Refusal):
    """A refusal of this package: a code from ``CODES``, its reconcile flag and a human message.

    Raised by the launchers, the proof builders and the verifier; the operation was not done. ``reconcile``
    defaults to the table's flag. An unknown code is a programming error (ValueError), not a refusal.
    """

    CODES: ClassVar[Mapping[str, bool]] = CODES
