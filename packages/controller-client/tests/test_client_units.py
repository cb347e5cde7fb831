"""The client library's values without a controller: the refusal types, a subscriber's bounded queue and
its lagging markers, receipts that only move forward, history pages joined into items, and the
programming errors. The flows against a real controller are in the controller's tests/test_client.py
(they need the controller's fake-engine rig: `mosaic.controller.testing.fake_controller`).

`SentRequest._apply_receipt` and `ControllerClient._state.fanout` are private; they are used here where the
mechanism is the point (what a receipt may overwrite; what a subscriber receives when it falls behind).
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from mosaic.controller_client import (
    ClientRefusal,
    ClientStateError,
    ControllerClient,
    ControlRefusal,
    Notification,
    RemoteProtocolError,
    RemoteRefusal,
    SentRequest,
    SubscriptionClosed,
    history_items,
)
from mosaic.safe_open import Refusal


def test_a_known_code_is_a_control_refusal_and_an_unknown_code_is_kept_as_sent() -> None:
    known = RemoteRefusal.from_wire({"refusal": {"code": "busy", "reconcile": True, "message": "slot held"}})
    assert known is not None and known.known and known.code == "busy" and known.reconcile is True
    assert isinstance(known, ControlRefusal) and isinstance(known, Refusal)
    unknown = RemoteRefusal.from_wire({"refusal": {"code": "a-code-from-the-future", "reconcile": False,
                                                       "message": "a live session"}})
    assert unknown is not None and not unknown.known and unknown.code == "a-code-from-the-future"
    assert unknown.reconcile is False and isinstance(unknown, Refusal)
    assert "a-code-from-the-future" not in ControlRefusal.CODES
    # A refusal is a value: it pickles with all three fields and compares equal.
    for refusal in (known, unknown):
        again = pickle.loads(pickle.dumps(refusal))
        assert again == refusal and again.reconcile == refusal.reconcile and type(again) is RemoteRefusal
    # The controller's flag is kept even where the table says otherwise.
    assert RemoteRefusal("busy", "m", reconcile=False).reconcile is False


@pytest.mark.parametrize("data", [None, {}, {"refusal": "busy"}, {"refusal": {"code": "", "reconcile": True,
                                                                              "message": "m"}},
                                  {"refusal": {"code": "busy", "reconcile": "yes", "message": "m"}},
                                  {"refusal": {"code": "busy", "reconcile": True}}])
def test_a_refusal_without_code_reconcile_and_message_is_not_read_as_one(data: Any) -> None:
    assert RemoteRefusal.from_wire(data) is None


def test_client_refusals_are_refusals_and_protocol_errors_are_not() -> None:
    assert set(ClientRefusal.CODES) == {"channel", "outcome-unknown", "unencodable"}
    assert isinstance(ClientRefusal("channel", "not connected"), Refusal)
    with pytest.raises(ValueError):
        ClientRefusal("busy", "not the client's code")
    error = RemoteProtocolError(-32601, "method not found: x")
    assert not isinstance(error, Refusal) and error.name == "method-not-found"
    assert RemoteProtocolError(None, "bad").name == "bad-reply" and RemoteProtocolError(-1, "?").name == "unknown"


def _note(n: int, *, method: str = "event") -> Notification:
    return Notification(method, {"sequence": n}, "server", 1)


def test_a_subscriber_that_falls_behind_gets_its_own_marker_at_the_place_of_the_first_loss() -> None:
    async def main() -> None:
        client = ControllerClient("/nonexistent/controller.sock")
        sub = client.subscribe(maxsize=2)
        for n in (1, 2, 3, 4):  # 3 and 4 do not fit
            client._state.fanout(_note(n), droppable=True)
        closing = Notification("closing", {"reason": "shutdown", "message": "m"}, "server", 1)
        client._state.fanout(closing, droppable=False)  # never dropped; ends the first marker
        client._state.fanout(_note(5), droppable=True)  # still full: a second marker, after `closing`
        got = [sub.get_nowait() for _ in range(5)]
        assert got[:2] == [_note(1), _note(2)]
        assert got[2] == Notification("marker", {"reason": "lagging", "dropped": 2}, "client", 1)
        assert got[3] == closing
        assert got[4] == Notification("marker", {"reason": "lagging", "dropped": 1}, "client", 1)
        assert sub.get_nowait() is None and sub.dropped == 3
        client._state.fanout(_note(6), droppable=True)  # room again
        assert await sub.get() == _note(6)
        await client.aclose()
        with pytest.raises(SubscriptionClosed):
            await sub.get()

    asyncio.run(main())


def test_a_receipt_only_moves_forward_and_a_settled_one_is_final() -> None:
    entry = SentRequest("cr-1", "hello", "inc-1", 2)
    assert entry.label == "sending"

    def receipt(state: str, **extra: Any) -> dict[str, Any]:
        return {"type": "receipt", "receipt": "r1.receipt", "request": "r1", "clientRequest": "cr-1",
                "state": state, "updatedAt": 1.0, **extra}

    assert entry._apply_receipt(receipt("working")) and entry.state == "pending" and entry.label == "working"
    assert not entry._apply_receipt(receipt("dispatched")) and entry.receipt_state == "working"
    assert entry._apply_receipt(receipt("delivery-unknown", reason="transport-unknown"))
    assert str(entry.state) == "settled" and entry.outcome_unknown and entry.label == "outcome unknown"
    assert not entry._apply_receipt(receipt("finished", turnState="completed"))
    assert entry.receipt_state == "delivery-unknown"  # never relabelled


def test_history_items_join_parts_and_reassemble_fragments() -> None:
    page1 = {"parts": [
        {"item": "n.a", "index": 0, "last": False, "kind": "assistant", "line": 3, "timestamp": None,
         "entry": "n.a", "attrs": {"stopReason": None}, "notice": None,
         "blocks": [{"kind": "text", "block": 0, "text": None, "continued": ["text"]},
                    {"kind": "fragment", "block": 0, "field": "text", "fragment": 0, "more": True, "value": "Hel"},
                    {"kind": "fragment", "block": None, "field": "timestamp", "fragment": 0, "more": False,
                     "value": "2026-12-01T00:00:00.000Z"}]}]}
    page2 = {"parts": [
        {"item": "n.a", "index": 1, "last": True, "kind": "assistant", "line": 3,
         "blocks": [{"kind": "fragment", "block": 0, "field": "text", "fragment": 1, "more": False, "value": "lo"},
                    {"kind": "fragment", "block": None, "field": "attrs.stopReason", "fragment": 0, "more": False,
                     "value": "stop"},
                    {"kind": "toolCall", "block": 1, "id": "c1", "name": "bash", "arguments": "{}"}]},
        {"item": "n.b", "index": 0, "last": True, "kind": "user", "line": 4, "timestamp": "t", "entry": "n.b",
         "attrs": {}, "notice": None, "blocks": [{"kind": "text", "block": 0, "text": "next"}]}]}
    first, second = history_items([page1, page2])
    assert first.item == "n.a" and first.text == "Hello" and first.timestamp == "2026-12-01T00:00:00.000Z"
    assert first.attrs == {"stopReason": "stop"} and "continued" not in first.blocks[0]
    assert [b["kind"] for b in first.blocks] == ["text", "toolCall"]
    assert (second.item, second.kind, second.text, second.line) == ("n.b", "user", "next", 4)


def test_commands_before_observe_and_after_aclose_are_programming_errors() -> None:
    async def main() -> None:
        client = ControllerClient("/nonexistent/controller.sock")
        with pytest.raises(ClientStateError):
            await client.prompt("hello")
        with pytest.raises(ClientStateError):
            await client.takeover()
        with pytest.raises(ClientRefusal) as channel:  # never connected: nothing is written
            await client.ping()
        assert channel.value.code == "channel"
        await client.aclose()
        with pytest.raises(ClientStateError):
            client.subscribe()
        with pytest.raises(FileNotFoundError):
            await ControllerClient.connect("/nonexistent/controller.sock")

    asyncio.run(main())
