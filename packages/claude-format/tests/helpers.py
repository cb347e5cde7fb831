"""Shared test helpers: the recorded transcripts, lines made from their real entries, and the invariants
every parse must keep (checked on every result the tests see)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mosaic.claude_format import Parsed, TranscriptRefusal

DATA = Path(__file__).resolve().parent / "data"
RECORDED = sorted(p.name for p in DATA.glob("*.jsonl"))


def data(name: str) -> bytes:
    return (DATA / name).read_bytes()


def lines(name: str) -> list[dict[str, Any]]:
    """The recorded file's lines as JSON objects."""
    return [json.loads(x) for x in data(name).splitlines()]


def dump(obj: Any) -> bytes:
    """One line as the binary writes it (compact JSON, LF)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


def joined(objs: list[dict[str, Any]]) -> bytes:
    return b"".join(dump(o) for o in objs)


def template(kind: str, name: str = "transcript-agent-and-bash.jsonl") -> dict[str, Any]:
    """The first real line of `kind` (an entry type, or an attachment type as "attachment:<type>")."""
    for obj in lines(name):
        if kind.startswith("attachment:") and obj.get("type") == "attachment" and \
                obj["attachment"].get("type") == kind.split(":", 1)[1]:
            return obj
        if obj.get("type") == kind:
            return obj
    raise LookupError(kind)


def entry(kind: str, uuid: str, parent: str | None, text: str | None = None, **extra: Any) -> dict[str, Any]:
    """A real entry of `kind` (user or assistant, or an attachment) with a new uuid, parent and text."""
    obj = json.loads(json.dumps(template(kind)))
    obj["uuid"], obj["parentUuid"] = uuid, parent
    if text is not None:
        if obj["type"] == "user":
            obj["message"]["content"] = text
        elif obj["type"] == "assistant":
            obj["message"]["content"] = [{"type": "text", "text": text}]
    obj.update(extra)
    return obj


def u(n: int) -> str:
    """A uuid-shaped id for made-up entries."""
    return f"00000000-0000-4000-8000-{n:012d}"


def ok(result: Parsed | TranscriptRefusal) -> Parsed:
    assert isinstance(result, Parsed), result
    check_invariants(result)
    return result


def summary(p: Parsed) -> dict[str, Any]:
    """Everything a result says, as plain values (what two parses of the same bytes must agree on)."""
    return {
        "branches": [(b.name, b.leaf, b.start, b.parent_branch, b.fork_point, b.item_count, b.sidechain,
                      [i.to_json() for i in b.items]) for b in p.branches.values()],
        "default": (p.default_branch, p.default_leaf, p.leaf_rule),
        "notices": [n.to_json() for n in p.notices],
        "unreadable": list(p.unreadable_runs()),
        "superseded": p.superseded_lines,
        "flags": (p.incomplete, p.line_count, p.entry_count, p.version, p.session_id, p.cwd, p.created_at),
    }


def check_invariants(p: Parsed) -> None:
    """What holds for every result: main first and present, the default branch exists, each branch's
    item_count is its items, slices equal the items at every start (resumed or fresh), every line notice
    is on every branch once, and every ref renders to the item at its place."""
    names = list(p.branches)
    assert names[0] == "main" and len(set(names)) == len(names)
    assert p.default_branch in p.branches
    line_notices = p.unreadable_run_count()
    for b in p.branches.values():
        items = b.items
        assert b.item_count == len(items), b.name
        for step in (1, 3, 7):
            got: list[Any] = []
            for start in range(0, len(items) + step, step):
                got += b.items_from(start, step)
            assert got == list(items), (b.name, step)
        refs = b.refs_from(0, len(items))
        assert [p.render(r) for r in refs] == list(items)
        run_ids = [i.id for i in items if i.notice is not None and i.notice.code == "malformed-line"]
        assert len(run_ids) == line_notices == len(set(run_ids)), b.name
        ids = [i.id for i in items]
        assert len(set(ids)) == len(ids), b.name
        if b.leaf is not None:
            assert b.entry_ids[-1] == b.leaf
            assert b.entry_ids[0] == b.start or b.parent_branch is not None
