"""Who may ask the routes (README "Who may ask"): `Guard`, pure: a request's target and headers in, a
`Verdict` out. The Host must be the server's loopback address or `localhost` with its port, a page's
origin must be the server's own, and a token is required unless turned off explicitly: in
`Authorization: Bearer` or the `TOKEN_PARAM` query parameter, which is removed from the target (the rest
byte for byte). `new_token()` makes one; a supplied one has at least `MIN_TOKEN_LENGTH` visible ASCII
characters. Tokens are compared in constant time over their SHA-256 digests.
"""

from __future__ import annotations

from . import _guard
from ._guard import *  # noqa: F403

__all__: list[str] = []
__all__ += _guard.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
