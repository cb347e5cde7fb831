"""The fake's extension UI dialogs (rpc-mode.js 47-79 ``createDialogPromise``, 80-84 and 174-192 the four
dialog methods, 615-626 the ``extension_ui_response`` branch of ``handleInputLine``), and the fixture
extension's tool (``testing/fixture_extension/dialogs.js``) that raises them on a model's cue.

A dialog (:meth:`DialogUI.dialog`): an already aborted signal settles it with the default at once and writes
nothing; otherwise it gets a fresh id, is registered as pending, starts its timer when the timeout is
truthy, and its request is written. It settles exactly once, by the first of: a response with its id (the
entry is removed, then the response is read as Pi reads it), its timeout (the entry is removed; the default;
**nothing is written**), the signal's abort (the same). A response whose id is not pending (unknown, missing,
not a string, already settled) is ignored without output. The editor takes neither a timeout nor a signal.

Hold points (the test's control channel): ``dialog`` (the tool is about to raise its dialog: nothing is
registered or written yet) and ``dialog-settled`` (the dialog is no longer pending, by ``answered``,
``timeout`` or ``aborted``, and its handler has not resumed: a response landing here is ignored, as in Pi).
Each settle is reported to the test as ``{"event": "dialog-settled", "id", "method", "how", "value"?}``
(``value`` absent for JavaScript's ``undefined``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mosaic.pi_rpc._framing import js_json_dumps
from mosaic.pi_rpc.testing._fake_runtime import Control, Json
from mosaic.pi_rpc.testing.dialogs import FIXTURE_DIALOGS

__all__ = ["UNDEFINED", "DialogUI", "Settled", "fixture_fields", "fixture_tool_result", "js_truthy"]


class _Undefined:
    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()
"""JavaScript's ``undefined``: a key the response did not carry (``null`` is ``None``)."""


def js_truthy(value: Any) -> bool:
    """JavaScript truthiness of a JSON value (``[]`` and ``{}`` are truthy, ``0``, ``""``, ``null`` are not)."""
    if value is None or value is False or value is UNDEFINED:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == value and value != 0  # NaN is falsy too
    if isinstance(value, str):
        return value != ""
    return True


def _get(response: Json, key: str) -> Any:
    return response[key] if key in response else UNDEFINED


def _parse(method: str, response: Json) -> Any:
    """What the handler gets from a response (rpc-mode.js 80-84, 177-185)."""
    if js_truthy(_get(response, "cancelled")):
        return False if method == "confirm" else UNDEFINED
    if method == "confirm":
        return response["confirmed"] if "confirmed" in response else False
    return response["value"] if "value" in response else UNDEFINED


_DEFAULTS: Mapping[str, Any] = {"confirm": False}
_TIMEOUT_MAX = 2**31 - 1


@dataclass(frozen=True)
class Settled:
    """How a dialog settled: ``how`` (``answered``, ``timeout``, ``aborted``), the handler's ``value``
    (:data:`UNDEFINED` or a JSON value), the raw ``response`` when answered, and the request ``id`` (``None``
    when an aborted signal settled it before it had one)."""

    how: str
    value: Any
    response: Json | None = None
    id: str | None = None


class DialogUI:
    """The dialog half of the RPC extension UI context over one stdout (``output``) and control channel."""

    def __init__(self, output: Callable[[Json], None], control: Control) -> None:
        self.output = output
        self.control = control
        self.pending: dict[str, asyncio.Future[Json]] = {}

    def respond(self, response: Json) -> None:
        """An ``extension_ui_response`` line: settle the pending dialog it names, or ignore it."""
        rid = response.get("id")
        fut = self.pending.pop(rid, None) if isinstance(rid, str) else None
        if fut is not None and not fut.done():
            fut.set_result(response)

    async def dialog(self, method: str, fields: Mapping[str, Any], *, timeout: Any = UNDEFINED,
                     signal: asyncio.Event | None = None,
                     on_request: Callable[[str], None] | None = None, hold: bool = True) -> Settled:
        """Raise one dialog (module doc) and wait until it settles. ``fields`` are the request's keys after
        ``method`` (``None`` values are dropped, as JSON.stringify drops ``undefined``); ``timeout`` in ms
        (:data:`UNDEFINED`: none), ``signal`` the abort signal (``None``: none); ``on_request`` is called
        with the request's id once it is written; ``hold=False`` skips the ``dialog`` hold point (the control
        op's dialogs: a held op would stop the control channel that releases it)."""
        if hold:
            await self.control.hit("dialog", method=method)
        default = _DEFAULTS.get(method, UNDEFINED)
        if signal is not None and signal.is_set():
            return Settled("aborted", default)
        did = str(uuid.uuid4())
        request: Json = {"type": "extension_ui_request", "id": did, "method": method,
                         **{k: v for k, v in fields.items() if v is not None}}
        if timeout is not UNDEFINED and method != "editor":
            request["timeout"] = timeout
        answered: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self.pending[did] = answered
        self.output(request)
        if on_request is not None:
            on_request(did)
        waits: set[asyncio.Future[Any]] = {answered}
        timer = aborter = None
        if method != "editor" and js_truthy(timeout) and isinstance(timeout, (int, float)):
            delay = float(timeout) if 1 <= timeout <= _TIMEOUT_MAX else 1.0  # Node's setTimeout clamps to 1 ms
            timer = asyncio.ensure_future(asyncio.sleep(delay / 1000))
            waits.add(timer)
        if signal is not None and method != "editor":
            aborter = asyncio.ensure_future(signal.wait())
            waits.add(aborter)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for extra in (timer, aborter):
                if extra is not None:
                    extra.cancel()
        if answered.done():
            response = answered.result()
            settled = Settled("answered", _parse(method, response), response, did)
        else:
            self.pending.pop(did, None)  # cleanup(): a later response finds nothing
            answered.cancel()
            settled = Settled("timeout" if timer is not None and timer.done() else "aborted", default, None, did)
        note: Json = {"event": "dialog-settled", "id": did, "method": method, "how": settled.how}
        if settled.value is not UNDEFINED:
            note["value"] = settled.value
        self.control.send(note)
        await self.control.hit("dialog-settled", id=did, method=method, how=settled.how)
        return settled


def fixture_tool_result(kind: str, settled: Settled) -> str:
    """The fixture tool's result text: ``<kind> answered <value>`` (dialogs.js)."""
    shown = "undefined" if settled.value is UNDEFINED else js_json_dumps(settled.value)
    return f"{kind} answered {shown}"


def fixture_fields(kind: str) -> Mapping[str, Any] | None:
    """The request fields the fixture raises for ``kind`` (``None``: not a kind it knows)."""
    fields = FIXTURE_DIALOGS.get(kind)
    if fields is None:
        return None
    return {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
