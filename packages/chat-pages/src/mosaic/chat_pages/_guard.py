"""Who may ask the two GET routes: the loopback guard, pure (no I/O), shared by `ReaderServer` and the ASGI
middleware `ReaderGuard`.

The routes hand out session text that the server's uid may read and the caller's may not. Three things a
loopback address alone does not stop, each refused before the request reaches the reader:

1. **DNS rebinding.** A web page whose host name resolves to 127.0.0.1 reaches the server with its own
   name in `Host`. Only the bound address (`127.0.0.1:<port>`, `[::1]:<port>`) and `localhost:<port>` are
   accepted; any other `Host`, a missing one or two of them is `host-refused` (421 Misdirected Request). A
   request target in absolute form (`GET http://host:port/path`, RFC 9112 §3.2.2) names what the server acts
   on by its authority, which an origin server must prefer to Host: that authority is judged by the same
   rule (and must be `http`, with no user part), Host is still judged too, and the target is routed as the
   path it names.
2. **Cross-site requests.** A page on another origin that the browser lets send a request (a form, an
   image, `fetch` with `no-cors`) carries `Origin` or `Sec-Fetch-Site`. `Origin` must be `http://` and one
   of the accepted hosts; `Sec-Fetch-Site` must be `same-origin` or `none` (the user typed or pasted the
   URL). Anything else, `Origin: null` included, is `cross-site` (403). A client that sends neither (a
   command line, a library) is not a browser page and passes this check.
3. **Another local user.** Every local uid can connect to loopback. A token is required by default, as
   Jupyter does: `token-required` (401, `WWW-Authenticate: Bearer`) when none is presented,
   `token-wrong` (403) when one differs. It is accepted in `Authorization: Bearer <token>` (what
   `mosaic-read --url` sends; the scheme in any case, RFC 9110 §11.1; an `Authorization` of any other
   scheme, or a bare token, presents none and is `token-required`) or as the `token` query parameter (the
   URL `mosaic-read serve` prints, for a browser); the parameter is removed before routing. No cookie is set or read: a cookie for 127.0.0.1 is
   sent to every port of that host, including a server another local user runs, and a cookie is what a
   browser attaches to cross-site requests by itself; a header or a query token never is.

Tokens are compared in constant time over their SHA-256 digests (`hmac.compare_digest`), so neither the
content nor the length of the expected token shows in the time a refusal takes.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from ._http import REFUSAL_STATUS
from ._refusal import ReaderRefusal

# What the public modules show of this module; the rest is the package's own.
__all__ = ["MIN_TOKEN_LENGTH", "TOKEN_PARAM", "Guard", "Verdict", "new_token"]

#: The query parameter that carries the token (removed from the target before routing).
TOKEN_PARAM = "token"
#: Bytes of randomness in a generated token (`secrets.token_urlsafe`: 43 URL-safe characters).
TOKEN_BYTES = 32
#: A supplied token must be at least this long and made of visible ASCII (it travels in URLs and headers).
MIN_TOKEN_LENGTH = 16

#: A request target in absolute form (RFC 9112 §3.2.2): scheme "://" authority, then the path and query.
_ABSOLUTE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)(.*)", re.S)

#: Sec-Fetch-Site values of a request the user made on this origin or typed in themselves.
_SAME_SITE_FETCH = frozenset({"same-origin", "none"})


def new_token() -> str:
    """A fresh random token (URL-safe base64 of TOKEN_BYTES random bytes)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def check_token_text(token: str) -> str:
    """`token` when it can serve as a token: at least MIN_TOKEN_LENGTH visible ASCII characters, no space.
    Raises ValueError naming what is wrong otherwise (never echoing the token)."""
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f"a token needs at least {MIN_TOKEN_LENGTH} characters, this one has {len(token)}")
    if not all("!" <= ch <= "~" for ch in token):
        raise ValueError("a token is visible ASCII only (no spaces, controls or other characters)")
    return token


def loopback_hosts(address: str, port: int) -> frozenset[str]:
    """The Host values a browser sends for a server bound to the loopback `address` and `port`: the address
    itself (IPv6 in brackets) and `localhost`, each with `:port`, and also bare when the port is 80 (a
    browser leaves out the default port). Raises ValueError for an address that is not loopback."""
    ip = ipaddress.ip_address(address)
    if not ip.is_loopback:
        raise ValueError(f"the reader routes serve loopback only, not {address}")
    names = [f"[{ip.compressed}]" if ip.version == 6 else ip.compressed, "localhost"]
    hosts = {f"{n}:{port}" for n in names}
    if port == 80:
        hosts |= set(names)
    return frozenset(hosts)


