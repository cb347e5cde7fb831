"""Who may ask the routes (README "Who may ask"): `Guard`, pure: a request's target and headers in, a
`Verdict` out. The Host must be the server's loopback address or `localhost` with its port
(`loopback_hosts(address, port)` lists them), a page's origin must be the server's own, and a token is
required unless turned off explicitly: in `Authorization: Bearer` or the `TOKEN_PARAM` query parameter,
which `split_token(target)` removes from the target (the rest byte for byte). `new_token()` makes one; a
supplied one has at least `MIN_TOKEN_LENGTH` visible ASCII characters. Tokens are compared in constant
time over their SHA-256 digests.
"""

from __future__ import annotations

from ._guard import MIN_TOKEN_LENGTH, TOKEN_PARAM, Guard, Verdict, loopback_hosts, new_token, split_token

__all__ = ["MIN_TOKEN_LENGTH", "TOKEN_PARAM", "Guard", "Verdict", "loopback_hosts", "new_token", "split_token"]


def __dir__() -> list[str]:
    return sorted(__all__)
