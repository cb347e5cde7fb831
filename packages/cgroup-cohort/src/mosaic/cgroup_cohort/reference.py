"""The cohort reference: what a writer claim stores after a launch, and what a stop is rebuilt from.

``CohortRef`` (``handle.ref``; ``to_dict()`` into the claim, the strict ``CohortRef.from_dict`` back from
disk, at most ``MAX_REF_BYTES``), ``UnlaunchedCohort`` (only the unit name and host, for a crash before
the reference was recorded), ``Containment`` (the launch canary's verdict), ``LauncherKind``, and the
unit-name rule every launcher applies (``check_unit``, at most ``UNIT_NAME_MAX``). README "The cohort
reference (CohortRef)", "The unit name comes from the claim".
"""

from ._model import (
    MAX_REF_BYTES,
    UNIT_NAME_MAX,
    CohortRef,
    Containment,
    LauncherKind,
    UnlaunchedCohort,
    check_unit,
)

__all__ = ["MAX_REF_BYTES", "UNIT_NAME_MAX", "CohortRef", "Containment", "LauncherKind", "UnlaunchedCohort",
           "check_unit"]


def __dir__() -> list[str]:
    return sorted(__all__)
