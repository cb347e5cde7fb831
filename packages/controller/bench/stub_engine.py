"""A stub of pinned Pi's RPC mode for bench_controller.py: stdlib only, no model, no session file.

It reads JSON lines on stdin and stamps each record with ``time.monotonic()`` the moment its line is
read. CLOCK_MONOTONIC is one clock for every process on the machine, so a client's stamp taken before it
writes and this stamp compare directly. Stamps go to the side file named by ``--stamps`` (appended, one
line each), never to stdout, which carries only what Pi would write.

What it answers, just enough of Pi 0.85.1 (pi-0.85.1/FACTS.md) for the controller to settle each prompt
and free its slot at once:

- ``{"type": "prompt", "message": M}`` (and, for the benchmark's floor, a JSON-RPC ``prompt`` request
  relayed verbatim, whose text is ``params.text``): the ack ``{"id", "type": "response", "command":
  "prompt", "success": true}``, then the run as Pi writes it (FACTS Part 2 B): ``agent_start``,
  ``turn_start``, the user ``message_start``/``message_end``, the assistant ``message_start``/
  ``message_end``, ``turn_end``, ``agent_end``, ``agent_settled`` (so the receipt goes acknowledged,
  working, finished). Side file: ``p <stamp> <text>``.
- a prompt whose text is ``stream N PAD`` runs a reply of N ``message_update`` text_delta events on a
  second thread, as fast as the pipe takes them (one ``write`` each, as Pi writes each event): ack,
  ``agent_start``, user ``message_start``/``message_end``, assistant ``message_start``, the N deltas,
  ``message_end``, ``agent_settled``. Each delta's text is its emit stamp (20 characters, taken just
  before its write) padded with ``.`` to PAD characters. Pi's own records also repeat the partial
  message in each update; the controller drops that, so it is left out here. Side file:
  ``s <stamp> N <first emit> <last write returned>``.
- ``get_state``: a success response whose ``data.isStreaming`` says whether a streamed reply is running
  (answered on the reading thread, so a get_state written mid-stream is answered mid-stream, as Pi does).
- with ``--session FILE``: a Pi session file the stub owns as Pi does (its header written at start, or, when
  the file exists, its entries loaded as Pi loads a session; each message appended at its
  ``message_end``, before the event: FACTS a6), and ``get_entries`` answered from its own list of those
  entries, with ``since`` (the entries after the first with that id, or ``Entry not
  found``: rpc-mode.js 505-516): what the controller's drift check asks at every turn end.
- any other command with an id: a bare success response; a line that is not a JSON object: ignored.

Writes to stdout are whole lines, so the two threads never interleave a record. While a reply streams, the
streaming thread is the only writer: the reading thread queues its answers and the streaming thread writes
them between two events (a lock taken by both would starve the reader: the streamer retakes it before a
woken waiter runs, and a get_state left unanswered past the controller's probe bound poisons its link).
Each side-file line is written before the answer to its record, so a client that saw the answer finds
the stamp. The stub exits when stdin reaches EOF (after a running stream ends).

    python stub_engine.py --stamps PATH [--session FILE]
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import deque

_lock = threading.Lock()  # held by whoever writes stdout; the streamer holds it for the whole reply
_pending: deque[bytes] = deque()  # the reading thread's answers while a reply streams
_streaming = False
_session: int | None = None  # the session file's fd (O_APPEND), with --session
_entries: list[tuple[str, bytes]] = []  # (id, the entry's JSON): get_entries' list
_entries_lock = threading.Lock()
SESSION_ID = "01a22bb8-0000-7000-8000-0000000stub1"


def _write(data: bytes) -> None:
    """Write all of `data` to stdout (fd 1, blocking)."""
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def _drain() -> None:
    while _pending:
        _write(_pending.popleft())


def _answer(data: bytes) -> None:
    """The reading thread's output: queued for the streamer while a reply streams, else written now."""
    _pending.append(data)
    if _streaming:
        return  # the streamer writes it before its next event, or in its last drain
    # Not streaming (or the stream ended between the append and the check): drain under the lock. The
    # streamer clears the flag and drains once more under the same lock, so nothing is left behind.
    with _lock:
        _drain()


