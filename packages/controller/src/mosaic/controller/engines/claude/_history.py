"""The history pages an `observe` serves for a Claude session: chat-pages' reader over its Claude seat
(`history_reader`), read-only. The reader knows a Claude seat's sessions only from its launcher's receipts
(`<project>/.pi/state/<seat>/session-id`, chat-pages "Claude Code seats"); a session no receipt names, or
whose transcript is not written yet, reads as the reader's refusal, never as an empty history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mosaic.chat_pages import RepositorySpec, create_reader, roots_from_specs
from mosaic.chat_pages.sources import CLAUDE_HARNESS, claude_conversation_id

from .._seam import PageReader
from ._session import ClaudePlace

__all__ = ["history_reader"]


def history_reader(place: ClaudePlace) -> tuple[str, PageReader]:
    """The conversation id of the session and a page reader over it: the first page of the current branch,
    or the page a cursor names (its branch remembered from the page that gave the cursor)."""
    cid = claude_conversation_id(place.project, place.seat, place.session_id)
    spec = RepositorySpec(place.project, place.seat, place.project, CLAUDE_HARNESS, place.config_dir)
    reader = create_reader(lambda: roots_from_specs([spec]))
    branches: dict[str, str] = {}

    def read(cursor: str | None) -> Mapping[str, Any]:
        if cursor is None:
            result = reader.open(conversation=cid)
        else:
            result = reader.next(cursor=cursor, conversation=cid, branch=branches.get(cursor, ""))
        if result.get("ok"):
            page = result.get("page") or {}
            for key in ("cursor", "follow"):
                record = result.get(key)
                if isinstance(record, Mapping) and isinstance(record.get("id"), str):
                    branches[record["id"]] = str(page.get("branch", ""))
        return result

    return cid, read
