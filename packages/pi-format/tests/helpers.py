"""Builders for session bytes and the invariants every parse result must satisfy."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mosaic.pi_format import FormatRefusal, Parsed
from mosaic.pi_format.cli import summary
from mosaic.pi_format.ids import is_chat01_id
from mosaic.pi_format.model import UnavailableBlock

DATA = Path(__file__).resolve().parent / "data"
PROJECT = "/scratch/proj"
HEADER: dict[str, Any] = {
    "type": "session",
    "version": 3,
    "id": "01a22a58-944f-7072-a9ab-f808835fc6a2",
    "timestamp": "2026-11-30T02:46:17.936Z",
    "cwd": PROJECT,
}


def repo() -> Path:
    """The monorepo root: MOSAIC_REPO (set by nox), else three levels above this file's directory."""
    return Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])


def line(value: Any) -> bytes:
    """One JSONL line as Pi writes it: JSON.stringify (non-ASCII raw) plus LF."""
    if isinstance(value, bytes):
        return value + b"\n"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


def session(*lines: Any, header: dict[str, Any] | None = None) -> bytes:
    """A session file: the header, then each value as a line (bytes are taken as a raw line)."""
    return line(HEADER if header is None else header) + b"".join(line(x) for x in lines)


def msg(eid: str, parent: str | None, role: str = "user", text: str = "t", **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], **extra}
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-11-30T02:46:18.000Z",
            "message": message}


def entry(etype: str, eid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": etype, "id": eid, "parentId": parent, "timestamp": "2026-11-30T02:46:18.000Z", **fields}


def ok(result: Parsed | FormatRefusal) -> Parsed:
    assert isinstance(result, Parsed), result
    return result


def texts(parsed: Parsed, branch: str) -> list[str]:
    """The item ids of a branch, with the first text block of each entry item: compact expectations."""
    out = []
    for item in parsed.branches[branch].items:
        text = next((b.text for b in item.blocks if hasattr(b, "text") and b.kind == "text"), None)
        out.append(item.id if text is None else f"{item.id}:{text}")
    return out


def check_invariants(parsed: Parsed) -> None:
    """What holds for every parse result, whatever the bytes (fixtures test and the fuzz runs)."""
    entries = parsed.entries
    assert "main" in parsed.branches
    assert parsed.default_branch in parsed.branches
    has_child = {e.parent for e in entries.values() if e.parent is not None}
    leaves = [eid for eid in entries if eid not in has_child]
    # Each leaf ends exactly one branch; a file without entries has main alone.
    assert sorted(b.leaf for b in parsed.branches.values() if b.leaf is not None) == sorted(leaves)
    assert len(parsed.branches) == max(1, len(leaves))
    # A run of consecutive unreadable lines is one notice, x.line-<first line>, through its last line.
    runs = list(parsed.unreadable_runs())
    assert all(a + n < b for (a, n), (b, _) in zip(runs, runs[1:], strict=False)), "runs are maximal"
    line_notice_ids = {f"x.line-{first}" for first, _ in runs}
    unreadable = set(parsed.unreadable_lines)
    assert len(unreadable) == len(parsed.unreadable_lines) == sum(n for _, n in runs)
    on_some_branch: set[str] = set()
    for name, branch in parsed.branches.items():
        assert branch.name == name and is_chat01_id(name)
        # items_from before items is materialised (its own code path), checked against items below.
        count = branch.item_count
        width = count // 5 + 1
        sliced = [branch.items_from(s, width) for s in range(0, count + width, width)]
        tail = branch.items_from(max(0, count - 2), 10)
        items = branch.items
        assert tuple(x for chunk in sliced for x in chunk) == items
        assert tail == items[max(0, count - 2):]
        assert branch.items_from(1, 2) == items[1:3]
        ids = [item.id for item in items]
        assert len(ids) == len(set(ids)), f"duplicate item id on {name}"
        assert len(items) == branch.item_count
        assert tuple(ids) == branch.item_ids
        for item in items:
            assert is_chat01_id(item.id), item.id
            assert item.id.startswith("n." if item.kind != "notice" else "x.")
            for block in item.blocks:
                if isinstance(block, UnavailableBlock):
                    assert block.text == ""
        # Every unreadable line is covered by a notice on every branch, at its run's position.
        assert line_notice_ids <= set(ids)
        covered: set[int] = set()
        for item in items:
            if item.notice is not None and item.notice.code == "malformed-line":
                assert item.notice.through is not None and item.line == item.notice.line
                covered.update(range(item.line, item.notice.through + 1))
        assert covered == unreadable
        path = branch.entry_ids
        if branch.leaf is None:
            assert name == "main" and not entries and path == ()
            continue
        assert path[-1] == branch.leaf and branch.leaf not in has_child
        assert entries[path[0]].parent is None
        for parent, child in zip(path, path[1:], strict=False):
            assert entries[child].parent == parent
        on_some_branch.update(path)
        for eid in path:
            shown = entries[eid].item
            if shown is not None:
                assert shown.id in ids
    assert on_some_branch == set(entries)
    if entries:
        last = max(entries.values(), key=lambda e: e.line)
        assert parsed.default_leaf == last.id
        assert last.id in parsed.branches[parsed.default_branch].entry_ids
        assert last.branch == parsed.default_branch
    else:
        assert parsed.default_leaf is None and parsed.default_branch == "main"
    json.dumps(summary(parsed))


def check_result(result: Parsed | FormatRefusal) -> None:
    if isinstance(result, FormatRefusal):
        assert result.code in FormatRefusal.CODES
        assert result.reconcile == FormatRefusal.CODES[result.code]
        return
    check_invariants(result)
