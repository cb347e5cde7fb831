"""mosaic.chat_pages: The read-only reader: roots, catalogue, snapshots, CHAT-01 pages, cursors, follow, and the two GET routes.

Stub: issue 3 fills this package."""

__all__: list[str] = []
