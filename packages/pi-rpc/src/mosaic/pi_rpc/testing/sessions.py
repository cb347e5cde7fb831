"""Realistic Pi 0.85.1 session files of any length, for tests and benchmarks (never committed at size).

:func:`write_session` writes one conversation as the pinned Pi writes it: a version-3 header, the startup
``model_change`` and ``thinking_level_change``, then turns in one chain (each entry the child of the one
before), with the entry shapes, key orders and values of the sealed binary's own files
(``fixtures/pi-0.85.1/proj-rpc``, ``/work/shared/pi-0.85.1/recording``; FACTS.md (c) "Entry types"):

* a plain turn: a user message, an assistant text reply with ``usage``, ``responseId``, ``rawStopReason``;
* a tool turn: a user message, an assistant ``toolCall`` (``bash``, stopReason ``toolUse``), its
  ``toolResult``, the assistant's final text;
* a thinking turn: the assistant's ``thinking`` block (``thinkingSignature: "reasoning_content"``) before
  its text;
* now and then an aborted reply (``stopReason: "aborted"``, ``errorMessage: "Request was aborted"``, usage
  zeros), an HTTP 500 error reply followed by its retried reply as its child (FACTS Part 2 R), a
  ``thinking_level_change`` and a ``model_change`` mid-conversation (back to the pinned model before the
  end);
* one ``compaction`` near the end (``firstKeptEntryId`` a few turns back), as a long session has, so the
  context Pi sends to the model on the next prompt stays a few dozen messages whatever the file's length.

The last entry always ends a turn (an assistant text with ``stopReason: "stop"``, or the thinking entry
that pads an odd count), so Pi resumes the file without a dangling tool call, and since the branch holds a
thinking entry, Pi appends nothing at startup (FACTS (d) J). Usage stays far below the scripted model's
context window, so a prompt on the file never starts Pi's auto-compaction.

Everything is a function of ``seed``: the same arguments write the same bytes. Texts average about 1.6 KB
per entry (the issue's measure: 800 entries about 1.4 MB, 11,265 about 18.6 MB). Entry ids are 8 hex
digits, distinct by construction (an odd multiplier modulo 2**32 is a bijection).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["GeneratedSession", "session_lines", "write_session"]

PROVIDER, MODEL = "fakeprov", "fake-model-1"
_OTHER_MODEL = "fake-model-2"
_EPOCH_MS = 1796000000000  # 2026-11-30T00:00:00Z, the recordings' era
_WORDS = ("alpha", "beta", "gamma", "delta", "kappa", "lambda", "sigma", "omega", "the", "a", "file", "test",
          "function", "returns", "value", "error", "path", "session", "module", "check", "line", "read",
          "write", "index", "parse", "build", "run", "change", "fixed", "now")


@dataclass(frozen=True)
class GeneratedSession:
    """What :func:`write_session` wrote: the file, its header id, how many entries (header excluded), its
    size in bytes and the id of the last entry (Pi's default leaf)."""

    path: str
    session_id: str
    entries: int
    size: int
    leaf: str


def _dumps(value: Any) -> str:
    # JSON.stringify's form for these values (no spaces, non-ASCII raw; every number here is an integer).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _usage(rng: random.Random, *, zero: bool = False) -> dict[str, Any]:
    inp, out = (0, 0) if zero else (rng.randint(1500, 30000), rng.randint(20, 900))
    usage: dict[str, Any] = {"input": inp, "output": out, "cacheRead": 0, "cacheWrite": 0}
    if not zero:
        usage["reasoning"] = 0  # the scripted provider reports it once usage arrives (FACTS Part 2)
    usage.update({"totalTokens": inp + out,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
    return usage


class _Writer:
    def __init__(self, seed: int, session_id: str, cwd: str) -> None:
        self.rng = random.Random(seed)
        self.session_id = session_id
        self.cwd = cwd
        self.count = 0  # entries made (ids)
        self.parent: str | None = None
        self.clock = 0  # milliseconds after _EPOCH_MS
        self.responses = 0
        self.calls = 0
        self.model = MODEL

    def text(self, low: int, high: int) -> str:
        rng = self.rng
        target = rng.randint(low, high)
        words: list[str] = []
        size = 0
        while size < target:
            word = rng.choice(_WORDS)
            words.append(word)
            size += len(word) + 1
        return " ".join(words)

    def _stamp(self) -> tuple[str, int]:
        self.clock += self.rng.randint(40, 4000)
        ms = _EPOCH_MS + self.clock
        secs, milli = divmod(ms, 1000)
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{milli:03d}Z"
        return iso, ms

    def entry(self, etype: str, **fields: Any) -> dict[str, Any]:
        self.count += 1
        eid = f"{(self.count * 0x9E3779B1) & 0xFFFFFFFF:08x}"
        iso, _ = self._stamp()
        out = {"type": etype, "id": eid, "parentId": self.parent, "timestamp": iso, **fields}
        self.parent = eid
        return out

    def header(self) -> dict[str, Any]:
        return {"type": "session", "version": 3, "id": self.session_id,
                "timestamp": "2026-11-30T00:00:00.000Z", "cwd": self.cwd}

    def user(self, text: str) -> dict[str, Any]:
        _, ms = self._stamp()
        return self.entry("message", message={"role": "user", "content": [{"type": "text", "text": text}],
                                              "timestamp": ms})

    def assistant(self, content: list[dict[str, Any]], *, stop: str = "stop") -> dict[str, Any]:
        _, ms = self._stamp()
        message: dict[str, Any] = {"role": "assistant", "content": content, "api": "openai-completions",
                                   "provider": PROVIDER, "model": self.model}
        if stop == "aborted":
            self.responses += 1
            message.update({"usage": _usage(self.rng, zero=True), "stopReason": "aborted", "timestamp": ms,
                            "responseId": f"chatcmpl-fake-{self.responses}", "errorMessage": "Request was aborted"})
        elif stop == "error":
            message.update({"usage": _usage(self.rng, zero=True), "stopReason": "error", "timestamp": ms,
                            "errorMessage": '500: {"message":"scripted failure","type":"server_error"}'})
        else:
            self.responses += 1
            raw = "tool_calls" if stop == "toolUse" else "stop"
            message.update({"usage": _usage(self.rng), "stopReason": stop, "timestamp": ms,
                            "responseId": f"chatcmpl-fake-{self.responses}", "rawStopReason": raw})
        return self.entry("message", message=message)

    # -- turns ------------------------------------------------------------------------------------------

    def plain(self) -> list[dict[str, Any]]:
        return [self.user(self.text(160, 1200)), self.assistant([{"type": "text", "text": self.text(600, 3900)}])]

    def thinking(self) -> list[dict[str, Any]]:
        return [self.user(self.text(160, 900)), self.assistant([
            {"type": "thinking", "thinking": self.text(400, 2400), "thinkingSignature": "reasoning_content"},
            {"type": "text", "text": self.text(400, 2600)}])]

    def tool(self) -> list[dict[str, Any]]:
        self.calls += 1
        call = f"call_fake_{self.calls}"
        command = "printf " + self.text(10, 80).replace(" ", "-")
        user = self.user(self.text(100, 650))
        asked = self.assistant([{"type": "toolCall", "id": call, "name": "bash", "arguments": {"command": command}}],
                               stop="toolUse")
        _, ms = self._stamp()
        result = self.entry("message", message={
            "role": "toolResult", "toolCallId": call, "toolName": "bash",
            "content": [{"type": "text", "text": self.text(160, 4800)}], "isError": False, "timestamp": ms})
        return [user, asked, result, self.assistant([{"type": "text", "text": self.text(260, 1900)}])]

    def aborted(self) -> list[dict[str, Any]]:
        return [self.user(self.text(60, 300)), self.assistant([{"type": "text", "text": "tick00 tick01 "}],
                                                              stop="aborted")]

    def retried(self) -> list[dict[str, Any]]:
        return [self.user(self.text(60, 400)), self.assistant([], stop="error"),
                self.assistant([{"type": "text", "text": self.text(300, 1500)}])]

    def thinking_level(self, level: str) -> list[dict[str, Any]]:
        return [self.entry("thinking_level_change", thinkingLevel=level)]

    def model_change(self, model: str) -> list[dict[str, Any]]:
        self.model = model
        return [self.entry("model_change", provider=PROVIDER, modelId=model)]

    def compaction(self, first_kept: str) -> list[dict[str, Any]]:
        return [self.entry("compaction", summary="## Summary of the conversation so far\n\n" + self.text(800, 2400),
                           firstKeptEntryId=first_kept, tokensBefore=self.rng.randint(90000, 120000),
                           details={"readFiles": [], "modifiedFiles": []}, fromHook=False)]

    def turn(self, n: int) -> list[dict[str, Any]]:
        """The n-th turn (0-based) of the middle of the conversation."""
        if n % 211 == 107:
            return self.retried()
        if n % 97 == 41:
            return self.aborted()
        if n % 157 == 80:
            return self.thinking_level(("low", "medium", "off")[(n // 157) % 3])
        if n % 389 == 200:
            return self.model_change(_OTHER_MODEL if self.model == MODEL else MODEL)
        kind = self.rng.random()
        if kind < 0.35:
            return self.tool()
        if kind < 0.55:
            return self.thinking()
        return self.plain()


def session_lines(*, cwd: str, session_id: str, entries: int | None = None, size: int | None = None,
                  seed: int = 1) -> Iterator[str]:
    """The file's lines (each without its LF), the header first. Exactly one of ``entries`` (the number of
    entries after the header, at least 3) and ``size`` (bytes: the file ends at the first turn boundary at
    or past it) says how long it is. Raises ``ValueError`` for anything else."""
    if (entries is None) == (size is None):
        raise ValueError("give exactly one of entries and size")
    if entries is not None and entries < 3:
        raise ValueError("a session needs at least 3 entries (the startup pair and one turn)")
    w = _Writer(seed, session_id, cwd)
    written = 0

    def emit(items: list[dict[str, Any]]) -> Iterator[str]:
        nonlocal written
        for item in items:
            line = _dumps(item)
            written += len(line.encode("utf-8")) + 1
            yield line

    yield from emit([w.header()])
    yield from emit([w.entry("model_change", provider=PROVIDER, modelId=MODEL),
                     w.entry("thinking_level_change", thinkingLevel="off")])
    # The compaction sits about 40 entries before the end; the tail after it is plain turns (they land on the
    # exact count) with the pinned model again.
    tail = 40
    n = 0
    kept: list[str] = []

    def room() -> bool:
        if entries is not None:
            return w.count + 6 < entries - tail
        assert size is not None
        return written < size - tail * 1700

    while room():
        made = w.turn(n)
        n += 1
        kept = (kept + [e["id"] for e in made])[-24:]
        yield from emit(made)
    if w.model != MODEL:
        yield from emit(w.model_change(MODEL))
    yield from emit(w.compaction(kept[0] if kept else w.parent or ""))
    if entries is not None:
        left = entries - w.count
        if left % 2:
            yield from emit(w.thinking_level("off"))
            left -= 1
        for _ in range(left // 2):
            yield from emit(w.plain())
    else:
        assert size is not None
        while written < size:
            yield from emit(w.plain())


def write_session(path: str | os.PathLike[str], *, cwd: str, session_id: str, entries: int | None = None,
                  size: int | None = None, seed: int = 1) -> GeneratedSession:
    """Write :func:`session_lines` to ``path`` (created or replaced; the caller owns the directory) and
    say what was written."""
    lines = -1
    total = 0
    last = ""
    with open(path, "wb") as f:
        for line in session_lines(cwd=cwd, session_id=session_id, entries=entries, size=size, seed=seed):
            data = line.encode("utf-8") + b"\n"
            f.write(data)
            total += len(data)
            lines += 1
            last = line
    return GeneratedSession(os.fspath(path), session_id, lines, total, json.loads(last)["id"])


def __dir__() -> list[str]:
    return sorted(__all__)
