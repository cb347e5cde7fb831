"""Brief §6 fixtures K1-K4, K10, K12-K16 against the real kernel, on the direct path and the scope path.

The engine is the misbehaving tree (setsid daemons, a fork loop, TERM-ignoring members) running as the
dedicated uid ``cohorttest``, which owns no ancestor of engine/: the kernel-enforced K13 boundary of
docs/cgroup-facts.md §4.4. The same-uid design of the brief (no nsdelegate here) is shown escaping, and then
K1 ends uncertain, as the brief requires.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

import jsonschema
import pytest

from mosaic.cgroup_cohort import (
    CohortRef,
    CohortRefusal,
    DirectCgroupLauncher,
    FixtureVerifier,
    PgroupLauncher,
    ScopeLauncher,
    StopRequest,
    UnlaunchedCohort,
    UserManager,
    build_boot_proof,
    force_stop,
)
from mosaic.cgroup_cohort.proof import boot_time, proof_json_schema
from mosaic.cgroup_cohort.stop import Acknowledged, AwaitGrace
from mosaic.cgroup_cohort.testing import alive, kill_member, populated, wait_unpopulated
from mosaic.safe_open import DIGEST_RE, HostIdentity, ProcessRef, current_host, read_stat

GRACE = 0.3


def _validate(proof: dict) -> None:
    jsonschema.Draft202012Validator(proof_json_schema()).validate(proof)


def _proof_members(proof: dict) -> dict[ProcessRef, dict]:
    return {ProcessRef(m["pid"], m["startTime"]): m for m in proof["members"]}


# ---------------------------------------------------------------------------------------------------- K1
def test_K1_setsid_child_is_killed_and_the_proof_verifies(lab):
    launched = lab.launch({"setsid_daemon": True, "sleepers": 2, "term_ignorers": 1})
    ref = launched.ref
    assert ref.containment.held and ref.containment.method == "engine-uid"
    daemon = launched.member("setsid-daemon")
    assert daemon["sid"] != launched.ready["pid"]  # it really left the engine's session and group
    daemon_ref = ProcessRef(daemon["pid"], daemon["startTime"])
    assert alive(daemon_ref)
    verifier = FixtureVerifier()
    result = lab.stop(launched, verifier=verifier)
    assert result.outcome.state == "stopped", result.outcome
    assert result.proof is not None and result.outcome.membership_complete
    _validate(result.proof)
    assert verifier.verify(result.proof) == result.proof["verification"]["digest"]
    members = _proof_members(result.proof)
    # The daemon ignored TERM, so it was in the cohort at the freeze and died by the kill.
    assert daemon_ref in members and members[daemon_ref]["death"] == "reaped:signal 9"
    assert not alive(daemon_ref)
    for m in launched.members() + [ref.engine]:
        assert not alive(m)
    assert populated(launched.engine_path_host) is False


def test_K1_and_K13_same_uid_engine_escapes_so_the_stop_is_uncertain(lab):
    """The brief's design without nsdelegate (facts §4.1): an engine with the owner's uid is not contained.

    The canary escapes, an escaping member survives the kill, and K1 ends uncertain, recorded.
    """
    def spec(unit: str) -> dict:
        return {"setsid_daemon": True, "escape": [os.path.join(unit, "supervisor", "cgroup.procs")]}

    launched = lab.launch(spec, as_root=True)
    assert not launched.ref.containment.held
    assert ["MOVED"] == [r for _, r in launched.ref.containment.attempts][-1:]
    escaper = launched.member("escaper")
    assert escaper["results"][-1][1] == "MOVED" and escaper["cgroup"].endswith("/supervisor")
    esc = ProcessRef(escaper["pid"], escaper["startTime"])
    result = lab.stop(launched)
    assert result.outcome.state == "uncertain" and result.proof is None
    assert result.outcome.reason == "containment-not-held"
    # What the proof would have hidden: populated 0 for engine/, and yet a member of the cohort lives on.
    assert result.outcome.evidence.populated0 is True
    assert alive(esc), "the escaped member survived the engine's kill (facts §4.1)"
    assert esc not in result.outcome.evidence.members


# ---------------------------------------------------------------------------------------------------- K2
def test_K2_process_group_fallback_is_uncertain_and_the_setsid_child_escapes(stage, engine_credentials,
                                                                            run_marker):
    launcher = PgroupLauncher(engine=engine_credentials)
    unit = _unit()
    assert launcher.presence(unit) == "unavailable"  # a process group has no name to look up
    handle = launcher.launch(unit, ["/usr/bin/python3", os.path.join(stage, "misbehaving_tree.py"),
                                    json.dumps({"setsid_daemon": True, "sleepers": 2})],
                             env={"PATH": "/usr/bin:/bin", "MOSAIC_COHORT_RUN": run_marker}, cwd=stage)
    started: list[ProcessRef] = [handle.ref.engine]
    stdin_fd, stdout_fd = handle.take_stdio()
    try:
        assert handle.ref.unit == unit and handle.ref.kind == "pgroup"
        ready = _read_json_line(stdout_fd)
        started += [ProcessRef(m["pid"], m["startTime"]) for m in ready["members"]]
        (d,) = [m for m in ready["members"] if m["role"] == "setsid-daemon"]
        daemon = ProcessRef(d["pid"], d["startTime"])
        assert read_stat(daemon.pid).pgid != handle.ref.pgid
        request = StopRequest("stop-k2", "pi-k2", "exec-k2", {"confirmation": "c"})
        result = force_stop(handle.ref, request, grace=GRACE)
        assert result.outcome.state == "uncertain" and result.proof is None
        assert result.outcome.reason == "process-group-fallback"
        assert result.outcome.evidence.populated0 is True  # the group is empty ...
        assert alive(daemon)  # ... and the setsid child is alive: why the fallback can never prove a stop
        assert not alive(handle.ref.engine)
    finally:
        for m in started:
            kill_member(m)
        os.close(stdin_fd)
        os.close(stdout_fd)
        handle.release(timeout=10)


def _unit() -> str:
    """A unit name of the shape the writer claim records: cohort-<claim ID>.scope."""
    return f"cohort-claim-{os.urandom(16).hex()}.scope"


def _read_json_line(fd: int, timeout: float = 20.0) -> dict:
    buf = b""
    while not buf.endswith(b"\n"):
        r, _, _ = select.select([fd], [], [], timeout)
        assert r, f"no line within {timeout}s"
        chunk = os.read(fd, 1)
        assert chunk, "stream closed"
        buf += chunk
    return json.loads(buf)


# ---------------------------------------------------------------------------------------------------- K3
def test_K3_sigterm_acknowledged_stays_stopping_until_the_kill_phase(lab):
    launched = lab.launch({"ack_term": True, "term_ignorers": 1})
    ignorer = launched.members("term-ignorer")[0]
    seen: dict[str, object] = {}

    def hook(machine, action) -> None:
        if isinstance(action, AwaitGrace) and "ack" not in seen:
            ack = launched.read_line()  # the engine acknowledges TERM and exits; a member does not
            assert ack == {"type": "term-ack"}
            machine.feed(Acknowledged("sigterm-ack"))
            seen["ack"] = True
            seen["state_after_ack"] = machine.state
            seen["ignorer_alive_after_ack"] = alive(ignorer)

    result = lab.stop(launched, on_action=hook)
    assert seen == {"ack": True, "state_after_ack": "stopping", "ignorer_alive_after_ack": True}
    assert result.outcome.state == "stopped", result.outcome
    assert result.outcome.evidence.acknowledgements == ["sigterm-ack"]
    assert result.outcome.evidence.phases[-3:] == ["kill", "collect", "done"]
    members = _proof_members(result.proof)
    assert members[ignorer]["death"] == "reaped:signal 9"  # it died in the kill phase, not from TERM
    assert launched.ref.engine not in members  # the engine exited on TERM, before the freeze


# ---------------------------------------------------------------------------------------------------- K4
def test_K4_two_engines_stop_one_the_other_survives(lab):
    a = lab.launch({"sleepers": 1, "term_ignorers": 1})
    b = lab.launch({"sleepers": 1, "term_ignorers": 1})
    result = lab.stop(a)
    assert result.outcome.state == "stopped", result.outcome
    # Independent observation of B: its own cgroup is populated, its members live, it answers get_state.
    assert populated(b.engine_path_host) is True
    assert all(alive(m) for m in b.members()) and alive(b.ref.engine)
    b.send({"type": "get_state"})
    reply = b.read_line()
    assert reply["command"] == "get_state" and reply["success"] and reply["data"]["pid"] == b.ready["pid"]
    assert not set(_proof_members(result.proof)) & set(b.members())
    assert (r := lab.stop(b)).outcome.state == "stopped", r.outcome


# --------------------------------------------------------------------------------------------------- K10
# A controller process that has ONLY the stored reference (the JSON the writer claim holds), the stop
# request from its stopping revision and the way to its user manager. It drives the public machine and
# executor step by step, "publishing" each phase before the action, as the controller does.
DRIVER = r"""
import json, os, signal, sys
from mosaic.cgroup_cohort import CohortRef, StopRequest, UserManager
from mosaic.cgroup_cohort.proof import build_cohort_proof
from mosaic.cgroup_cohort.stop import AwaitGrace, Finish, executor_for, machine_for
mode, stored, request, prefix = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
ref = CohortRef.from_dict(stored)
request = StopRequest(**request)
machine = machine_for(ref, request, grace=30 if mode == "die" else 0.3)
executor = executor_for(ref, manager=UserManager(prefix) if prefix is not None else None)
published = []
while not isinstance(action := machine.action, Finish):
    published.append(machine.phase)
    if mode == "die" and isinstance(action, AwaitGrace):  # TERM sent, kill phase not started: it dies here
        print(json.dumps({"published": published, "termed": len(machine.evidence.termed)}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    machine.feed(executor.perform(action))
executor.close()
outcome = action.outcome
proof = build_cohort_proof(ref, request, outcome) if outcome.state == "stopped" else None
print(json.dumps({"published": published, "state": outcome.state, "reason": outcome.reason,
                  "members": [m.to_dict() for m in outcome.evidence.members], "proof": proof}))
"""


def _drive(mode: str, stored: str, request: dict, prefix: list[str] | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", DRIVER, mode, stored, json.dumps(request), json.dumps(prefix)],
                          capture_output=True, text=True, timeout=120, env={**os.environ})


def test_K10_controller_killed_between_term_and_kill_restart_reruns_from_term(lab):
    """The controller (a process holding only the stored reference) is SIGKILLed after TERM; a fresh one
    rebuilds the machine from the same stored reference and stop, re-checks the identity, re-runs from TERM
    and ends with a proof whose verification.digest is what the claim stores (K10, K11)."""
    launched = lab.launch({"sleepers": 1, "term_ignorers": 2, "setsid_daemon": True})
    stored = json.dumps(launched.ref.to_dict())  # all that survives the controller
    request = {"stop_id": "stop-k10", "conversation": "pi-k10", "execution": "exec-k10",
               "authority": {"confirmation": "conf-k10"}}
    prefix = None if lab.manager is None else lab.manager.prefix()
    died = _drive("die", stored, request, prefix)
    assert died.returncode == -signal.SIGKILL, died.stderr
    report = json.loads(died.stdout)
    assert report["published"] == ["identity", "term", "grace"] and report["termed"] >= 4
    ignorers = launched.members("term-ignorer")
    assert all(alive(m) for m in ignorers)  # nothing was killed by the dead controller
    assert populated(launched.engine_path_host) is True
    # The restart: a fresh process, the same stored reference and the same stop.
    finished = _drive("finish", stored, request, prefix)
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    assert report["published"] == ["identity", "term", "grace", "freeze", "enumerate", "recheck", "kill",
                                   "collect"]
    assert report["state"] == "stopped", report
    proof = report["proof"]
    _validate(proof)
    assert proof["stop"] == "stop-k10" and proof["cohort"]["unit"] == launched.ref.unit
    verifier = FixtureVerifier()
    assert verifier.register(proof) == proof["verification"]["digest"]
    assert DIGEST_RE.fullmatch(verifier.verify(proof, stop="stop-k10"))
    members = _proof_members(proof)
    for m in ignorers:
        assert members[m]["death"] == "reaped:signal 9"
    assert set(members) == {ProcessRef.from_dict(m) for m in report["members"]}  # only what this run saw
    assert not any(alive(m) for m in members)


# --------------------------------------------------------------------------------------------------- K12
def test_K12_fork_loop_is_frozen_enumerated_and_killed(lab):
    def spec(unit: str) -> dict:
        return {"fork_loop": True, "fork_cap": 60, "term_ignorers": 1, "setsid_daemon": True,
                "subcgroup": os.path.join(unit, "engine", "sub")}

    launched = lab.launch(spec)
    sub = launched.member("subcgroup")
    assert sub["cgroup"] == "/sub"  # the engine is in a cgroup namespace rooted at engine/
    result = lab.stop(launched, grace=GRACE)
    ev = result.outcome.evidence
    assert result.outcome.state == "stopped", result.outcome
    assert ev.frozen and ev.enumeration_stable and ev.frozen_rechecked and ev.populated0
    members = _proof_members(result.proof)
    forker = ProcessRef(launched.member("fork-loop")["pid"], launched.member("fork-loop")["startTime"])
    assert forker in members and ProcessRef(sub["pid"], sub["startTime"]) in members
    assert len(members) > 5, "the fork loop's children were caught in the freeze"
    # Every member enumerated while frozen died by the kill and was reaped by the shim (subreaper).
    assert {m["death"] for m in members.values()} == {"reaped:signal 9"}
    assert not any(alive(m) for m in members)
    assert populated(launched.engine_path_host) is False
    assert populated(os.path.join(launched.engine_path_host, "sub")) is False


# --------------------------------------------------------------------------------------------------- K13
def test_K13_member_writing_its_pid_elsewhere_is_refused_and_the_kill_is_complete(lab):
    other_view, other_host = lab.other_cgroup()

    def spec(unit: str) -> dict:
        parent = os.path.dirname(unit)
        return {"escape": [os.path.join(unit, "supervisor", "cgroup.procs"),
                           os.path.join(unit, "cgroup.procs"),
                           os.path.join(parent, "cgroup.procs"),
                           os.path.join(lab.engine_view_root(), "cgroup.procs"),
                           os.path.join(other_view, "cgroup.procs")],
                "term_ignorers": 1}

    launched = lab.launch(spec)
    escaper = launched.member("escaper")
    results = dict(escaper["results"])
    assert len(results) == 5 and set(results.values()) == {"EACCES"}, results
    assert escaper["cgroup"] == "/"  # still in engine/ (the root of its cgroup namespace)
    assert populated(other_host) is False
    # The canary reported the same boundary at launch.
    assert launched.ref.containment.held
    assert {r for _, r in launched.ref.containment.attempts} == {"EACCES"}
    result = lab.stop(launched)
    assert result.outcome.state == "stopped", result.outcome
    esc = ProcessRef(escaper["pid"], escaper["startTime"])
    assert _proof_members(result.proof)[esc]["death"] == "reaped:signal 9"
    assert not alive(esc)


def test_K13_engine_cannot_regain_root_through_a_setuid_binary(lab):
    """no_new_privs: the ownership boundary cannot be undone by exec of a set-uid program."""
    launched = lab.launch({"sleepers": 1})
    with open(f"/proc/{launched.ref.engine.pid}/status", encoding="ascii") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines())
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Uid"].split()[0] == str(lab.engine.uid)
    assert (r := lab.stop(launched)).outcome.state == "stopped", r.outcome


# --------------------------------------------------------------------------------------------------- K14
def test_K14_same_name_other_epoch_gets_no_signal(lab):
    unit = _unit()
    first = lab.launch({"sleepers": 1}, unit=unit)
    old_ref = first.ref
    assert (r := lab.stop(first)).outcome.state == "stopped", r.outcome
    first.handle.release(timeout=15)
    # Recreate under the same name (scope: the name is busy for tens of ms, the launcher retries).
    second = lab.launch({"sleepers": 1, "term_ignorers": 1}, unit=unit)
    assert second.ref.unit == old_ref.unit
    if lab.path == "scope":
        assert second.ref.invocation_id != old_ref.invocation_id
    assert second.ref.unit_cgroup_id != old_ref.unit_cgroup_id
    result = lab.stop(old_ref)
    assert result.outcome.state == "uncertain" and result.proof is None
    assert result.outcome.reason == "identity-mismatch" and not result.outcome.signalled
    assert result.outcome.evidence.phases == ["identity", "done"]
    assert all(alive(m) for m in second.members()) and alive(second.ref.engine)
    assert populated(second.engine_path_host) is True
    assert (r := lab.stop(second)).outcome.state == "stopped", r.outcome


def _eventually(condition, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``condition()`` holds within ``timeout`` seconds, asked again every 20 ms. For a change that
    signals nothing this process can wait on (the manager collecting a scope after its last process)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def test_presence_of_the_recorded_unit(lab):
    """brief §2 "Restart": is a unit (direct: a cgroup) of the recorded name there now? Absent before the
    launch, present while the cohort (or only its shim) holds it, absent once released and collected; and
    unavailable, never absent, when it cannot be told (§6 "Unavailable is not empty")."""
    unit = _unit()
    launcher = lab.launcher(lab.engine)
    assert launcher.presence(unit) == "absent"
    launched = lab.launch({"sleepers": 1}, unit=unit, launcher=launcher)
    assert launcher.presence(unit) == "present"
    assert (r := lab.stop(launched)).outcome.state == "stopped", r.outcome
    assert launcher.presence(unit) == "present"  # the shim holds it until released (scope not collected)
    launched.handle.release(timeout=15)
    # The direct launcher removes its cgroup in release; a manager collects a scope a little later.
    assert _eventually(lambda: launcher.presence(unit) == "absent", 10)
    if lab.path == "direct":
        assert lab.direct_parent is not None
        gone = os.path.join(lab.direct_parent, f"gone-{os.urandom(3).hex()}")
        os.mkdir(gone)
        lab.extra_cgroups.append(gone)
        blind = DirectCgroupLauncher(gone, lab.socket_dir)
        os.rmdir(gone)  # the parent itself is gone: nothing can be said about a name under it
    else:
        assert lab.manager is not None
        blind = ScopeLauncher(UserManager(lab.manager.prefix(), systemctl="/nonexistent/systemctl"), lab.socket_dir)
    assert blind.presence(unit) == "unavailable"


def test_scope_unit_name_busy_until_the_previous_scope_ends_is_retried(lab):
    """A unit name stays loaded while (and for tens of ms after) its scope runs: the launcher retries."""
    unit = _unit()
    first = lab.launch({"sleepers": 1}, unit=unit)
    assert (r := lab.stop(first)).outcome.state == "stopped", r.outcome
    busy = threading.Event()
    launcher = lab.launcher(lab.engine)
    launcher.on_busy = lambda attempt, message: busy.set()
    box: dict[str, object] = {}

    def second() -> None:
        try:
            box["launched"] = lab.launch({"sleepers": 1}, unit=unit, launcher=launcher)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            box["error"] = e

    t = threading.Thread(target=second)
    t.start()
    # The second launch is refused "already loaded" while the first scope lives: wait for that, bounded.
    assert busy.wait(20), box
    first.handle.release(timeout=15)  # the first scope ends; its name frees tens of ms later
    t.join(30)
    assert not t.is_alive() and "error" not in box, box
    launched = box["launched"]
    assert launched.ref.unit == first.ref.unit
    assert launched.ref.invocation_id != first.ref.invocation_id
    assert (r := lab.stop(launched)).outcome.state == "stopped", r.outcome


# --------------------------------------------------------------------------------------------------- K15
def test_K15_shim_gone_is_unavailable_and_nothing_is_signalled(lab):
    launched = lab.launch({"sleepers": 1, "term_ignorers": 1})
    shim = launched.handle.hello["shim"]
    pidfd = os.pidfd_open(shim["pid"])
    try:
        assert read_stat(shim["pid"]).start_time == shim["startTime"]
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)
    assert launched.handle.wait(15) is not None
    result = lab.stop(launched)
    assert result.outcome.state == "uncertain" and result.proof is None
    assert result.outcome.reason in ("shim-gone", "identity-unavailable")
    assert not result.outcome.signalled
    assert all(alive(m) for m in launched.members()) and alive(launched.ref.engine)


def test_K15_missing_engine_cgroup_is_unavailable_not_empty(lab):
    launched = lab.launch({"exit_on_eof": True})
    engine = launched.ref.engine
    # The pidfd before the EOF: once its stdin closes the engine may exit (and its pid be gone) at once.
    fd = os.pidfd_open(engine.pid)
    try:
        launched.close_stdin()  # the engine link closes the engine's stdin: it exits on EOF
        assert select.select([fd], [], [], 20)[0], "the engine did not exit within 20 s of its stdin's EOF"
    finally:
        os.close(fd)
    assert wait_unpopulated(launched.engine_path_host, 20)
    os.rmdir(launched.engine_path_host)  # the engine cgroup path is now missing
    result = lab.stop(launched)
    assert result.outcome.state == "uncertain" and result.proof is None
    assert result.outcome.reason in ("identity-unavailable", "cgroup-unavailable")
    assert not result.outcome.signalled
    # A new directory under the same name is another cgroup, not the cohort's: still unavailable.
    os.mkdir(launched.engine_path_host)
    result = lab.stop(launched)
    assert result.outcome.state == "uncertain" and not result.outcome.signalled
    os.rmdir(launched.engine_path_host)


# --------------------------------------------------------------------------------------------------- K16
def test_K16_boot_proof_for_another_machine_is_foreign_host(lab):
    launched = lab.launch({"sleepers": 1})
    ref = launched.ref
    here = current_host()
    assert ref.host == here
    request = StopRequest("stop-k16", "pi-k16", "exec-k16", {"confirmation": "c"})
    stored = ref.to_dict()
    foreign = CohortRef.from_dict({**stored, "host": {"machineId": "f" * 32, "bootId": here.boot_id}})
    for recorded in (foreign, UnlaunchedCohort(ref.unit, foreign.host)):
        with pytest.raises(CohortRefusal) as e:
            build_boot_proof(recorded, request, current=here, boot_time=boot_time(), observed_at=0)
        assert e.value.code == "foreign-host"
    # The same reference (or only its unit name and host) from an earlier boot of this host gets a boot
    # proof that the verifier accepts (W7, W20).
    earlier = HostIdentity(here.machine_id, "0" * 32)
    v = FixtureVerifier()
    for recorded in (CohortRef.from_dict({**stored, "host": earlier.to_dict()}), UnlaunchedCohort(ref.unit, earlier)):
        proof = build_boot_proof(recorded, request, current=here, boot_time=boot_time(), observed_at=2.0)
        _validate(proof)
        v.register(proof)
        assert v.verify(proof) == proof["verification"]["digest"]
    # And a force stop of a reference recorded on another host sends nothing.
    result = lab.stop(foreign)
    assert result.outcome.reason == "identity-mismatch" and not result.outcome.signalled
    assert alive(ref.engine)
    assert (r := lab.stop(launched)).outcome.state == "stopped", r.outcome


def _cgroup_of(pid: int) -> str:
    """The cgroup2 path of ``pid`` as this (init cgroup namespace) process sees it, read directly."""
    with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
        (line,) = [x for x in f.read().splitlines() if x.startswith("0::")]
    return line[3:]


def test_engine_runs_in_engine_cgroup_under_the_engine_uid(lab):
    launched = lab.launch({"subcgroup": None})
    engine = launched.ref.engine
    path = _cgroup_of(engine.pid)
    assert path.endswith("/engine")
    assert os.path.samefile(lab.host_root() + path.removeprefix(_ns_prefix(lab)), launched.engine_path_host)
    with open(f"/proc/{engine.pid}/status", encoding="ascii") as f:
        assert f"Uid:\t{lab.engine.uid}\t" in f.read()
    assert (r := lab.stop(launched)).outcome.state == "stopped", r.outcome


def _ns_prefix(lab) -> str:
    """The sandbox's cgroup (its cgroup namespace root) as a path from the host root, or ''."""
    if lab.manager is None:
        return ""
    return "/" + os.path.basename(lab.manager.cgroup)
