"""The core under random interleavings (beyond the brief's fixture list): client commands, engine
records and responses, write failures and timer expiries in any order, with the invariants checked after
every step. The engine here is not a faithful Pi (it may answer in orders Pi never would): the core must
keep its promises whatever the engine does.

Invariants: never two engine writes for one slot; zero engine bytes after poison; no prompt written while
the slot is held or a run streams; never dispatched under two generations (each prompt is the controller's,
at its generation); the slot released only by reconciliation (its receipt settled); receipts move only
along CHAT-01's transitions, never to "unsent" (the core raises otherwise); every record validates (the
harness validates every one).
"""

from __future__ import annotations

from typing import Any

from core_harness import EXECUTION, Harness, queues, run_end, run_start, state
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mosaic.controller.core import EngineEvents
from mosaic.controller.tables import RECEIPT_TRANSITIONS

TEXTS = st.sampled_from(["hello", "hello", "hello", " /goal x", "/skill:x", "first\n/goal", "!bang", "@file", "",
                         "esc \x1b[0m \u2028"])
MOSTLY = st.sampled_from([True, True, True, True, False])
RARELY = st.integers(0, 15).map(lambda n: n == 0)  # what ends the run for good (poison, exit, stop) stays rare


class CoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.h.auto_flush = False
        self.poisoned_at: int | None = None
        self.admitted: list[tuple[str, int]] = []  # (conn, generation) of each admitted prompt
        self.receipts: dict[str, str] = {}
        for conn in ("a", "b"):
            self.h.observe(conn)
        self.h.call("a", "takeover", expectedGeneration=1)  # start with a controller: admission is reachable

    # -- clients

    @rule(conn=st.sampled_from(["a", "b"]))
    def takeover(self, conn: str) -> None:
        self.h.call(conn, "takeover", expectedGeneration=self.h.core.generation)

    @rule(mine=MOSTLY, text=TEXTS, stale=MOSTLY.map(lambda x: not x))
    def prompt(self, mine: bool, text: str, stale: bool) -> None:
        core = self.h.core
        conn = core.controller if mine and core.controller in ("a", "b") else "b" if core.controller == "a" else "a"
        was_free = core.slot is None and not core.run.active
        controller, generation = core.controller, core.generation
        before = len(core.requests)
        result = self.h.prompt(conn, text, generation=generation - 1 if stale else generation)
        if len(core.requests) > before:
            assert isinstance(result, dict) and result["outcome"] == "admitted"
            assert was_free, "a prompt was admitted while the slot was held or a run streamed"
            assert conn == controller and not stale, "dispatched by someone who is not the controller"
            self.admitted.append((conn, generation))

    @rule(conn=st.sampled_from(["a", "b"]), go=st.integers(0, 3).map(lambda n: n == 0))
    def interrupt(self, conn: str, go: bool) -> None:
        if go:
            self.h.call(conn, "interrupt", generation=self.h.core.generation)

    @rule(conn=st.sampled_from(["a", "b"]), go=RARELY)
    def force_stop(self, conn: str, go: bool) -> None:
        if not go:
            return
        issued = self.h.call(conn, "issue-confirmation", operation="force-stop")
        if isinstance(issued, dict):
            cid = issued["confirmation"]["confirmation"]
            self.h.call(conn, "answer-confirmation", confirmation=cid, answer="confirm")
            self.h.call(conn, "force-stop", confirmation=cid)

    @rule(conn=st.sampled_from(["a", "b"]))
    def reconnect(self, conn: str) -> None:
        self.h.disconnect(conn)
        self.h.connect(conn)  # a connection the core admits again (a closed one is never a connection of it)
        self.h.observe(conn)

    @rule(state_=st.sampled_from(["stopped", "uncertain"]))
    def force_stop_done(self, state_: str) -> None:
        pending = [e for e in self.h.effect("force-stop") if e.effect_id not in self._done]
        if pending:
            self._done.add(pending[0].effect_id)
            self.h.finish_effect(pending[0], state=state_)

    _done: set[str] = set()

    # -- the engine

    @rule(broken=RARELY)
    def write(self, broken: bool) -> None:
        whole = not broken
        link = self.h.core.link
        command = link.next_write()
        if command is None:
            return
        accepted = len(command.data) if whole else len(command.data) // 2
        error = None if whole else BrokenPipeError(32, "EPIPE")
        self.h.engine_bytes += command.data[:accepted]
        self.h.feed(EngineEvents(EXECUTION, link.write_done(command, accepted=accepted, error=error, now=self.h.now)))

    @precondition(lambda self: not self.h.core.link.output_closed)
    @rule(data=st.data())
    def respond(self, data: Any) -> None:
        self.write(False)  # Pi reads what is in the pipe before it answers
        written = [c for c in self.h.core.link.in_flight if c.outcome.value == "written"]
        if not written:
            return
        command = data.draw(st.sampled_from(written))
        success = data.draw(MOSTLY) if command.type == "prompt" else True
        fields: dict[str, Any] = {}
        if command.type == "get_state":
            fields["data"] = state(data.draw(st.booleans()))
        elif command.type == "clear_queue":
            fields["data"] = queues(follow_up=data.draw(st.sampled_from([[], [], ["ext"]])))
        if not success:
            fields["error"] = "Agent is already processing."
        self.h.engine({"id": command.id, "type": "response", "command": command.type, "success": success, **fields})

    @precondition(lambda self: not self.h.core.link.output_closed)
    @rule(kind=st.sampled_from(["start", "user", "delta", "settle", "aborted-end", "unknown", "tool", "dialog"]))
    def native(self, kind: str) -> None:
        records = {
            "start": [{"type": "agent_start"}],
            "user": run_start("hello")[2:4],
            "delta": [{"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0,
                                                                           "delta": "x"}}],
            "settle": [{"type": "agent_settled"}],
            "aborted-end": run_end("x", "aborted"),
            "unknown": [{"type": "mystery"}],
            "tool": [{"type": "tool_execution_start", "toolCallId": "t", "toolName": "bash", "args": {}}],
            "dialog": [{"type": "extension_ui_request", "id": "d", "method": "input", "title": "t"}],
        }[kind]
        self.h.engine(*records)

    @precondition(lambda self: not self.h.core.link.output_closed)
    @rule(user=MOSTLY, settle=st.booleans())
    def pi_runs(self, user: bool, settle: bool) -> None:
        """A run as Pi streams one: agent_start, the user message (or a throw before it), maybe the end."""
        records = [{"type": "agent_start"}, *(run_start("hello")[1:4] if user else [])]
        if settle:
            records += run_end("done")
        self.h.engine(*records)

    @rule(seconds=st.sampled_from([0.5, 1.0, 1.0, 2.0, 2.0, 11.0, 31.0, 61.0]))
    def advance(self, seconds: float) -> None:
        self.h.advance(seconds)

    @precondition(lambda self: not self.h.core.link.output_closed)
    @rule(go=RARELY)
    def engine_exits(self, go: bool) -> None:
        if go:
            self.h.feed(EngineEvents(EXECUTION, self.h.core.link.output_ended(now=self.h.now)))

    # -- invariants

    @invariant()
    def one_write_per_admitted_prompt(self) -> None:
        prompts = [r for r in self.h.written() if r["type"] == "prompt"]
        assert len(prompts) <= len(self.admitted)
        assert len(self.h.core.requests) == len(self.admitted)

    @invariant()
    def nothing_written_after_poison(self) -> None:
        if self.h.core.link.poisoned is not None:
            if self.poisoned_at is None:
                self.poisoned_at = len(self.h.engine_bytes)
            assert len(self.h.engine_bytes) == self.poisoned_at
            assert self.h.core.link.next_write() is None

    @invariant()
    def slot_released_only_by_reconciliation(self) -> None:
        for request in self.h.core.requests.values():
            held = self.h.core.slot is not None and self.h.core.slot.request is request
            if not held:
                assert request.settled, f"{request.request_id} left the slot as {request.receipt}"
            old = self.receipts.get(request.request_id)
            if old is not None and old != request.receipt:
                assert (old, request.receipt) in RECEIPT_TRANSITIONS or _reachable(old, request.receipt)
            self.receipts[request.request_id] = request.receipt

    @invariant()
    def admission_closed_unless_active(self) -> None:
        core = self.h.core
        if core.binding_state != "active" or core.link.poisoned is not None:
            assert not core.admission_open


def _reachable(old: str, new: str) -> bool:
    """Several moves may happen in one step: `new` must be reachable from `old` along the table."""
    frontier, seen = {old}, set()
    while frontier:
        state_ = frontier.pop()
        seen.add(state_)
        for a, b in RECEIPT_TRANSITIONS:
            if a == state_ and b not in seen:
                if b == new:
                    return True
                frontier.add(b)
    return False


CoreMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
test_core_under_random_interleavings = CoreMachine.TestCase
