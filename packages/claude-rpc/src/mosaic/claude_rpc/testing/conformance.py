"""The fake Claude engine held to the real pinned binary (README "Conformance").

The scenarios are the sealed recordings (:data:`CONFORMANCE`, the makers of
:data:`mosaic.claude_rpc.testing.recordings.RECORDINGS` with ``sealed=True``): each is run against an engine
in a fresh scratch directory with its own scripted server, under the seal's argv and environment, and the
run is compared with another by :func:`differences`:

* the records, direction by direction, each reduced to its :func:`signature` (the kinds and the values the
  link decides on: control subtypes and request ids, lifecycle uuids and states, interrupt receipts, block
  types, ``aborted``, tool results' ``is_error``, result subtype / ``is_error`` / ``stop_reason`` /
  ``num_turns`` / ``terminal_reason``, stream event types, status fields). Values the binary makes up
  (message uuids, timestamps, costs, its own request ids for ``can_use_tool``, the partial text of an
  interrupted stream) are left out;
* the exit code;
* the facts each maker returns (the scripted server's log, files created, the transcript's chaining), but
  for a fake's run those in :data:`NOT_MODELLED`.

``nox -s claude-rpc`` holds the fake to the committed recordings (the real binary's, made by
``fixtures/make/claude_fixtures.py``); ``nox -s claude-smoke`` makes each recording again on the real binary
and holds both the committed one and the fake's to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mosaic.claude_rpc.testing.fake_engine import fake_engine_command
from mosaic.claude_rpc.testing.recordings import RECORDINGS, Made, Recording, make_recording, redact

__all__ = ["CONFORMANCE", "NOT_MODELLED", "Run", "differences", "run_fake", "run_real", "signature"]

CONFORMANCE: tuple[Recording, ...] = tuple(r for r in RECORDINGS if r.sealed)
# Facts the fake does not model, left out when a fake's run is compared: the whole transcript the binary
# writes (attachments, queue operations, cost state); the fake writes only the entries a load check reads.
NOT_MODELLED = frozenset({"transcript"})

JsonObject = dict[str, Any]


def _blocks(msg: Mapping[str, Any]) -> list[Any]:
    content = (msg.get("message") or {}).get("content")
    if isinstance(content, str):
        return ["text"]
    out: list[Any] = []
    for b in content or []:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "tool_result":
            out.append(["tool_result", b.get("is_error")])
        elif kind == "text" and str(b.get("text", "")).startswith("[Request interrupted"):
            out.append(["text", b.get("text")])
        else:
            out.append(kind)
    return out


def signature(record: Mapping[str, Any]) -> list[Any]:
    """One record reduced to what conformance compares (module docstring)."""
    msg = record.get("msg") or {}
    kind = msg.get("type")
    if kind == "control_request":
        req = msg.get("request") or {}
        rid = msg.get("request_id") if record.get("dir") == "in" else "<engine>"
        return [kind, rid, req.get("subtype"), req.get("cancel_queued"), req.get("mode"), req.get("tool_name")]
    if kind == "control_response":
        res = msg.get("response") or {}
        body = res.get("response") or {}
        rid = res.get("request_id") if record.get("dir") == "out" else "<engine>"
        keys = sorted(body) if isinstance(body, dict) else None
        receipt = [body.get("still_queued"), body.get("cancelled")] if isinstance(body, dict) and \
            "still_queued" in body else None
        return [kind, rid, res.get("subtype"), keys, receipt, body.get("behavior") if isinstance(body, dict) else None,
                res.get("error")]
    if kind == "control_cancel_request":
        return [kind]
    if kind == "command_lifecycle":
        return [kind, msg.get("command_uuid"), msg.get("state")]
    if kind in ("assistant", "user"):
        return [kind, _blocks(msg), msg.get("aborted"), msg.get("uuid") if record.get("dir") == "in" else None]
    if kind == "result":
        return [kind, msg.get("subtype"), msg.get("is_error"), msg.get("stop_reason"), msg.get("num_turns"),
                msg.get("terminal_reason")]
    if kind == "system":
        return [kind, msg.get("subtype"), msg.get("status"), msg.get("permissionMode"),
                msg.get("session_id") if msg.get("subtype") == "init" else None]
    if kind == "stream_event":
        return [kind, (msg.get("event") or {}).get("type")]
    return [kind]


def _by_direction(records: Sequence[Mapping[str, Any]]) -> dict[str, list[list[Any]]]:
    return {d: [signature(r) for r in records if r.get("dir") == d] for d in ("in", "out")}


class Run:
    """One run of a scenario, redacted: its records, exit code and facts."""

    def __init__(self, records: Sequence[Mapping[str, Any]], exit_code: int, facts: Mapping[str, Any]) -> None:
        self.records = [dict(r) for r in records]
        self.exit_code = exit_code
        self.facts = dict(facts)

    @classmethod
    def of(cls, made: Made, scratch: Path) -> Run:
        return cls(redact(made.records, str(scratch)), made.exit_code, redact(made.facts, str(scratch)))

    @classmethod
    def committed(cls, fixtures: Path, name: str) -> Run:
        """The committed recording ``name`` with its exit code and facts from ``fixtures/MANIFEST.json``."""
        path = f"claude-2.1.283/recordings/{name}.jsonl"
        rows = json.loads((fixtures / "MANIFEST.json").read_text())["claude-2.1.283"]["files"]
        row = next(r for r in rows if r["path"] == path)
        records = [json.loads(x) for x in (fixtures / path).read_text().splitlines() if x.strip()]
        return cls(records, int(row["exit_code"]), row["facts"])


def differences(a: Run, b: Run, *, names: tuple[str, str] = ("a", "b"),
                ignore: frozenset[str] = frozenset()) -> list[str]:
    """Every way run ``a`` differs from run ``b`` (``[]`` = they conform); ``ignore`` names facts left out
    (:data:`NOT_MODELLED` when one run is the fake's)."""
    out: list[str] = []
    sa, sb = _by_direction(a.records), _by_direction(b.records)
    for direction in ("in", "out"):
        if sa[direction] != sb[direction]:
            n = next((i for i, (x, y) in enumerate(zip(sa[direction], sb[direction], strict=False)) if x != y),
                     min(len(sa[direction]), len(sb[direction])))
            out.append(f"{direction} record {n}: {names[0]} {sa[direction][n:n + 2]} / {names[1]} {sb[direction][n:n + 2]}")
    if a.exit_code != b.exit_code:
        out.append(f"exit {names[0]} {a.exit_code} / {names[1]} {b.exit_code}")
    for key in sorted((set(a.facts) | set(b.facts)) - ignore):
        if a.facts.get(key) != b.facts.get(key):
            out.append(f"fact {key}: {names[0]} {a.facts.get(key)!r} / {names[1]} {b.facts.get(key)!r}")
    return out


FAKE_BOUND = 10.0  # seconds: each wait on the fake engine (it answers in milliseconds; the binary's is WAIT)


def run_fake(recording: Recording, scratch: Path) -> Run:
    """The scenario against the fake engine in ``scratch``."""
    return Run.of(make_recording(recording, "", scratch, command=fake_engine_command(), bound=FAKE_BOUND), scratch)


def run_real(recording: Recording, binary: str | Path, scratch: Path) -> Run:
    """The scenario against the pinned binary in ``scratch`` (the caller holds the engine lock and the namespace)."""
    return Run.of(make_recording(recording, binary, scratch), scratch)


def __dir__() -> list[str]:
    return sorted(__all__)