@dataclass(frozen=True)
class Verdict:
    """What the guard decided about one request. `refusal` is None when the request may proceed, with
    `target` (the token parameter removed) to route; otherwise it is the response: `status`, the JSON
    refusal body and `headers` to add (`WWW-Authenticate` for 401)."""

    target: str
    status: int = 200
    refusal: dict[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()


def _refuse(target: str, refusal: ReaderRefusal, headers: tuple[tuple[str, str], ...] = ()) -> Verdict:
    """The refusal's verdict, with its status from the routes' table."""
    return Verdict(target, REFUSAL_STATUS[refusal.code], {"ok": False, "refusal": refusal.to_dict()}, headers)


class Guard:
    """The guard's rules over one server's accepted hosts and token.

    `hosts`: the Host values accepted (compared lower-cased; `loopback_hosts` gives a bound server's).
    `token`: the token every request must present, or None when the caller turned tokens off explicitly.
    `check` never raises for input: every request gets a `Verdict`.
    """

    def __init__(self, hosts: Iterable[str], token: str | None) -> None:
        self.hosts = frozenset(h.lower() for h in hosts)
        self._origins = frozenset(f"http://{h}" for h in self.hosts)
        self.token = None if token is None else check_token_text(token)
        self._digest = None if token is None else hashlib.sha256(token.encode("ascii")).digest()

    def check(self, target: str, headers: Sequence[tuple[str, str]]) -> Verdict:
        """Judge one request: its target (as sent: origin form, or absolute form, whose authority is judged
        and which is routed as the path it names) and its headers (names lower-cased, in the order sent; a
        repeated header appears repeatedly). Host first (and an absolute form's authority), then the origin,
        then the token; the first rule broken answers."""
        target, tokens = split_token(target)
        target, authority = origin_form(target)
        host = [v for k, v in headers if k == "host"]
        if len(host) != 1 or host[0].strip().lower() not in self.hosts:
            shown = "none" if not host else "several" if len(host) > 1 else repr(host[0][:100])
            return _refuse(target, ReaderRefusal(
                "host-refused", f"Host {shown} is not this server's loopback address or localhost (DNS rebinding?)"))
        if authority is not None and authority.lower() not in self._origins:
            return _refuse(target, ReaderRefusal(
                "host-refused", f"the request target's authority {authority[:100]!r} is not this server's "
                                "(RFC 9112 §3.2.2: in an absolute-form target it names what the server acts on)"))
        origin = [v for k, v in headers if k == "origin"]
        if origin and (len(origin) > 1 or origin[0].strip().lower() not in self._origins):
            return _refuse(target, ReaderRefusal(
                "cross-site", f"Origin {origin[0][:100]!r} is not this server's origin"))
        fetch_site = [v.strip().lower() for k, v in headers if k == "sec-fetch-site"]
        other = [v for v in fetch_site if v not in _SAME_SITE_FETCH]
        if other:
            return _refuse(target, ReaderRefusal(
                "cross-site", f"Sec-Fetch-Site {other[0][:40]!r}: a request from another site"))
        if self._digest is None:
            return Verdict(target)
        for k, v in headers:
            if k == "authorization":
                scheme, _, value = v.strip().partition(" ")
                if scheme.lower() != "bearer" or not value.strip():
                    return _refuse(target, ReaderRefusal(
                        "token-required", "an Authorization header carries the token only as "
                                          "`Authorization: Bearer <token>`; no other scheme, no bare token"),
                                   (("WWW-Authenticate", 'Bearer realm="mosaic-read"'),))
                tokens.append(value.strip())
        if not tokens:
            return _refuse(target, ReaderRefusal(
                "token-required", "this server needs its token: the Authorization: Bearer header or ?token="),
                (("WWW-Authenticate", 'Bearer realm="mosaic-read"'),))
        if not all(self._matches(t) for t in tokens):
            return _refuse(target, ReaderRefusal("token-wrong", "the token presented is not this server's"))
        return Verdict(target)

    def _matches(self, presented: str) -> bool:
        assert self._digest is not None
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        return hmac.compare_digest(digest, self._digest)


def origin_form(target: str) -> tuple[str, str | None]:
    """(the target in origin form, the authority it named as `scheme://authority`) for a target in absolute
    form (RFC 9112 §3.2.2; an empty path is `/`); (`target`, None) for any other form. The authority is
    returned with its scheme so that only `http://<an accepted host>` can match: https, a user part or an
    empty authority cannot."""
    m = _ABSOLUTE.fullmatch(target)
    if m is None:
        return target, None
    rest = m.group(3)
    if not rest.startswith("/"):
        rest = "/" + rest
    return rest, f"{m.group(1).lower()}://{m.group(2)}"


def split_token(target: str) -> tuple[str, list[str]]:
    """(`target` without its `token` query parameters, the values of those parameters). The rest of the
    query is kept byte for byte, so routing sees exactly what was sent without the token."""
    path, sep, query = target.partition("?")
    if not sep:
        return target, []
    kept: list[str] = []
    tokens: list[str] = []
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if unquote_plus(name) == TOKEN_PARAM:
            tokens.append(unquote_plus(value))
        else:
            kept.append(pair)
    return (path + "?" + "&".join(kept) if kept else path), tokens


def is_loopback_server(server: object) -> tuple[str, int] | None:
    """(address, port) of an ASGI scope's `server` entry when it is a loopback address, else None."""
    if not (isinstance(server, (tuple, list)) and len(server) == 2 and isinstance(server[1], int)):
        return None
    try:
        loop = ipaddress.ip_address(str(server[0])).is_loopback
    except ValueError:
        return None
    return (str(server[0]), server[1]) if loop else None

