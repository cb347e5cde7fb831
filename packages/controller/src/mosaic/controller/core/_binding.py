"""The core's binding room: the binding's state, its fences and the stop context. Every change to them goes
through here (`_state.FIELD_OWNERS`: `binding_state`, `fences`, `context`).

The rules it keeps (the core's rules 4, 5 and 9; `_state` rule 1):

1. Admission is open only while the binding is active and no fence stands (`CoreState.admission_open`); a
   fence is a reason with its detail, so every closed admission says why. One fence lifts: `interrupt`,
   when its stop reconciles (`lift`); every other stays for the rest of the execution.
2. `uncertain` is one-way: the binding goes uncertain, admission stays closed, the claim is asked to say
   so (the `claim-uncertain` effect, once), and only a force stop moves it on (§1, §3). A stopped binding
   stays stopped.
3. A force stop moves the binding to stopping (`stopping`), then to stopped with its proof or uncertain
   with its reason (`stop_ended`).
4. The stop context is bumped whenever a stop starts or ends or control changes (`bump_context`): a
   confirmation issued under another context is void (H17).
"""

from __future__ import annotations

from ._io import CLAIM_UNCERTAIN
from ._state import CoreState

__all__ = ["bump_context", "fence", "lift", "stop_ended", "stopping", "uncertain"]


def fence(s: CoreState, reason: str, detail: str) -> None:
    """Admission closes for `reason` (rule 1)."""
    s.fences[reason] = detail


def lift(s: CoreState, reason: str) -> None:
    """The one fence that lifts: an interrupt's, when its stop reconciled (rule 1)."""
    assert reason == "interrupt", reason
    s.fences.pop(reason, None)


def bump_context(s: CoreState) -> None:
    """A stop started or ended, or control changed (rule 4)."""
    s.context += 1


def uncertain(s: CoreState, reason: str, detail: str) -> None:
    """The binding goes uncertain and admission stays closed; only force stop moves it on (rule 2)."""
    if s.binding_state in ("stopped",):
        return
    if s.binding_state != "uncertain":
        s.binding_state = "uncertain"
        bump_context(s)
        s.ask(CLAIM_UNCERTAIN, {"reason": reason, "detail": detail})
    fence(s, "uncertain", reason)


def stopping(s: CoreState) -> None:
    """A force stop began (rule 3)."""
    s.binding_state = "stopping"


def stop_ended(s: CoreState, stopped: bool, reason: str) -> None:
    """The force stop ended: stopped (its proof taken), or uncertain with `reason` (rule 3)."""
    if stopped:
        s.binding_state = "stopped"
    else:
        s.binding_state = "uncertain"
        fence(s, "uncertain", reason)
