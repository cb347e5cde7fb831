"""Shared fixtures for the writer-claim tests: identities, a cohort reference, a recording probe and
liveness, a barrier hook set later, the lifecycle scenario, and an independent reader of the revision
chains.

The independent reader parses revision files with `json` and the package's JSON Schema only; it never
calls the package's codec or decision code, so a bug there cannot hide from it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import selectors
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from mosaic.safe_open import HostIdentity, ProcessRef, canonical_json, sha256_digest
from mosaic.writer_claim import (
    BarrierHook,
    Binding,
    Claim,
    ClaimStore,
    Pins,
    ProofKind,
    ProofRef,
    RestartReport,
    Revision,
    SeatKey,
    SessionKey,
    State,
    UnitObservation,
)
from mosaic.writer_claim.internals import encode_revision, unit_name_for
from mosaic.writer_claim.model import Owner, ProcessIdentity, Writer
from mosaic.writer_claim.store import Barrier


def id128(tag: str) -> str:
    """A made-up machine or boot ID in the shared form (32 lowercase hex), named by `tag`."""
    return hashlib.sha256(tag.encode()).hexdigest()[:32]


def host(machine: str, boot: str) -> HostIdentity:
    """A made-up host: machine `machine`, boot `boot` (tags, turned into 32-hex IDs)."""
    return HostIdentity(id128("machine:" + machine), id128("boot:" + boot))


HOST = host("a", "1")
OTHER_BOOT = host("a", "2")
OTHER_MACHINE = host("b", "3")
ENGINE = ProcessRef(4242, 99)

SEAT = SeatKey("seat-a", "/fixtures/project", "main")
SEAT2 = SeatKey("seat-b", "/fixtures/project", "main")
SESSION = SessionKey("pi", "01a22a58-944f-7072-a9ab-f808835fc6a2")
SESSION2 = SessionKey("pi", "01a22a58-944f-7072-a9ab-f808835fc6b3")
PINS = Pins("0.85.1", "ab" * 32, "sha256:" + "cd" * 32)
BINDING = Binding("binding-1", "pi", "pi-conversation-1", "main", "leaf-1", PINS)

FAKE_NS = "pid:[test]"


def fake_process(pid: int) -> ProcessIdentity:
    return ProcessIdentity(pid, 10_000 + pid, FAKE_NS)


def digest(tag: str) -> str:
    return "sha256:" + hashlib.sha256(tag.encode()).hexdigest()


def cohort_proof(tag: str = "stop-1") -> ProofRef:
    return ProofRef(ProofKind.COHORT, digest("cohort:" + tag), {"stop": tag, "membershipComplete": True})


def cohort_ref(claim_id: str, on: HostIdentity, invocation_id: str, engine: ProcessRef = ENGINE) -> dict[str, Any]:
    """A cohort reference shaped like cgroup-cohort's `CohortRef.to_dict()` for a scope launch (this
    package treats it as opaque; the shape only makes the tests read like the real thing)."""
    unit = f"cohort-{claim_id}.scope"
    return {
        "kind": "scope",
        "claimId": claim_id,
        "unit": unit,
        "machineId": on.machine_id,
        "bootId": on.boot_id,
        "engine": engine.to_dict(),
        "socketPath": f"/run/user/1000/mosaic/{claim_id}.sock",
        "invocationId": invocation_id,
        "cgroupPath": f"/user.slice/user-1000.slice/user@1000.service/app.slice/{unit}/engine",
        "unitCgroupId": 7001,
        "engineCgroupId": 7002,
        "shim": {"pid": 4241, "startTime": 98},
        "pgid": None,
        "containment": {"held": True, "method": "nsdelegate", "attempts": [["/", "EACCES"]]},
        "features": ["cgroup.freeze", "cgroup.kill"],
    }


class Liveness:
    """Owner liveness by pid: `alive` pids are alive, `unknown` pids cannot be told, the rest are gone."""

    def __init__(self, alive: set[int] | None = None, unknown: set[int] | None = None) -> None:
        self.alive = set(alive or ())
        self.unknown = set(unknown or ())
        self.asked: list[int] = []

    def owner_alive(self, owner: Owner) -> bool | None:
        self.asked.append(owner.process.pid)
        if owner.process.pid in self.unknown:
            return None
        return owner.process.pid in self.alive


class Probe:
    """A cohort probe that answers unit questions from a table, issues boot proofs from what the claim
    stores, and records every question."""

    def __init__(self, units: dict[str, str] | None = None, *, default: str = "absent",
                 boot_proofs: bool = True) -> None:
        self.units = dict(units or {})
        self.default = default
        self.boot_proofs = boot_proofs
        self.unit_questions: list[str] = []
        self.boot_questions: list[str] = []
        self.boot_revisions: list[Revision] = []

    def observe_unit(self, unit_name: str) -> UnitObservation:
        self.unit_questions.append(unit_name)
        presence = self.units.get(unit_name, self.default)
        return UnitObservation(unit_name, presence, {"source": "test-probe"})  # type: ignore[arg-type]

    def boot_proof(self, revision: Revision, host: HostIdentity) -> ProofRef | None:
        """As `CohortProbe.boot_proof` promises: from the stored cohort reference when the claim recorded
        one (its unit, invocation ID and boot), else from the claim's unit name and host."""
        self.boot_questions.append(revision.claim_id)
        self.boot_revisions.append(revision)
        if not self.boot_proofs:
            return None
        detail: dict[str, str | int | bool | None]
        if revision.cohort is not None:
            c = revision.cohort
            detail = {"basis": "cohort", "unit": c["unit"], "invocationId": c["invocationId"],  # type: ignore[dict-item]
                      "recordedBoot": c["bootId"]}  # type: ignore[dict-item]
        else:
            detail = {"basis": "unit-name", "unit": revision.unit_name, "invocationId": None,
                      "recordedBoot": revision.host.boot_id}
        detail.update({"currentBoot": host.boot_id, "claimId": revision.claim_id})
        return ProofRef(ProofKind.BOOT, sha256_digest(canonical_json(detail)), detail)


