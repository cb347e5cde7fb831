"""A JSON summary of a parse result: what the CLI prints, one object per file."""

from __future__ import annotations

from ._model import FormatRefusal, Json, Parsed

__all__ = ["summary"]


def summary(result: Parsed | FormatRefusal) -> dict[str, Json]:
    """Branches with item counts, the default branch and leaf, notices and flags (no item content).

    Item counts come from `Branch.item_count`, so summarising never materialises a branch.
    """
    if isinstance(result, FormatRefusal):
        return {"ok": False, "refusal": {"code": result.code, "reconcile": result.reconcile,
                                         "message": result.message}}
    header = result.header
    return {
        "ok": True,
        "header": {
            "id": header.id,
            "version": header.version,
            "timestamp": header.timestamp,
            "cwd": header.cwd,
            "parentSession": header.parent_session,
        },
        "entries": len(result.entries),
        "lines": result.line_count,
        "branches": [
            {
                "name": b.name,
                "start": b.start,
                "leaf": b.leaf,
                "parentBranch": b.parent_branch,
                "forkPoint": b.fork_point,
                "items": b.item_count,
            }
            for b in result.branches.values()
        ],
        "defaultBranch": result.default_branch,
        "defaultLeaf": result.default_leaf,
        "notices": [n.to_json() for n in result.notices],
        "unreadableLines": [[first, first + count - 1] for first, count in result.unreadable_runs()],
        "supersededLines": list(result.superseded_lines),
        "forkedFromEarlierSession": result.forked_from_earlier_session,
        "incomplete": result.incomplete,
    }
