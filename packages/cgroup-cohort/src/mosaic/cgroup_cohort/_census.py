"""How many processes a cohort holds now, without stopping anything: what a force-stop confirmation shows
("what will be killed"). A count, never a proof: the cohort may grow or shrink before the stop,
and only the stop's frozen enumeration is evidence (README "The proof")."""

from __future__ import annotations

from dataclasses import dataclass

from ._channel import ShimChannel
from ._errors import CohortRefusal
from ._evidence import EvidenceUnavailable
from ._model import CohortRef

__all__ = ["Census", "census"]


@dataclass(frozen=True)
class Census:
    """`members`: the processes in the engine cgroup and its descendants (None when they cannot be
    counted); `complete`: two readings agreed and no listed process vanished between them; `detail` says
    why there is no count, or how it was taken."""

    members: int | None
    complete: bool
    detail: str

    def to_dict(self) -> dict[str, object]:
        return {"members": self.members, "complete": self.complete, "detail": self.detail}


def census(ref: CohortRef, *, timeout: float = 5.0) -> Census:
    """Count the cohort of `ref` now. A scope or direct cohort is counted by its shim (the `members` op
    reads every cgroup.procs below engine/ twice, unfrozen); a process group cannot be enumerated at all
    (K2: a member that calls setsid() leaves it), so its count is None. Never raises for an unreachable
    shim: that is a census with no count."""
    if ref.kind == "pgroup" or ref.socket_path is None:
        return Census(None, False, "a process group cannot be enumerated (K2): no count")
    try:
        with ShimChannel(ref.socket_path, timeout=timeout) as channel:
            reply = channel.call("members", io_timeout=timeout)
    except (EvidenceUnavailable, CohortRefusal) as e:
        return Census(None, False, f"the shim did not answer: {e}")
    members = reply.get("members")
    if not isinstance(members, list):
        return Census(None, False, "the shim's reply has no member list")
    return Census(len(members), reply.get("stable") is True, "counted by the shim, unfrozen, now")
