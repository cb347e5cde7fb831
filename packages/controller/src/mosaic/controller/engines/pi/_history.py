"""The history pages an `observe` serves for a Pi session: chat-pages' reader over the session file,
read-only (`history_reader`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mosaic.chat_pages import ReaderRefusal, RepositorySpec, conversation_id, create_reader, roots_from_specs

from .._seam import PageReader

__all__ = ["history_reader"]



def history_reader(project: Path, session: Path, *, seat: str) -> tuple[str, PageReader]:
    """The conversation id of `session` and a page reader over it (chat-pages, read-only): the first
    page of the current branch, or the page a cursor names (its branch remembered from the page that
    gave the cursor)."""
    cid = conversation_id(str(project), seat, session.name)
    reader = create_reader(lambda: roots_from_specs([RepositorySpec(str(project), seat, str(project))]))
    branches: dict[str, str] = {}

    def read(cursor: str | None) -> Mapping[str, Any]:
        if cursor is None and not session.exists():
            # Pi writes a new session file only at the first assistant message (FACTS (c) _persist):
            # the history is unavailable, not empty, and not an unknown conversation.
            return {"ok": False, "refusal": ReaderRefusal(
                "unavailable", "the session file does not exist yet (Pi writes it at the first assistant "
                "message)").to_dict()}
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