def _line(record: dict[str, object]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _user(text: str, kind: str) -> bytes:
    return _line({"type": kind, "message": {"role": "user", "content": [{"type": "text", "text": text}]}})


def _persist(message: dict[str, object]) -> None:
    """Append `message` as an entry (Pi's message_end handler does, before the event goes out)."""
    if _session is None:
        return
    with _entries_lock:
        eid = f"s{len(_entries) + 1:07x}"  # never one of a resumed session's 8-hex ids
        parent = _entries[-1][0] if _entries else None
        raw = json.dumps({"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-12-01T00:00:00.000Z",
                          "message": message}, separators=(",", ":")).encode()
        _entries.append((eid, raw))
        os.write(_session, raw + b"\n")


def _entries_after(since: object) -> bytes | None:
    """get_entries' `entries` array (the JSON), or None when `since` names no entry."""
    with _entries_lock:
        if since is None:
            chosen = _entries
        else:
            index = next((i for i, (eid, _) in enumerate(_entries) if eid == since), None)
            if index is None:
                return None
            chosen = _entries[index + 1:]
        return b"[" + b",".join(raw for _, raw in chosen) + b"]"


def _run(text: str) -> bytes:
    """A plain run's records after the ack, each message persisted at its end."""
    user = {"role": "user", "content": [{"type": "text", "text": text}]}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stopReason": "stop"}
    _persist(user)
    _persist(reply)
    return (_line({"type": "agent_start"}) + _line({"type": "turn_start"})
            + _line({"type": "message_start", "message": user}) + _line({"type": "message_end", "message": user})
            + _line({"type": "message_start", "message": {**reply, "content": []}})
            + _line({"type": "message_end", "message": reply})
            + _line({"type": "turn_end", "message": reply, "toolResults": []})
            + _line({"type": "agent_end", "messages": [], "willRetry": False}) + _line({"type": "agent_settled"}))


def _stream(rid: object, n: int, pad: int, stamps: int) -> None:
    global _streaming
    assistant = {"role": "assistant", "content": [{"type": "text", "text": "(streamed)"}], "stopReason": "stop"}
    head = (b'{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,'
            b'"delta":"')
    tail = b"." * max(0, pad - 20) + b'"}}\n'
    with _lock:
        _streaming = True
        _drain()
        _persist({"role": "user", "content": [{"type": "text", "text": "stream"}]})
        _write(_line({"id": rid, "type": "response", "command": "prompt", "success": True})
               + _line({"type": "agent_start"}) + _line({"type": "turn_start"})
               + _user("stream", "message_start") + _user("stream", "message_end")
               + _line({"type": "message_start", "message": {**assistant, "content": []}}))
        first = time.monotonic()
        for i in range(n):
            if _pending:
                _drain()
            t = time.monotonic()
            if i == 0:
                first = t
            _write(head + f"{t:020.9f}".encode() + tail)
        last = time.monotonic()
        os.write(stamps, f"s {last:.9f} {n} {first:.9f} {last:.9f}\n".encode())
        _streaming = False
        _drain()
        _persist(assistant)
        _write(_line({"type": "message_end", "message": assistant})
               + _line({"type": "turn_end", "message": assistant, "toolResults": []})
               + _line({"type": "agent_end", "messages": [], "willRetry": False}) + _line({"type": "agent_settled"}))


def main(argv: list[str]) -> int:
    global _session
    if len(argv) not in (2, 4) or argv[0] != "--stamps" or (len(argv) == 4 and argv[2] != "--session"):
        print("usage: stub_engine.py --stamps PATH [--session FILE]", file=sys.stderr)
        return 2
    stamps = os.open(argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    if len(argv) == 4:
        path = os.path.abspath(argv[3])
        project = path.rsplit("/.pi/state/", 1)[0]
        if os.path.exists(path):  # a session to resume (the benchmark's long one): its entries are the list
            with open(path, "rb") as f:
                for raw in f.read().split(b"\n")[1:]:
                    if raw:
                        _entries.append((json.loads(raw)["id"], raw))
            _session = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        else:
            _session = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            header = {"type": "session", "version": 3, "id": SESSION_ID, "timestamp": "2026-12-01T00:00:00.000Z",
                      "cwd": project}
            os.write(_session, json.dumps(header, separators=(",", ":")).encode() + b"\n")
    threads: list[threading.Thread] = []
    messages = 0
    for raw in sys.stdin.buffer:
        t = time.monotonic()
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        rid = record.get("id")
        kind = record.get("type")
        params = record.get("params")
        if kind == "prompt" or (record.get("method") == "prompt" and isinstance(params, dict)):
            text = str(record["message"] if kind == "prompt" else params["text"])  # type: ignore[index]
            if text.startswith("stream "):
                _, count, pad = text.split()
                thread = threading.Thread(target=_stream, args=(rid, int(count), int(pad), stamps))
                thread.start()
                threads.append(thread)
                messages += 2
                continue
            os.write(stamps, f"p {t:.9f} {text}\n".encode())
            _answer(_line({"id": rid, "type": "response", "command": "prompt", "success": True}) + _run(text))
            messages += 1
        elif kind == "get_state":
            _answer(_line({"id": rid, "type": "response", "command": "get_state", "success": True,
                           "data": {"isStreaming": _streaming, "isCompacting": False,
                                    "messageCount": messages, "pendingMessageCount": 0}}))
        elif kind == "get_entries" and _session is not None:
            listed = _entries_after(record.get("since"))
            if listed is None:
                _answer(_line({"id": rid, "type": "response", "command": kind, "success": False,
                               "error": f"Entry not found: {record.get('since')}"}))
            else:
                with _entries_lock:
                    leaf = _entries[-1][0] if _entries else None
                _answer(b'{"id":' + json.dumps(rid).encode() + b',"type":"response","command":"get_entries",'
                        b'"success":true,"data":{"entries":' + listed + b',"leafId":' + json.dumps(leaf).encode()
                        + b"}}\n")
        elif isinstance(kind, str) and rid is not None:
            _answer(_line({"id": rid, "type": "response", "command": kind, "success": True}))
    for thread in threads:
        thread.join()
    os.close(stamps)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
