"""The fake engine's model client: the Anthropic Messages API over HTTP/1.1 to ``ANTHROPIC_BASE_URL`` (the
scripted server, :mod:`mosaic.claude_rpc.testing.model_server`), asyncio streams only, so an interrupt can
close the connection mid-stream the way the binary does (the server records ``disconnected``).

What the binary sends and the fake copies (the scripted server's log of the real runs): a ``HEAD /api/hello``
probe at start without the key, then ``POST /v1/messages?beta=true`` with ``x-api-key`` and a streaming body
(``model``, ``system``, ``messages``, ``stream: true``). The SSE events come back as ``(event, data)``.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

MODEL = "claude-opus-5-5"


class ModelError(Exception):
    """The model request failed (connection refused, a non-200 answer, a stream cut short)."""


def _split(base_url: str) -> tuple[str, int, str]:
    url = urllib.parse.urlsplit(base_url)
    if url.scheme != "http" or not url.hostname:
        raise ModelError(f"the fake engine speaks plain http only, not {base_url!r}")
    return url.hostname, url.port or 80, url.path.rstrip("/")


async def probe(base_url: str) -> None:
    """``HEAD /api/hello`` (the binary's connectivity probe); its answer does not matter."""
    host, port, prefix = _split(base_url)
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return
    try:
        writer.write(f"HEAD {prefix}/api/hello HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        await reader.read()
    except OSError:
        pass
    finally:
        writer.close()


class Stream:
    """One streaming ``POST /v1/messages``: iterate :meth:`events`; :meth:`close` cuts it (an interrupt)."""

    def __init__(self, base_url: str, api_key: str | None, body: Mapping[str, Any]) -> None:
        self._base_url = base_url
        self._key = api_key
        self._body = json.dumps(body, separators=(",", ":")).encode()
        self._writer: asyncio.StreamWriter | None = None

    async def events(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        host, port, prefix = _split(self._base_url)
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as exc:
            raise ModelError(f"cannot connect to the model: {exc}") from None
        self._writer = writer
        headers = [f"POST {prefix}/v1/messages?beta=true HTTP/1.1", f"Host: {host}:{port}",
                   "Content-Type: application/json", "anthropic-version: 2023-06-01", "Accept: text/event-stream",
                   f"Content-Length: {len(self._body)}", "Connection: close"]
        if self._key is not None:
            headers.append(f"x-api-key: {self._key}")
        writer.write(("\r\n".join(headers) + "\r\n\r\n").encode() + self._body)
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            raise ModelError(f"the model answered {status.decode(errors='replace').strip()!r}")
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        event = ""
        while True:
            line = await reader.readline()
            if not line:
                return
            text = line.decode().rstrip("\r\n")
            if text.startswith("event:"):
                event = text[6:].strip()
            elif text.startswith("data:"):
                yield event, json.loads(text[5:].strip())

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def request_body(system: Sequence[str], messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The body the fake sends: the scripted server reads the last user message's text and blocks."""
    return {"model": MODEL, "max_tokens": 32000, "stream": True,
            "system": [{"type": "text", "text": s} for s in system], "messages": list(messages)}
