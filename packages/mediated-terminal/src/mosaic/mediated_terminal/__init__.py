"""mosaic.mediated_terminal: the mediated terminal, a thin view over mosaic.controller.client.

Not built yet: issue 12 fills this package (README.md says what is planned)."""

__all__: list[str] = []
