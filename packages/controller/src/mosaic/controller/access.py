"""Who may connect to a controller and what they may do (seed README "Mediated control", "Refusals"): the
operations (`OPERATIONS`) each method needs (`METHOD_OPERATIONS`, `required_operations`), a grants file
(`Grants`, each `Grant` a hello can name by its id, `GRANT_ID`), the policy that decides for a connected peer
and for its hello (`AccessPolicy`, `Peer`, `Admission`) and the actor a record names (`actor_record`)."""

from __future__ import annotations

from .core._access import (
    ACTOR_NAME,
    GRANT_ID,
    MAX_GRANTS_FILE_BYTES,
    MAX_PEER_GROUPS,
    METHOD_OPERATIONS,
    OPERATIONS,
    SERVED,
    AccessPolicy,
    Admission,
    Grant,
    Grants,
    Operation,
    Peer,
    actor_record,
    required_operations,
)

__all__ = [
    "ACTOR_NAME",
    "GRANT_ID",
    "MAX_GRANTS_FILE_BYTES",
    "MAX_PEER_GROUPS",
    "METHOD_OPERATIONS",
    "OPERATIONS",
    "SERVED",
    "AccessPolicy",
    "Admission",
    "Grant",
    "Grants",
    "Operation",
    "Peer",
    "actor_record",
    "required_operations",
]


def __dir__() -> list[str]:
    return list(__all__)
