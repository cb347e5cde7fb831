"""The control channel's ops, the fake's side: what a test asks the running fake to do (the README lists
them). Each op is a row of :data:`OPS`, ``op -> handler(rpc, msg) -> reply``; an unknown op or a bad
argument raises, and the control connection answers the error to the test.

Hold points: ``hold`` (arm a point for ``count`` hits, ``-1`` for every hit), ``unhold``, ``release``
(the oldest held run, or ``all``). What an extension could do inside Pi: ``inject_prompt``
(``sendUserMessage``, agent-session.js 1135-1160: a prompt from outside RPC), ``queue`` (an extension's
steer / follow-up), ``input_handler`` (an ``input`` handler: ``handled`` or ``transform``),
``fail_preflight`` (a preflight that throws), ``throw_at_run_start`` (the run throws before its user
message), ``dialog`` (an extension UI request with Pi's shapes). ``state`` reports the fake's internals.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping

from mosaic.pi_rpc.testing._fake_agent_loop import AGENT_BUSY_PROMPT
from mosaic.pi_rpc.testing._fake_dialogs import UNDEFINED
from mosaic.pi_rpc.testing._fake_rpc import RpcMode
from mosaic.pi_rpc.testing._fake_runtime import Json, tick

__all__ = ["OPS", "run_op"]


async def run_op(rpc: RpcMode, msg: Json) -> Json:
    """Answer one control message; raises ``ValueError`` for an unknown op."""
    op = msg.get("op")
    handler = OPS.get(op) if isinstance(op, str) else None
    if handler is None:
        raise ValueError(f"unknown op {op!r}")
    return await handler(rpc, msg)


async def _hold(rpc: RpcMode, msg: Json) -> Json:
    rpc.session.control.armed[str(msg.get("point"))] = int(msg.get("count", 1))
    return {}


async def _unhold(rpc: RpcMode, msg: Json) -> Json:
    rpc.session.control.armed.pop(str(msg.get("point")), None)
    return {}


async def _release(rpc: RpcMode, msg: Json) -> Json:
    q = rpc.session.control.waiting.get(str(msg.get("point")), deque())
    n = 0
    while q and (n == 0 or msg.get("all")):
        held = q.popleft()
        if not held.done():
            held.set_result(None)
            n += 1
    return {"released": n}


async def _state(rpc: RpcMode, msg: Json) -> Json:
    session, agent = rpc.session, rpc.session.agent
    return {"state": {"isStreaming": session.run_active, "activeRun": agent.active is not None,
                      "steering": session.steering, "followUp": session.follow_up,
                      "agentQueues": [len(agent.steer_queue), len(agent.follow_queue)],
                      "held": {p: len(q) for p, q in session.control.waiting.items() if q},
                      "messageCount": len(agent.messages), "pendingBash": len(session.pending_bash)}}


async def _inject_prompt(rpc: RpcMode, msg: Json) -> Json:
    # An extension's sendUserMessage(text) (agent-session.js 1135-1160): a prompt from outside RPC.
    session = rpc.session
    text = str(msg.get("text"))

    async def run() -> None:
        try:
            await session.prompt(text, streaming_behavior=msg.get("deliverAs"), source="extension")
        except Exception as exc:
            session.control.send({"event": "inject-failed", "text": text, "error": str(exc)})

    asyncio.get_running_loop().create_task(run())
    await tick()
    return {}


async def _queue(rpc: RpcMode, msg: Json) -> Json:
    kind = msg.get("kind")
    text = str(msg.get("text"))
    if kind == "steer":
        rpc.session.queue_steer(text)
    elif kind == "followUp":
        rpc.session.queue_follow_up(text)
    else:
        raise ValueError("kind must be steer or followUp")
    return {}


async def _input_handler(rpc: RpcMode, msg: Json) -> Json:
    rpc.session.input_handlers.append({k: msg[k] for k in ("action", "match", "text") if k in msg})
    return {}


async def _fail_preflight(rpc: RpcMode, msg: Json) -> Json:
    rpc.session.fail_preflight.append(str(msg.get("message", "scripted preflight failure")))
    return {}


async def _throw_at_run_start(rpc: RpcMode, msg: Json) -> Json:
    rpc.session.agent.throw_at_run_start.append(str(msg.get("message", AGENT_BUSY_PROMPT)))
    return {}


async def _dialog(rpc: RpcMode, msg: Json) -> Json:
    # An extension's dialog raised outside a turn, with Pi's shapes (rpc-mode.js 47-84, 174-192): the
    # request's fields by method; an unknown method is written with its title alone. The test is told
    # how it settled ("dialog-answered": the raw response, or {"timedOut": true} / {"aborted": true}).
    method = str(msg.get("method"))
    fields: Json = {"title": msg.get("title")}
    extra = {"select": "options", "confirm": "message", "input": "placeholder", "editor": "prefill"}.get(method)
    if extra is not None:
        fields[extra] = msg.get(extra, [] if extra == "options" else None)
    timeout = msg["timeout"] if msg.get("timeout") is not None else UNDEFINED
    control = rpc.session.control
    written: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def run() -> None:
        settled = await rpc.ui.dialog(method, fields, timeout=timeout, on_request=written.set_result, hold=False)
        resp = settled.response if settled.response is not None else (
            {"timedOut": True} if settled.how == "timeout" else {"aborted": True})
        control.send({"event": "dialog-answered", "id": settled.id, "response": resp})

    task = asyncio.get_running_loop().create_task(run())
    rpc.tasks.add(task)  # a reference until it ends (a collected pending task warns on stderr)
    task.add_done_callback(rpc.tasks.discard)
    return {"id": await written}


OPS: Mapping[str, Callable[[RpcMode, Json], Awaitable[Json]]] = {
    "hold": _hold,
    "unhold": _unhold,
    "release": _release,
    "state": _state,
    "inject_prompt": _inject_prompt,
    "queue": _queue,
    "input_handler": _input_handler,
    "fail_preflight": _fail_preflight,
    "throw_at_run_start": _throw_at_run_start,
    "dialog": _dialog,
}
"""The control ops, op -> handler."""