class Hook:
    """A barrier hook whose action a test sets after the store exists (None: do nothing), so a crash or
    an interleaving can be armed at an exact later step."""

    def __init__(self, action: BarrierHook | None = None) -> None:
        self.action = action

    def __call__(self, b: Barrier) -> None:
        if self.action is not None:
            self.action(b)


def make_revision(**changes: object) -> Revision:
    """A reserved revision 1 of the seat key of a made-up claim (owner pid 5), with `changes` applied."""
    claim_id = "claim-" + "a" * 32
    owner = Owner(fake_process(5), "inc")
    base = Revision(
        key="seat", number=1, seat=SEAT, session=SESSION, claim_id=claim_id, state=State.RESERVED,
        binding=BINDING, host=HOST, owner=owner, writer=Writer(owner.process, "inc", "owner"),
        unit_name=unit_name_for(claim_id), spawn_marker=False, invocation_id=None, engine=None, cohort=None,
        generation=1, stop=None, proof=None, reason="reserve", published_at="2026-01-01T00:00:00.000Z",
    )
    return base.evolve(**changes)


def make_store(root: Path | str, *, pid: int = 1001, host: HostIdentity = HOST,
               liveness: Liveness | None = None, **kw: Any) -> ClaimStore:
    """A store with a fake owner process (pid `pid`) whose liveness the test decides."""
    return ClaimStore(root, host=host, process=fake_process(pid), incarnation=f"inc-{pid}",
                      liveness=liveness if liveness is not None else Liveness(), **kw)


# -- the lifecycle scenario ----------------------------------------------------------------------------------

Ack = tuple[str, str]  # (claim id, step)

# Steps acknowledged by the scenario, in order. "spawned" and "cohort-stopped" are the caller's own acts
# (the engine exists from "spawned" until "cohort-stopped"), not store calls.
STEPS = ("acquire", "spawn-marker", "spawned", "active", "stopping", "cohort-stopped", "released")


def run_lifecycle(store: ClaimStore, ack: Callable[[str, str], None], *, seat: SeatKey = SEAT,
                  session: SessionKey = SESSION, tag: str = "1") -> str:
    """acquire -> spawn marker -> (spawn) -> active with the cohort reference -> stopping -> (cohort
    stopped) -> release."""
    c = store.acquire(seat, session, BINDING)
    ack(c.claim_id, "acquire")
    return _run_from_spawn(c, store, ack, tag)


def _run_from_spawn(c: Claim, store: ClaimStore, ack: Callable[[str, str], None], tag: str) -> str:
    """spawn marker -> (spawn) -> active with the cohort reference -> stopping -> (cohort stopped) ->
    release, acknowledging each step."""
    c.mark_spawn()
    ack(c.claim_id, "spawn-marker")
    ack(c.claim_id, "spawned")
    c.activate(invocation_id=f"inv-{tag}", engine=ENGINE,
               cohort=cohort_ref(c.claim_id, store.host, f"inv-{tag}"))
    ack(c.claim_id, "active")
    c.begin_stop(f"stop-{tag}", confirmation=f"conf-{tag}", phase="kill")
    ack(c.claim_id, "stopping")
    ack(c.claim_id, "cohort-stopped")
    c.release(cohort_proof(f"stop-{tag}"))
    ack(c.claim_id, "released")
    return c.claim_id


