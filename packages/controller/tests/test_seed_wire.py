"""The seed's wire where a seed client meets it (issue 26, items 6 and 7; seed README "Mediated control",
"Choices: Observe", "Refusals"), over the controller's real socket on the fake engine, in JSON-RPC framing.

A seed client starts with `hello` naming a grant, observes with a `limit`, and sends a draft id and revision 1
with each prompt. Here it meets every code the seed issues on that path: `grant` (no active grant of its),
`malformed` (hello not first), `unsupported-capability` (a command I1 doesn't verify; the private-host
transport), `scope` (a grant that does not cover this conversation), `capability` (the grant lacks the
operation: its hello narrowed what its uid may do); and `limitAdvisory: true`, and the draft id and
revision in the request record. docs/scope.md has the table of how this wire differs from the seed's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from core_harness import validate, validated_client

from mosaic.controller import Grants
from mosaic.controller.protocol import INVALID_PARAMS, PARSE_ERROR, REFUSED, UNVERIFIED_METHODS
from mosaic.controller.testing import RawClient, fake_controller, receipt_is

EVERYTHING = ["observe", "prompt", "takeover", "interrupt", "force-stop", "recover"]
# The grants file a seed deployment would hold: each grant with its id, operations and (optional) scope.
GRANTS_FILE = {"version": 1, "grants": [
    {"id": "operator", "uid": 4001, "operations": EVERYTHING},
    {"id": "viewer", "uid": 4002, "operations": ["observe"]},
    {"id": "elsewhere", "uid": 4003, "operations": EVERYTHING, "scope": ["pi-another-conversation"]},
]}


def refusal(reply: dict[str, Any], code: str) -> dict[str, Any]:
    """The refusal a reply carries, which must be `code` (JSON-RPC -32001, error.data.refusal)."""
    assert "error" in reply and reply["error"]["code"] == REFUSED, reply
    got = reply["error"]["data"]["refusal"]
    validate(got, "refusal")
    assert got["code"] == code, got
    return dict(got)


async def seed_client(path: str, grant: str) -> tuple[RawClient, dict[str, Any]]:
    """A seed-shaped client: a connection whose first message is hello naming `grant`; its hello's reply."""
    client = await validated_client(path)
    return client, await client.call("hello", grant=grant)


def test_a_seed_client_hello_observe_with_a_limit_and_a_prompt_with_its_draft_id(tmp_path: Path) -> None:
    async def main() -> None:
        grants = Grants.from_json(json.dumps(GRANTS_FILE).encode())
        async with fake_controller(tmp_path / "rig", grants=grants) as rig:
            client, hello = await seed_client(rig.socket_path, "operator")
            assert hello["result"]["grant"] == "operator" and hello["result"]["operations"] == sorted(EVERYTHING)
            assert hello["result"]["scope"] is None and hello["result"]["scopeHolds"] is True
            assert hello["result"]["connection"]["role"] == "observer"  # every connection starts as an observer
            observed = (await client.call("observe", limit=1))["result"]
            assert observed.get("limitAdvisory") is True  # advisory: the reader's page size governs
            assert "limitAdvisory" not in (await client.call("observe"))["result"]  # only when a limit was sent
            token = observed["incarnation"]
            took = (await client.call("takeover", incarnation=token, expectedGeneration=observed["generation"]))
            generation = took["result"]["generation"]
            reply = await client.call("prompt", incarnation=token, generation=generation, clientRequestId="seed-1",
                                      text="Say hello", draftId="draft-7", draftRevision=1)
            request = reply["result"]["request"]
            validate(request)
            assert (request.get("draftId"), request.get("draftRevision")) == ("draft-7", 1)
            await client.until(receipt_is("finished"))
            recorded = [r for r in client.records("request") if r["clientRequest"] == "seed-1"]
            assert [(r.get("draftId"), r.get("draftRevision")) for r in recorded] == [("draft-7", 1)]
            await client.close()

    asyncio.run(main())


