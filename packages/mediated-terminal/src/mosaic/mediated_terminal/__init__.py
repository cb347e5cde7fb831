"""mosaic.mediated_terminal: The mediated terminal: a thin view over the controller client library.

Stub: issue None fills this package."""

__all__: list[str] = []
