"""The required-work relay: bench_controller.py section 0's second anchor (issue 34). No controller code.

A trivial asyncio program, like the plain relay beside it in bench_controller.py, over the same stub engine
(stub_engine.py), that does per prompt the work the brief and the facts require of the controller and
nothing more, the cheapest plain way:

- the client's request line decoded (`json.loads`), the prompt's text digest (SHA-256) taken;
- one look at the session file before the prompt is written (issue 27, brief §2: a second writer seen
  before the next prompt runs): an open beneath the sessions directory's fd (`O_NOFOLLOW`) and an fstat, on
  a thread of its own, a hop each way (`SimpleQueue.put` there, `call_soon_threadsafe` back);
- the 3 engine commands written, each answer read and decoded: the prompt; the `get_state` probe after
  its ack (FACTS a5: the only evidence of a run); `get_entries since=<the last verified id>` after
  `agent_settled` (brief §2: the drift check runs when the engine is idle); every engine line decoded once;
- the drift check's one read of the file, off the loop (a hop each way): the whole file read and hashed
  once (SHA-256: the verified prefix re-proved, the brief's ids-on-disk rule for every line without
  decoding them again), the new lines decoded and their ids compared with the engine's answer, in order;
- the same 14 notifications per prompt as the controller sends (the shapes and sizes of a captured run:
  `request`, `admitted`, `binding`, `dispatched`, `acknowledged`, `binding`, `working`, 5 events,
  `finished`, `binding`), each built as a dict and encoded once, and written to every observer in 2 writes
  (the call's: the reply and the first 4; the turn's end after the check: the other 10), the same bytes
  object to each observer.

It speaks the controller's client protocol as far as the bench uses it (`observe`, `takeover`, `prompt`
with receipts), so the same measuring client drives it and its whole turn ends at the `finished` receipt.
It decides nothing the brief asks for beyond that (no bounds, no refusal table, no access rules, no
durable records): it is a floor, not a controller.

    python required_relay.py --socket PATH --stamps PATH
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import bench_controller as bc  # this directory's: stub_argv, session_for, control_loop, EngineCount
from bench_server import raise_nofile

RW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def main(path: str, stamps: str) -> None:
    raise_nofile()
    engine_count = bc.EngineCount()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        session = bc.session_for(path)
        sessions_fd = os.open(os.path.dirname(session), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        name = os.path.basename(session)
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        incarnation = "inc-" + os.urandom(16).hex()
        observers: list[asyncio.Transport] = []
        read_cpu = [0.0]  # CPU seconds the drift check's reads took (their thread's time)
        jobs: queue.SimpleQueue[tuple[Callable[[], Any], Callable[[Any], None]] | None] = queue.SimpleQueue()

        def worker() -> None:  # the look thread: one hop there (SimpleQueue), one back (call_soon_threadsafe)
            while (job := jobs.get()) is not None:
                fn, back = job
                loop.call_soon_threadsafe(back, fn())

        thread = threading.Thread(target=worker, daemon=True)
        thread.start()

        def look() -> tuple[int, int, int]:
            fd = os.open(name, RW, dir_fd=sessions_fd)
            try:
                st = os.fstat(fd)
                return (st.st_dev, st.st_ino, st.st_size)
            finally:
                os.close(fd)

        def read_file() -> tuple[tuple[int, int, int], str, str, bytes]:
            """The file read whole off the loop, hashed once: the digest of the verified prefix, of the whole
            file (the next check's prefix), and the bytes after the prefix. Its CPU time is counted apart
            (``read_cpu``): the part of the floor that grows with the session file."""
            t0 = time.thread_time()
            fd = os.open(name, RW, dir_fd=sessions_fd)
            try:
                st = os.fstat(fd)
                chunks = []
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
            finally:
                os.close(fd)
            data = memoryview(b"".join(chunks))
            offset = s["checked"][2]
            digest = hashlib.sha256(data[:offset])
            prefix = digest.hexdigest()
            digest.update(data[offset:])
            tail = data[offset:].tobytes()
            read_cpu[0] += time.thread_time() - t0
            return (st.st_dev, st.st_ino, len(data)), prefix, digest.hexdigest(), tail

        # the session's verified state: (dev, ino, size) checked, its digest, the last verified id
        s: dict[str, Any] = {"checked": (0, 0, 0), "digest": hashlib.sha256(b"").hexdigest(), "last": None,
                             "seq": 0, "req": 0, "cmd": 0, "turn": None, "generation": 1}

        def binding(conn: str, actor: dict[str, Any], engine_state: str) -> dict[str, Any]:
            return {"type": "binding", "binding": "binding-exec-1", "conversation": "bench", "execution": "exec-1",
                    "incarnation": incarnation, "generation": s["generation"], "controllerConnection": conn,
                    "controllerConnected": True, "state": "active", "admission": "open", "fences": [],
                    "replay": "unavailable", "actor": actor, "engineState": engine_state,
                    "evidence": {"unknownNativeEvents": 0, "lateEvents": 0, "dialogs": 0}, "limits": None,
                    "engineUid": None}

        def receipt(turn: dict[str, Any], state: str, **more: Any) -> dict[str, Any]:
            return {"type": "receipt", "receipt": turn["request"] + ".receipt", "request": turn["request"],
                    "clientRequest": turn["crid"], "incarnation": incarnation, "execution": "exec-1",
                    "state": state, "updatedAt": time.time(), **more}

        def record(params: dict[str, Any]) -> bytes:
            return dumps({"jsonrpc": "2.0", "method": "record", "params": params}).encode() + b"\n"

        def event(turn: dict[str, Any], event_type: str, payload: dict[str, Any]) -> bytes:
            s["seq"] += 1
            seq = s["seq"]
            return dumps({"jsonrpc": "2.0", "method": "event", "params": {
                "type": "event", "event": f"exec-1.{seq}", "execution": "exec-1", "sequence": seq,
                "eventType": event_type, "visibility": "visible", "at": time.time(), "request": turn["request"],
                "payload": payload}}).encode() + b"\n"

        def command(cmd: dict[str, Any]) -> None:
            s["cmd"] += 1
            stdin.write(dumps({"id": f"c{s['cmd']}", **cmd}).encode() + b"\n")

        def fan(first_write: bytes | None, owner: asyncio.Transport | None, out: bytes) -> None:
            for t in observers:
                t.write(first_write + out if first_write is not None and t is owner else out)
            if first_write is not None and owner is not None and owner not in observers:
                owner.write(first_write)

        def admit(client: asyncio.Transport, rpc_id: Any, params: dict[str, Any], seen: tuple[int, int, int]) -> None:
            if seen != s["checked"] and s["checked"] != (0, 0, 0):
                reply = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32000, "message": "session-drift"}}
                client.write(dumps(reply).encode() + b"\n")
                return
            text = params["text"]
            command({"type": "prompt", "message": text})  # the prompt's write: the path's end
            s["req"] += 1
            raw = text.encode()
            actor = {"name": "local-operator", "uid": os.getuid(), "gid": os.getgid(), "pid": 0, "connection": "c1"}
            turn = {"request": f"r{s['req']}", "crid": params["clientRequestId"], "client": client, "actor": actor,
                    "notes": [], "messages": 0}
            s["turn"] = turn
            request = {"type": "request", "request": turn["request"], "clientRequest": turn["crid"], "actor": actor,
                       "conversation": "bench", "execution": "exec-1", "incarnation": incarnation,
                       "generation": s["generation"], "connection": "c1", "operation": "prompt",
                       "textDigest": "sha256:" + hashlib.sha256(raw).hexdigest(), "textBytes": len(raw),
                       "admittedAt": time.time()}
            admitted = receipt(turn, "admitted")
            answer = dumps({"jsonrpc": "2.0", "id": rpc_id, "result": {
                "outcome": "admitted", "clientRequest": {
                    "type": "clientRequest", "clientRequest": turn["crid"], "actor": actor["name"],
                    "conversation": "bench", "operation": "prompt", "textDigest": request["textDigest"],
                    "textBytes": len(raw)}, "request": request, "receipt": admitted}}).encode() + b"\n"
            out = (record(request) + record(admitted) + record(binding("c1", actor, "streaming"))
                   + record(receipt(turn, "dispatched")))
            fan(answer, client, out)

        def checked(turn: dict[str, Any], answer: dict[str, Any],
                    read: tuple[tuple[int, int, int], str, str, bytes]) -> None:
            identity, prefix, whole, tail = read
            before = s["checked"]
            ok = identity[:2] == before[:2] or before == (0, 0, 0)
            ok = ok and identity[2] >= before[2] and prefix == s["digest"]
            lines = tail.split(b"\n")
            ok = ok and not lines.pop()
            entries = [json.loads(line) for line in lines]
            if before == (0, 0, 0) and entries:  # the first check: line 1 is the header, never in the list
                header = entries.pop(0)
                ok = ok and header.get("type") == "session" and header.get("id") == bc.STUB_SESSION_ID
            ids = [e["id"] for e in entries if isinstance(e.get("type"), str) and e["type"] != "session"]
            ok = ok and len(ids) == len(entries) and ids == [e["id"] for e in answer["data"]["entries"]]
            if ok:
                s["checked"] = identity
                s["digest"] = whole
                if ids:
                    s["last"] = ids[-1]
            notes: list[bytes] = turn["notes"]
            notes.append(record(receipt(turn, "finished" if ok else "failed", turnState="completed")))
            notes.append(record(binding("c1", turn["actor"], "idle")))
            s["turn"] = None
            fan(None, None, b"".join(notes))

        class Engine(asyncio.SubprocessProtocol):
            def __init__(self) -> None:
                self.buf = b""

            def pipe_data_received(self, fd: int, data: bytes) -> None:
                lines = (self.buf + data).split(b"\n")
                self.buf = lines.pop()
                for line in lines:
                    self.line(json.loads(line))
                if lines:
                    engine_count.add(len(lines))

            def line(self, rec: dict[str, Any]) -> None:
                turn = s["turn"]
                if turn is None:
                    return
                notes: list[bytes] = turn["notes"]
                kind = rec.get("type")
                if kind == "response":
                    what = rec.get("command")
                    if what == "prompt":
                        notes.append(record(receipt(turn, "acknowledged")))
                        command({"type": "get_state"})  # the probe (FACTS a5)
                    elif what == "get_state":
                        notes.append(record(binding("c1", turn["actor"], "streaming")))
                        notes.append(record(receipt(turn, "working")))
                    elif what == "get_entries":
                        jobs.put((read_file, lambda read: checked(turn, rec, read)))
                elif kind in ("message_start", "message_end"):
                    message = rec["message"]
                    turn["messages"] += kind == "message_start"
                    payload = {"message": f"m{turn['messages']}", "role": message["role"],
                               "content": message["content"]}
                    if kind == "message_end":
                        payload["updateMode"] = "replace"
                        if "stopReason" in message:
                            payload["stopReason"] = message["stopReason"]
                    notes.append(event(turn, kind.replace("_", "-"), payload))
                elif kind == "agent_settled":
                    notes.append(event(turn, "run-settled", {}))
                    command({"type": "get_entries", **({"since": s["last"]} if s["last"] else {})})

        class Client(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                assert isinstance(transport, asyncio.Transport)
                self.transport = transport
                self.buf = b""

            def data_received(self, data: bytes) -> None:
                lines = (self.buf + data).split(b"\n")
                self.buf = lines.pop()
                for line in lines:
                    message = json.loads(line)
                    method, rpc_id, params = message.get("method"), message.get("id"), message.get("params")
                    if method == "prompt":
                        t = self.transport
                        jobs.put((look, lambda seen, t=t, i=rpc_id, p=params: admit(t, i, p, seen)))
                        continue
                    if method == "observe":
                        observers.append(self.transport)
                        result: dict[str, Any] = {"incarnation": incarnation, "generation": s["generation"]}
                    elif method == "takeover":
                        s["generation"] += 1
                        result = {"generation": s["generation"]}
                    else:
                        result = {}
                    self.transport.write(dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result}).encode() + b"\n")

            def connection_lost(self, exc: Exception | None) -> None:
                if self.transport in observers:
                    observers.remove(self.transport)

        proc, _ = await loop.subprocess_exec(Engine, *bc.stub_argv(stamps, session), stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        pipe = proc.get_pipe_transport(0)
        assert isinstance(pipe, asyncio.WriteTransport)
        stdin: asyncio.WriteTransport = pipe
        server = await loop.create_unix_server(Client, path, backlog=1024)
        try:
            print(f"ready {proc.get_pid()}", flush=True)
            await bc.control_loop(lambda: {**engine_count.take(), "connections": len(observers),
                                           "cpu": time.process_time(), "read_cpu": read_cpu[0],
                                           "session_bytes": s["checked"][2]})()
        finally:
            server.close()
            jobs.put(None)
            thread.join()
            os.close(sessions_fd)
            stdin.close()  # the stub exits at EOF
            for _ in range(200):
                if proc.get_returncode() is not None:
                    break
                await asyncio.sleep(0.01)  # bounded wait for the stub to exit at EOF
            proc.close()  # kills it if it has not
        print(json.dumps(engine_count.take()), flush=True)

    asyncio.run(run())


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "--socket" or sys.argv[3] != "--stamps":
        print("usage: required_relay.py --socket PATH --stamps PATH", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[2], sys.argv[4])