def test_a_seed_client_meets_grant_malformed_unsupported_capability_scope_and_capability(tmp_path: Path) -> None:
    async def main() -> None:
        grants = Grants.from_json(json.dumps(GRANTS_FILE).encode())
        async with fake_controller(tmp_path / "rig", grants=grants) as rig:
            path = rig.socket_path
            # grant: the hello names no active grant.
            stranger, hello = await seed_client(path, "no-such-grant")
            assert "no-such-grant" in refusal(hello, "grant")["message"]
            await stranger.close()
            # malformed: a message other than hello first (here an observe), then a hello.
            late = await validated_client(path)
            await late.call("observe")
            assert "first request" in refusal(await late.call("hello", grant="operator"), "malformed")["message"]
            await late.close()
            # unsupported-capability: the private-host transport; a CHAT-01 command I1 doesn't verify.
            remote = await validated_client(path)
            refusal(await remote.call("hello", grant="operator", transport="private-host"), "unsupported-capability")
            await remote.close()
            operator, _ = await seed_client(path, "operator")
            for method in sorted(UNVERIFIED_METHODS - {"approval"}):
                refusal(await operator.call(method, decision="allow"), "unsupported-capability")
            # approval is checked against its PARAMS row, then refused: this controller answers no dialog (P3)
            observed = (await operator.call("observe"))["result"]
            refusal(await operator.call("approval", incarnation=observed["incarnation"], generation=1,
                                        decision="d1", choice="confirm"), "unsupported-capability")
            # scope: the grant covers another conversation only; every request is refused, nothing read.
            outsider, hello = await seed_client(path, "elsewhere")
            assert hello["result"]["scopeHolds"] is False and hello["result"]["scope"] == ["pi-another-conversation"]
            assert rig.conversation in refusal(await outsider.call("observe"), "scope")["message"]
            await outsider.close()
            # capability: the viewer grant narrows this uid (the owner's: it may do everything) to observe.
            viewer, hello = await seed_client(path, "viewer")
            assert hello["result"]["operations"] == ["observe"]
            observed = (await viewer.call("observe"))["result"]
            took = await viewer.call("takeover", incarnation=observed["incarnation"],
                                     expectedGeneration=observed["generation"])
            assert "takeover" in refusal(took, "capability")["message"]
            refusal(await viewer.call("prompt", incarnation=observed["incarnation"], generation=observed["generation"],
                                      clientRequestId="v-1", text="hi", draftId="d-1", draftRevision=1), "capability")
            # The operator connection, unnarrowed, takes control: the viewer's refusals changed nothing.
            observed = (await operator.call("observe"))["result"]
            took = await operator.call("takeover", incarnation=observed["incarnation"],
                                       expectedGeneration=observed["generation"])
            assert took["result"]["how"] == "takeover"
            for client in (viewer, operator):
                await client.close()

    asyncio.run(main())


@pytest.mark.parametrize(("line", "code"), [
    (b"not json", PARSE_ERROR),
    (b'{"jsonrpc":"2.0","id":1,"method":"observe","params":{"limit":0}}', INVALID_PARAMS),
    (b'{"jsonrpc":"2.0","id":1,"method":"observe","params":{"limit":101}}', INVALID_PARAMS),
    (b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"grant":"operator","transport":"udp"}}', INVALID_PARAMS),
])
def test_what_the_seed_calls_malformed_is_the_json_rpc_error_of_its_kind_on_this_wire(
        tmp_path: Path, line: bytes, code: int) -> None:
    """The seed's `malformed` for "a line that isn't JSON ... or a request that fails the envelope check" is
    the JSON-RPC error of its kind here (-32700, -32602: docs/scope.md), and the connection stays usable:
    a limit outside 1-100 is such an envelope failure."""
    async def main() -> None:
        grants = Grants.from_json(json.dumps(GRANTS_FILE).encode())
        async with fake_controller(tmp_path / "rig", grants=grants) as rig:
            reader, writer = await asyncio.open_unix_connection(rig.socket_path)
            writer.write(line + b"\n")
            await writer.drain()
            answer = json.loads(await asyncio.wait_for(reader.readline(), 30))
            assert answer["error"]["code"] == code, answer
            writer.write(b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
            await writer.drain()
            assert json.loads(await asyncio.wait_for(reader.readline(), 30)) == {"jsonrpc": "2.0", "id": 2, "result": {}}
            writer.close()

    asyncio.run(main())
