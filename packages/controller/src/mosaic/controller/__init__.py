"""mosaic.controller: One controller per execution: admission, dispatch slot, turns, stop chain, recovery, drift, the socket protocol and the client library.

Stub: issue None fills this package."""

__all__: list[str] = []
