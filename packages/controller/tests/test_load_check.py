"""K8 at any length (issue 27): the lifecycle's load check proves the loaded file and leaf with two flat
answers, `get_state` and `get_entries since=<recorded leaf>` (its `leafId`, and only the entries after the
recorded leaf), never `get_tree`, whose answer nests two levels per entry of a chain and which Pi itself
fails past its stack limit. K8's meaning is unchanged: the engine loaded the recorded file and leaf, Pi's
own startup append allowed; anything else fences `preflight` with the reason.

A `LaunchingController` launches pi-rpc's fake engine (held to the real Pi by the conformance suite, get_tree at
depth included) through the process-group launcher (no cgroup, no root); the commands the load check
wrote and their answers are read from the link's events (`Hooks.on_engine_events`). The engine is killed
by its recorded pid at the end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mosaic.cgroup_cohort import FixtureVerifier, PgroupLauncher
from mosaic.controller import Hooks, LaunchingController, PiSpec, Placement
from mosaic.controller.testing import SESSION_HEADER, FixtureTree, RawClient, private_socket_dir
from mosaic.pi_rpc.link import CommandWritten, OutcomeKnown
from mosaic.pi_rpc.testing import child_env
from mosaic.pi_rpc.testing.sessions import session_lines
from mosaic.safe_open import process_ref

FAKE = (sys.executable, "-m", "mosaic.pi_rpc.testing.fake_engine")


@pytest.fixture
def tree(tmp_path: Path) -> FixtureTree:
    return FixtureTree(tmp_path / "fx")


def generated(tree: FixtureTree, entries: int) -> str:
    return "".join(line + "\n" for line in session_lines(cwd=str(tree.project), session_id=tree.session_id,
                                                         entries=entries))


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_bytes().split(b"\n") if x]


class Launched:
    """One controller on the fake engine: what its load check wrote and read, its binding and fences."""

    def __init__(self, tree: FixtureTree, sockets: str) -> None:
        self.commands: list[dict[str, Any]] = []
        self.answers: dict[str, dict[str, Any]] = {}

        def seen(batch: list[Any]) -> None:
            for event in batch:
                if isinstance(event, CommandWritten):
                    self.commands.append(dict(event.command.record))
                elif isinstance(event, OutcomeKnown) and event.command.response is not None:
                    self.answers[event.command.id] = dict(event.command.response)

        self.controller = LaunchingController(
            Placement(**tree.placement(sockets)), PiSpec(env=tree.engine_env(**child_env()), command=FAKE),
            PgroupLauncher(), verifier=FixtureVerifier(), hooks=Hooks(on_engine_events=seen))

    def answer(self, ctype: str) -> dict[str, Any]:
        """The answer to the first command of `ctype` (the load check's; the takeover drift check follows)."""
        command = next(c for c in self.commands if c["type"] == ctype)
        return self.answers[command["id"]]


@contextlib.contextmanager
def launched(tree: FixtureTree) -> Iterator[Launched]:
    with private_socket_dir() as sockets:
        run = Launched(tree, sockets)
        try:
            yield run
        finally:
            execution = run.controller.execution
            ref = execution.ref if execution is not None else None
            if ref is not None and ref.engine is not None:
                with contextlib.suppress(ProcessLookupError, OSError):
                    if process_ref(ref.engine.pid) == ref.engine:  # the engine this test started, not a reused pid
                        os.killpg(ref.engine.pid, signal.SIGKILL)


def start_and_observe(run: Launched, prompt: bool = False) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        await run.controller.start()
        try:
            c = await RawClient.connect(run.controller.socket_path)
            observed = (await c.call("observe"))["result"]
            out = {"binding": observed["binding"], "fences": dict(run.controller.core.fences)}
            if prompt:
                took = await c.call("acquire-recovery-control", incarnation=observed["incarnation"])
                auth = {"incarnation": observed["incarnation"], "generation": took["result"]["generation"]}
                out["prompt"] = await c.call("prompt", **auth, clientRequestId="p", text="hello")
            await c.close()
            return out
        finally:
            await run.controller.aclose()

    return asyncio.run(main())


def test_K8_the_load_check_proves_the_leaf_of_a_3000_entry_chain_with_two_flat_answers(tree: FixtureTree) -> None:
    tree.make((os.getuid(), os.getgid()), seed=generated(tree, 3000))
    leaf = lines_of(tree.session)[-1]["id"]
    with launched(tree) as run:
        out = start_and_observe(run)
    binding = out["binding"]
    assert (binding["state"], binding["admission"], binding["fences"]) == ("active", "open", []), out
    # Exactly two queries before admission, both flat: the answer holds the entries after the recorded leaf
    # (none: Pi appended nothing at start, the branch has a thinking entry) and Pi's leafId.
    check = [c for c in run.commands if c["type"] in ("get_state", "get_entries", "get_tree")]
    assert [c["type"] for c in check[:2]] == ["get_state", "get_entries"]
    assert check[1].get("since") == leaf
    assert run.answers[check[1]["id"]]["data"] == {"entries": [], "leafId": leaf}
    assert not any(c["type"] == "get_tree" for c in run.commands)
    assert run.answer("get_state")["data"]["sessionId"] == tree.session_id


def test_K8_pi_startup_append_after_the_recorded_leaf_is_the_engines_own(tree: FixtureTree) -> None:
    # Messages and no thinking entry on the branch: Pi appends a thinking_level_change, a child of the
    # recorded leaf, at start (FACTS (d) K3). The answer since the recorded leaf holds exactly it.
    header = SESSION_HEADER.format(id=tree.session_id, cwd=tree.project)
    body = [line for line in session_lines(cwd=str(tree.project), session_id=tree.session_id, entries=12)][1:]
    turns = [json.loads(x) for x in body if json.loads(x)["type"] == "message"]
    parent = None
    for entry in turns:
        entry["parentId"], parent = parent, entry["id"]
    tree.make((os.getuid(), os.getgid()), seed=header + "".join(json.dumps(e) + "\n" for e in turns))
    recorded = turns[-1]["id"]
    with launched(tree) as run:
        out = start_and_observe(run)
    assert (out["binding"]["admission"], out["binding"]["fences"]) == ("open", [])
    (appended,) = run.answer("get_entries")["data"]["entries"]
    assert appended["type"] == "thinking_level_change" and appended["parentId"] == recorded
    assert run.answer("get_entries")["data"]["leafId"] == appended["id"] == lines_of(tree.session)[-1]["id"]


def test_K8_a_header_only_session_loads_with_the_startup_append_alone(tree: FixtureTree) -> None:
    tree.make((os.getuid(), os.getgid()))  # the header and nothing else: nothing is recorded as the leaf
    with launched(tree) as run:
        out = start_and_observe(run)
    assert (out["binding"]["admission"], out["binding"]["fences"]) == ("open", [])
    query = next(c for c in run.commands if c["type"] == "get_entries")
    assert "since" not in query  # no recorded leaf: every entry, which can only be Pi's startup append
    assert [e["type"] for e in run.answer("get_entries")["data"]["entries"]] == ["model_change",
                                                                                "thinking_level_change"]


def test_K8_another_leaf_after_the_recorded_one_fences_preflight_with_the_reason(tree: FixtureTree) -> None:
    tree.make((os.getuid(), os.getgid()), seed=generated(tree, 800))
    recorded = lines_of(tree.session)[-1]["id"]
    with launched(tree) as run:
        # Another writer appends after the controller read the leaf, before the engine loads the file.
        foreign = {"type": "custom", "customType": "foreign", "data": {}, "id": "e0e0e0e0", "parentId": recorded,
                   "timestamp": "2026-12-01T00:00:01.000Z"}
        with open(tree.session, "a") as f:
            f.write(json.dumps(foreign) + "\n")
        out = start_and_observe(run, prompt=True)
    assert (out["binding"]["state"], out["binding"]["admission"]) == ("uncertain", "closed")
    assert out["fences"]["preflight"] == f"the engine loaded leaf 'e0e0e0e0', not the recorded {recorded!r} (K8)"
    assert out["prompt"]["error"]["data"]["refusal"]["code"] == "preflight"
    assert run.answer("get_entries")["data"]["entries"] == [foreign]


def test_K8_a_recorded_leaf_the_engine_does_not_hold_fences_preflight(tree: FixtureTree) -> None:
    tree.make((os.getuid(), os.getgid()), seed=generated(tree, 800))
    recorded = lines_of(tree.session)[-1]["id"]
    with launched(tree) as run:
        # The last entry is gone by the time the engine loads the file: Pi has no entry with the recorded id.
        data = tree.session.read_bytes()
        tree.session.write_bytes(data[:data.rstrip(b"\n").rfind(b"\n") + 1])
        out = start_and_observe(run)
    assert out["binding"]["admission"] == "closed"
    assert out["fences"]["preflight"] == (f"the engine's entries do not hold the recorded leaf {recorded!r} "
                                          f"(Entry not found: {recorded})")