def run_recovery(reserver: ClaimStore, launcher: ClaimStore, ack: Callable[[str, str], None], *,
                 seat: SeatKey = SEAT, session: SessionKey = SESSION, tag: str = "1",
                 eligibility: str = "elig-1") -> str:
    """A recovery (§6 "Recover"): `reserver` reserves the pair for eligibility `eligibility`, `launcher`
    takes it over with it, then runs the rest of the lifecycle as `run_lifecycle` (spawn marker -> (spawn)
    -> active with the cohort reference -> stopping -> (cohort stopped) -> release)."""
    reserved = reserver.acquire(seat, session, BINDING, generation=2, eligibility=eligibility)
    ack(reserved.claim_id, "acquire")
    c = launcher.take_over(seat, session, reserved.claim_id, eligibility=eligibility)
    ack(c.claim_id, "take-over")
    return _run_from_spawn(c, launcher, ack, tag)


def acked_steps(acks: list[Ack]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for claim_id, step in acks:
        out.setdefault(claim_id, set()).add(step)
    return out


def unit_world(acks: list[Ack], seat: SeatKey = SEAT, session: SessionKey = SESSION,
               *, collected: bool = False) -> dict[str, str]:
    """Which intended units exist after a crash, from what was acknowledged: a claim's unit exists from
    "spawned" until "cohort-stopped". With `collected`, the engine exited and its scope was collected
    before the restart (W20): no unit exists at all."""
    units: dict[str, str] = {}
    for claim_id, steps in acked_steps(acks).items():
        name = f"cohort-{claim_id}.scope"
        units[name] = "present" if ("spawned" in steps and "cohort-stopped" not in steps and not collected) \
            else "absent"
    return units


# -- the independent reader ----------------------------------------------------------------------------------

REV_RE = re.compile(r"^r([0-9]{10})\.json$")
SCHEMA = json.loads(resources.files("mosaic.writer_claim").joinpath("revision.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


@functools.lru_cache(maxsize=4096)
def _schema_valid(data: bytes) -> bool:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(value, dict) and VALIDATOR.is_valid(value)


def parse_raw(data: bytes) -> dict[str, Any] | None:
    """The record in `data`, or None when it is not a complete, schema-valid revision."""
    if not _schema_valid(data):
        return None
    value: dict[str, Any] = json.loads(data)
    return value


def raw_chain(root: Path, dirname: str) -> list[tuple[int, bytes]]:
    d = Path(root) / dirname
    if not d.is_dir():
        return []
    out = []
    for name in os.listdir(d):
        m = REV_RE.match(name)
        if m:
            out.append((int(m.group(1)), (d / name).read_bytes()))
    return sorted(out)


def raw_records(root: Path, dirname: str) -> list[dict[str, Any] | None]:
    return [parse_raw(data) for _, data in raw_chain(root, dirname)]


def raw_head(root: Path, dirname: str) -> tuple[int, dict[str, Any] | None] | None:
    chain = raw_chain(root, dirname)
    if not chain:
        return None
    n, data = chain[-1]
    return n, parse_raw(data)


def raw_is_held(rec: dict[str, Any] | None) -> bool:
    return rec is None or not (rec["state"] == "stopped" and rec["proof"] is not None)


def raw_holders(root: Path, seat: SeatKey, session: SessionKey) -> set[str]:
    """Claim IDs holding either key of the pair ("?" for an unreadable head)."""
    out: set[str] = set()
    for key in (seat, session):
        head = raw_head(root, key.dirname)
        if head is not None and raw_is_held(head[1]):
            out.add(head[1]["claimId"] if head[1] is not None else "?")
    return out


def completeness_problems(root: Path) -> list[str]:
    """Every visible revision must be complete and sit where it says: schema-valid, its number equal to
    its file name's, numbered 1..n with no gap."""
    problems = []
    for d in sorted(Path(root).iterdir()):
        if not d.is_dir():
            continue
        chain = raw_chain(root, d.name)
        numbers = [n for n, _ in chain]
        if numbers != list(range(1, len(numbers) + 1)):
            problems.append(f"{d.name}: revision numbers {numbers} are not 1..n")
        for n, data in chain:
            rec = parse_raw(data)
            if rec is None:
                problems.append(f"{d.name}/r{n:010d}.json is not a complete revision: {data[:60]!r}")
            elif rec["revision"] != n or not d.name.startswith(rec["key"] + "-"):
                problems.append(f"{d.name}/r{n:010d}.json says revision {rec['revision']} of a {rec['key']} key")
    return problems


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root, by relative path (to prove that nothing was written)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def write_raw(root: Path, dirname: str, number: int, data: bytes) -> None:
    """Another writer's file at r<number>.json (damage, or a record this package would never write)."""
    d = Path(root) / dirname
    d.mkdir(exist_ok=True)
    fd = os.open(d / f"r{number:010d}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def write_revision(root: Path, rev: Revision) -> None:
    write_raw(root, rev.dirname, rev.number, encode_revision(rev))


# -- the restart invariants (W5) -------------------------------------------------------------------------------


@dataclass
class Checked:
    """What one invariant check saw (for coverage assertions)."""

    outcomes: list[str] = field(default_factory=list)
    free_after: bool = False


def check_restart(root: Path, acks: list[Ack], report: RestartReport, pre_holders: set[str], *,
                  seat: SeatKey = SEAT, session: SessionKey = SESSION,
                  rerun: Callable[[], RestartReport] | None = None) -> Checked:
    """The W5 invariants after a crash and a restart classification:

    - only complete revisions are visible (before and after: the restart adds only complete ones);
    - never two holders, before or after;
    - never a lost claim: an acknowledged acquisition is visible until its cohort was stopped, and a claim
      whose spawn marker was acknowledged is never freed without a cohort or boot proof;
    - a half-done pair is completed or classified under its claim ID: after the restart both keys agree,
      and a held claim of a dead owner is uncertain or stopping, never reserved or active again (but for
      a recovery reservation waiting for its launcher, below);
    - no no-unit stop for a claim that ever published a spawn marker;
    - an eligibility (§6 "Recover") is the same in every revision of its claim from the reservation on,
      turns taken at most once per key and never back, and no spawn marker is published while it is
      pending; a claim left reserved after the restart is one whose eligibility is pending on both keys
      (eligibility-pending: whoever is alive, it waits for its launcher or a release with a proof);
    - a cohort reference, once published on either key, is in every later revision of its claim on both
      keys, unchanged (a restarted controller force stops from it);
    - a second restart publishes nothing;
    - the heads the store found (the restarter, and a store that never looked: README "Finding the head")
      are the listing's highest names.
    """
    problems = completeness_problems(root)
    assert not problems, problems
    with make_store(root, pid=3999) as looker:
        fresh = looker.observe(seat, session)
    for found in (*report.pair.keys(), *fresh.keys()):
        chain = raw_chain(root, found.dirname)
        assert found.head_number == (chain[-1][0] if chain else 0), f"{found.dirname}: head {found.head_number}"
    assert len(pre_holders) <= 1, f"two holders before restart: {pre_holders}"
    post = raw_holders(root, seat, session)
    assert len(post) <= 1, f"two holders after restart: {post}"
    assert "?" not in post
    steps = acked_steps(acks)
    revs: dict[str, list[dict[str, Any]]] = {}
    for key in (seat, session):
        for rec in raw_records(root, key.dirname):
            assert rec is not None
            revs.setdefault(rec["claimId"], []).append(rec)
    for claim_id, done in steps.items():
        if "acquire" in done and "cohort-stopped" not in done:
            assert claim_id in pre_holders, f"acknowledged claim {claim_id} lost before restart ({done})"
    for claim_id, records in revs.items():
        done = steps.get(claim_id, set())
        marker = any(r["spawnMarker"] for r in records) or "spawn-marker" in done
        strong = [r for r in records if r["proof"] is not None and r["proof"]["kind"] in ("cohort-proof", "boot-proof")]
        no_unit = [r for r in records if r["proof"] is not None and r["proof"]["kind"] == "no-unit"]
        assert not (marker and no_unit), f"{claim_id}: a no-unit stop after a spawn marker"
        cohorts = [r["cohort"] for r in records if r["cohort"] is not None]
        assert all(c == cohorts[0] for c in cohorts), f"{claim_id}: the cohort reference changed"
        eligibilities = {r.get("eligibility", {}).get("id") for r in records}
        assert len(eligibilities) == 1, f"{claim_id}: the eligibility changed or was dropped: {eligibilities}"
        for r in records:
            pending = "eligibility" in r and not r["eligibility"]["taken"]
            assert not (pending and r["spawnMarker"]), f"{claim_id}: a spawn marker under a pending eligibility"
        for key in (seat, session):
            chain = [r for r in raw_records(root, key.dirname) if r is not None and r["claimId"] == claim_id]
            first = next((i for i, r in enumerate(chain) if r["cohort"] is not None), len(chain))
            assert all(r["cohort"] is not None for r in chain[first:]), f"{claim_id}: a cohort was dropped"
            taken = [bool(r.get("eligibility", {}).get("taken")) for r in chain]
            assert taken == sorted(taken), f"{claim_id}: an eligibility went from taken back to pending"
        if cohorts and claim_id in post:
            for h in (raw_head(root, k.dirname) for k in (seat, session)):
                if h is not None and h[1] is not None and h[1]["claimId"] == claim_id:
                    assert h[1]["cohort"] == cohorts[0], f"{claim_id}: a held head lacks the cohort"
        if marker and not strong:
            assert claim_id in post, f"{claim_id} had a spawn marker and was freed without a proof"
        heads = [raw_head(root, k.dirname) for k in (seat, session)]
        mine = [h[1] for h in heads if h is not None and h[1] is not None and h[1]["claimId"] == claim_id]
        if claim_id in post:
            states = {r["state"] for r in mine}
            assert len(states) == 1, f"{claim_id}: keys disagree after restart: {states}"
            waiting = len(mine) == 2 and all("eligibility" in r and not r["eligibility"]["taken"]
                                              and not r["spawnMarker"] for r in mine)
            allowed = {"uncertain", "stopping"} | ({"reserved"} if waiting else set())
            assert states <= allowed, f"{claim_id}: a dead owner's claim left {states}"
        if "take-over" in done:
            assert all(r["eligibility"]["taken"] for r in mine), f"{claim_id}: a take-over was undone"
        if claim_id in pre_holders and claim_id not in post:
            assert all(not raw_is_held(r) for r in mine)
    if rerun is not None:
        again = rerun()
        assert again.published == (), f"a second restart published {again.published}"
    return Checked([o.value for o in report.outcomes], report.free)


def read_line(stream: Any, timeout: float = 60.0) -> str:
    """One line from a child's stdout pipe (opened with bufsize=0), waiting at most `timeout` seconds in
    total; a timeout fails the test. Reads byte by byte, so nothing past the line is consumed."""
    fd = stream.fileno()
    deadline = time.monotonic() + timeout
    out = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not out.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise TimeoutError(f"no complete line from the child within {timeout} s (got {bytes(out)!r})")
            b = os.read(fd, 1)
            if not b:
                raise AssertionError(f"the child closed its stdout mid-line (got {bytes(out)!r})")
            out += b
    return out.decode()


# -- forked children -------------------------------------------------------------------------------------------

CHILD_BOUND_S = 120.0


def fork_child(fn: Callable[..., Any], *args: Any) -> tuple[int, int]:
    """Run fn(*args) in a forked child; it returns a JSON-able value sent back through a pipe. Returns the
    child's pid and the pipe's read end, for `collect_children`."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            out = json.dumps(fn(*args)).encode()
            while out:
                out = out[os.write(w, out):]
        except BaseException as e:  # noqa: BLE001 - reported to the parent, never raised into pytest
            os.write(w, json.dumps({"error": repr(e)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def race(fn: Callable[..., Any], *args: Any, n: int = 8) -> list[Any]:
    """`fn(*args)` in `n` forked children that all wait at one gate and start together when the parent opens
    it; their results (`collect_children`)."""
    go_r, go_w = os.pipe()

    def at_the_gate() -> Any:
        os.read(go_r, 1)
        return fn(*args)
    children = [fork_child(at_the_gate) for _ in range(n)]
    os.write(go_w, b"x" * n)
    os.close(go_w)
    results = collect_children(children)
    os.close(go_r)
    return results


def collect_children(children: list[tuple[int, int]]) -> list[Any]:
    """Each child's result, each child waited for by its pid; a child silent past CHILD_BOUND_S (for all of
    them together) is killed by its pid and reported as an error."""
    deadline = time.monotonic() + CHILD_BOUND_S
    results: list[Any] = []
    for pid, r in children:
        data: bytes | None = b""
        with selectors.DefaultSelector() as sel:
            sel.register(r, selectors.EVENT_READ)
            while data is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    os.kill(pid, signal.SIGKILL)
                    data = None
                    break
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        results.append(json.loads(data) if data else {"error": f"child {pid} gave no result within the bound"})
    return results
