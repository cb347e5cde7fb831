"""The socket server's fan-out (issue 34): a notification is encoded once and the same bytes go to every
observer; a run of notifications to the same observers is joined once (`SocketServer.deliver_notifications`);
what each observer reads is byte for byte what one-by-one delivery writes, and a slow observer stays bounded
and is told exactly how many notifications it lost, as before."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from server_harness import Client, run, serving, socket_dir  # noqa: E402

from mosaic.controller.core import Notify  # noqa: E402
from mosaic.controller.server import TRANSPORT_HIGH_WATER, WRITE_BATCH, ServerLimits  # noqa: E402


def _line(method: str, params: object) -> bytes:
    """The wire line as the protocol defines it (compact, raw UTF-8, LF), encoded here independently."""
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params}, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


async def _read_to_end(client: Client) -> bytes:
    """Every byte up to (not including) the line of the ``end`` notification the test sends last."""
    end = _line("end", {})
    while (at := client.buf.find(end)) == -1:
        assert await client._more(), "the server ended the connection"
    data = bytes(client.buf[:at])
    del client.buf[:at + len(end)]
    return data


def test_64_observers_receive_identical_bytes_for_one_event_and_for_a_joined_run() -> None:
    observers = 64
    # One event, then a run of notifications past one write's worth (non-ASCII, U+2028, a lone surrogate
    # written escaped), delivered joined; then the same run one by one: every observer reads the same bytes.
    event = {"type": "event", "sequence": 1, "eventType": "text-delta",
             "payload": {"message": "m1", "delta": "h\u00e9llo \u2028 \ud800"}}
    run_of = [Notify((), "event", {"sequence": 2 + i, "payload": {"delta": "x" * (i * 37 % 900) + "\u00fc"}})
              for i in range(120)]

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock, limits=ServerLimits(max_connections=observers + 8)) as (server, core):
                clients = [await Client.connect(d.sock) for _ in range(observers)]
                await core.wait_for(lambda: len(core.connected()) == observers)
                to = tuple(core.connected())
                server.deliver(Notify(to, "event", event))
                server.deliver_notifications([Notify(to, n.method, n.params) for n in run_of])
                for n in run_of:
                    server.deliver(Notify(to, n.method, n.params))
                server.deliver(Notify(to, "end", {}))
                joined = b"".join(_line(n.method, n.params) for n in run_of)
                expected = _line("event", event).replace(b"\xed\xa0\x80", b"\\ud800") + joined + joined
                assert b"\\ud800" in expected and sum(len(_line(n.method, n.params)) for n in run_of) > WRITE_BATCH
                got = [await _read_to_end(c) for c in clients]
                assert all(g == expected for g in got)
                for c in clients:
                    await c.aclose()

    run(main())


def test_a_slow_observer_of_joined_runs_stays_bounded_and_its_marker_counts_exactly_what_it_lost() -> None:
    cap = 64 * 1024
    limits = ServerLimits(max_outbox_bytes=cap)
    total, batch = 4000, 100
    payload = "e" * 1000

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock, limits=limits) as (server, core):
                reader = await Client.connect(d.sock)
                lagger = await Client.connect(d.sock)
                await core.wait_for(lambda: len(core.connected()) == 2)
                rconn, lconn = core.connected()
                received: list[int] = []
                for start in range(0, total, batch):
                    server.deliver_notifications([Notify((rconn, lconn), "event", {"seq": seq, "text": payload})
                                                  for seq in range(start, start + batch)])
                    for _ in range(batch):  # the reading observer keeps up
                        received.append((await reader.recv())["params"]["seq"])
                assert received == list(range(total))
                stats = server.stats(lconn)
                assert stats is not None and stats.dropped_notifications > 0
                one = len(_line("event", {"seq": total, "text": payload}))
                assert stats.peak_outbox_bytes <= cap + 100  # the cap, plus at most the marker
                assert stats.peak_transport_bytes <= TRANSPORT_HIGH_WATER + max(WRITE_BATCH, one)
                prefix: list[int] = []
                while (msg := await lagger.recv())["method"] == "event":
                    prefix.append(msg["params"]["seq"])
                assert msg == {"jsonrpc": "2.0", "method": "marker",
                               "params": {"reason": "lagging", "dropped": total - len(prefix)}}
                assert prefix == list(range(len(prefix)))
                assert stats.dropped_notifications == total - len(prefix)
                # After the marker, joined runs flow again, whole.
                server.deliver_notifications([Notify((lconn,), "event", {"seq": total + i}) for i in range(3)])
                assert [(await lagger.recv())["params"]["seq"] for _ in range(3)] == [total, total + 1, total + 2]
                await reader.aclose()
                await lagger.aclose()

    run(main())


def test_near_the_cap_a_joined_run_is_queued_line_by_line_so_the_cap_drops_what_it_always_dropped() -> None:
    """An outbox that cannot take a whole joined run takes its lines one at a time: with a cap of 3 lines and a
    connection that never reads past its kernel buffer, the marker counts every line not written, and the
    outbox never holds more than the cap plus the marker."""
    cap = 4096
    limits = ServerLimits(max_outbox_bytes=cap)
    text = "z" * 1200

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock, limits=limits) as (server, core):
                lagger = await Client.connect(d.sock)
                await core.wait_for(lambda: len(core.connected()) == 1)
                (conn,) = core.connected()
                total = 0
                for _ in range(400):  # until the transport pauses and the outbox overflows
                    server.deliver_notifications([Notify((conn,), "event", {"seq": total + i, "text": text})
                                                  for i in range(5)])
                    total += 5
                stats = server.stats(conn)
                assert stats is not None and stats.dropped_notifications > 0
                assert stats.peak_outbox_bytes <= cap + 100
                prefix: list[int] = []
                while (msg := await lagger.recv())["method"] == "event":
                    prefix.append(msg["params"]["seq"])
                assert msg["params"] == {"reason": "lagging", "dropped": total - len(prefix)}
                assert prefix == list(range(len(prefix)))
                await lagger.aclose()

    run(main())


def test_the_server_writes_the_cores_records_byte_for_byte_as_the_protocols_json_encoder_would() -> None:
    """The fan-out encodes with msgspec (issue 34; `_jsonrpc` rule 5): for the values the core's records hold
    (strings with every control character, non-ASCII, U+2028/2029, a lone surrogate, read-only mappings,
    tuples, ints past 64 bits, clock-like and small floats) each observer reads exactly `encode_notification`'s
    bytes; a float json writes with an exponent is the same number in both, spelled without the sign."""
    import random
    from types import MappingProxyType

    from mosaic.controller.protocol import encode_notification

    rng = random.Random(34)
    texts = ["".join(chr(c) for c in range(32)), "h\u00e9llo \u2028 \u2029 \U0001f600", "a\ud800b", '"\\/',
             "\x7f\x80\xff"] + ["".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0xD800),
                                                        rng.randrange(0xE000, 0x110000)])) for _ in range(40))
                                for _ in range(20)]
    numbers = [0, -1, 2**63, -(2**70), 0.0, -0.0, 1796597285.0239248, 0.1, 123.456, 1e15, 9999999999999998.0,
               0.0001] + [rng.uniform(-1e9, 1e9) for _ in range(40)] + [rng.randrange(-2**80, 2**80) for _ in range(20)]
    records: list[tuple[str, object]] = []
    for i, text in enumerate(texts):
        records.append(("record", {"type": "receipt", "state": "finished", "updatedAt": numbers[i % len(numbers)],
                                   "text": text, "fences": (), "limits": MappingProxyType({"k": MappingProxyType(
                                       {"v": numbers[(i * 7) % len(numbers)], "t": text})}), "none": None,
                                   "flags": [True, False, None], "nested": [[{"n": n} for n in numbers[i:i + 3]]]}))
    records += [("event", {"payload": {"value": n}}) for n in numbers]
    exponents = [1e16, 2.5e-05, -1.5e300, 5e-324]

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock) as (server, core):
                client = await Client.connect(d.sock)
                await core.wait_for(lambda: len(core.connected()) == 1)
                to = tuple(core.connected())
                for method, params in records:
                    server.deliver(Notify(to, method, params))
                server.deliver_notifications([Notify(to, method, params) for method, params in records])
                server.deliver(Notify(to, "event", {"exponents": exponents}))
                server.deliver(Notify(to, "end", {}))
                expected = b"".join(encode_notification(m, p) for m, p in records)
                got = await _read_to_end(client)
                assert got.startswith(expected + expected)
                last = got[2 * len(expected):]
                assert json.loads(last) == json.loads(encode_notification("event", {"exponents": exponents}))
                await client.aclose()

    run(main())
