"""What the lifecycle checks before a launch from an eligibility record, and reports of an execution it did not
run to its end (brief §6 "Recover", "Effects"; `_launching` runs them; the engine's own checks, the seal,
the pins, a loadable file and K8's load check, are the engine's: the seam's `Engine`, Pi's in `engines/pi`):

1. A recover's record still describes the pair and the session (`revalidate`: `eligibility`, `target`,
   `engine-pin-mismatch`, `session-drift`).
2. An execution this controller did not run to its end reports every tool call the session file shows
   without a result as an uncertain effect (`effect_report`, brief §6 "Effects").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mosaic.controller_client import ControlRefusal
from mosaic.safe_open import Refusal
from mosaic.writer_claim import ClaimStore, Pins, SeatKey, SessionKey, State

from ..engines._seam import Engine, Place, SessionRead
from ._eligibility import EligibilityRecord

__all__ = ["effect_report", "pins_dict", "refused", "revalidate"]


def revalidate(store: ClaimStore, seat_key: SeatKey, session_key: SessionKey, record: EligibilityRecord, *,
               engine: Engine, place: Place, session_file: str, header_id: str, conversation: str,
               pins: Pins) -> SessionRead:
    """Launch's checks of a record against the claim, this launcher's pins and the session as it is now
    (brief §6 "Recover": "It revalidates the record against the claim and the current leaf"). Returns the
    session as read now (the load check compares the engine's leaf with it: K8). Raises: `eligibility`
    (the claim is not the record's reservation any more), `target` (another session, or the leaf moved:
    K18), `engine-pin-mismatch` (another binary or argv: W9), `session-drift` (a line torn since)."""
    pair = store.observe(seat_key, session_key)
    for obs in pair.keys():
        rev = obs.revision
        if rev is None or rev.claim_id != record.claim_id:
            raise ControlRefusal("eligibility", f"the {obs.key} key is not held by the record's claim "
                                                f"{record.claim_id}")
        pending = rev.eligibility
        if rev.state is not State.RESERVED or rev.spawn_marker or pending is None \
                or pending.id != record.id or pending.taken:
            raise ControlRefusal("eligibility", f"the {obs.key} key's claim is not an untaken reservation "
                                                f"for {record.id} ({rev.state.value}, reason {rev.reason})")
        binding = rev.binding
        if (binding.conversation, binding.branch, binding.leaf, rev.generation) != \
                (record.conversation, record.branch, record.leaf, record.generation) \
                or pins_dict(binding.pins) != dict(record.pins):
            raise ControlRefusal("eligibility", f"the {obs.key} key's reservation differs from the record")
    if (record.session_id, record.session_file, record.conversation) != (header_id, session_file, conversation):
        raise ControlRefusal("target", "the record names another session than this launcher's")
    if dict(record.pins) != pins_dict(pins):
        raise ControlRefusal("engine-pin-mismatch", "this launcher's engine pins (binary or argv digest) are "
                                                    "not the ones the record was granted for (W9)")
    now = engine.read(place)
    if now.header_id != record.session_id:
        raise ControlRefusal("target", "the session file's header ID changed after eligibility")
    engine.loadable(now)  # a line torn after eligibility: refused before the record is held
    if (now.leaf, now.branch) != (record.leaf, record.branch):
        raise ControlRefusal("target", f"the session's leaf moved after eligibility: {now.leaf!r} on "
                                       f"{now.branch!r}, not the recorded {record.leaf!r} on "
                                       f"{record.branch!r} (K18, W9)")
    return now


def effect_report(engine: Engine, place: Place, execution: str, stop: str | None) -> Mapping[str, Any]:
    """The effectReport of an execution this controller did not run to its end (a boot proof stopped it,
    W7; or its controller died, W6, K10): every tool call the session file shows without a result is an
    uncertain effect; network uncertain; killing is never rollback (brief §6 "Effects")."""
    try:
        tools = engine.read(place).open_tools
    except Refusal:
        tools = ()
    return {"type": "effectReport", "stop": stop or f"restart-{execution}", "execution": execution,
            "effects": [{"toolCallId": k, "toolName": v, "state": "uncertain"} for k, v in tools],
            "network": "uncertain", "rollback": False}


def pins_dict(pins: Pins) -> dict[str, str]:
    """The pins as an eligibility record holds them."""
    return {"engine_version": pins.engine_version, "binary_sha256": pins.binary_sha256,
            "argv_digest": pins.argv_digest}


def refused(code: str, message: str) -> Mapping[str, Any]:
    """An effect's answer that refuses with `code` (the core passes it to the client as sent)."""
    return {"refusal": ControlRefusal(code, message).to_dict()}


