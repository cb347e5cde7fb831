"""The real-kernel cohort suite: a real cgroup2 tree, a real systemd user manager, real processes.

Needs root (it creates cgroups under the cgroup2 root, starts a sandboxed manager, runs the engine under
the engine account, ``cohorttest`` by default: ``testing.account``). Two paths, every K test on both where the brief allows:

* ``direct``: DirectCgroupLauncher under ``<cgroup2 root>/mosaic-cohort-<hex>`` (root-owned), no systemd;
* ``scope``:  ScopeLauncher on a root ``systemd --user`` in a private mount + cgroup namespace
  (ci/cohort/sandbox.py), the shim as root, the engine as cohorttest (facts §4.4a).

Every cgroup, sandbox, socket directory and process made here is recorded by exact name and removed in
finalizers, also when a test fails; a last sweep kills any process carrying this run's marker in its
environment (all of them were started here) and reports it as a failure of the suite.

This module is a pytest plugin (`pytest_plugins = ["mosaic.cgroup_cohort.testing.lab"]` in a conftest):
cgroup-cohort's own real-kernel suite uses it, and so does the controller's, whose claim <-> cohort
contract test launches on the same two routes. It needs `MOSAIC_REPO` (the repository checkout, for the
systemd sandbox harness in ci/cohort/sandbox.py, which is stdlib-only so CI can run it bare) and pytest.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mosaic.cgroup_cohort import (
    CohortHandle,
    CohortRef,
    Credentials,
    DirectCgroupLauncher,
    EngineLimits,
    ScopeLauncher,
    StopRequest,
    StopResult,
    UserManager,
    force_stop,
)
from mosaic.cgroup_cohort.cgroupfs import find_cgroup2
from mosaic.cgroup_cohort.testing import alive, kill_member, remove_cgroup, stage_tree
from mosaic.cgroup_cohort.testing.account import EngineAccountError, engine_account, engine_user_name
from mosaic.safe_open import ProcessRef, read_stat

if not os.environ.get("MOSAIC_REPO"):
    raise RuntimeError("mosaic.cgroup_cohort.testing.lab needs MOSAIC_REPO (the repository checkout: the "
                       "systemd sandbox harness is ci/cohort/sandbox.py)")
REPO = Path(os.environ["MOSAIC_REPO"])
sys.path.insert(0, str(REPO / "ci" / "cohort"))
import sandbox  # type: ignore[import-not-found]  # noqa: E402  (ci/cohort/sandbox.py, the harness)

# The plugin's hooks and fixtures are in __all__ too: pytest and pluggy find them through dir(module).
__all__ = [
    "Lab",
    "Launched",
    "direct_parent",
    "engine_credentials",
    "lab",
    "marked_processes",
    "new_unit",
    "no_leftovers",
    "pytest_collection_modifyitems",
    "pytest_generate_tests",
    "pytest_report_header",
    "read_json_line",
    "root_manager",
    "run_marker",
    "socket_dir",
    "stage",
    "user_manager",
    "vendored_shim",
]


def __dir__() -> list[str]:
    return sorted(__all__)


ENGINE_USER = engine_user_name()
RUN = secrets.token_hex(6)
MARKER = f"MOSAIC_COHORT_RUN={RUN}"
GRACE = 0.3


def _direct_reason() -> str | None:
    if sys.platform != "linux":
        return "not Linux"
    if os.geteuid() != 0:
        return "needs root: it creates cgroups under the cgroup2 root and runs the engine as another uid"
    try:
        mount = find_cgroup2()
    except Exception as e:  # noqa: BLE001 - any failure is the reason to skip
        return f"no cgroup2 mount: {e}"
    if not os.access(os.path.join(mount.mount_point, "cgroup.procs"), os.W_OK):
        return f"cgroup2 root {mount.mount_point} is not writable"
    if not os.access("/usr/bin/python3", os.X_OK):
        return "no /usr/bin/python3 (the engine tree runs on it: the venv under /root is unreadable to cohorttest)"
    return None


DIRECT_REASON = _direct_reason()
SCOPE_REASON = DIRECT_REASON or sandbox.available()


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [
        f"cohort suite run {RUN}: direct path: {DIRECT_REASON or 'available'}; "
        f"scope path: {SCOPE_REASON or 'available'}",
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if DIRECT_REASON is not None and SCOPE_REASON is not None:
        reason = f"SKIPPED LOUDLY: no writable cgroup2 ({DIRECT_REASON}) and no user manager ({SCOPE_REASON})"
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "path" in metafunc.fixturenames:
        # test_scope_* are about systemd units (names, invocation IDs): scope path only.
        scope_only = metafunc.function.__name__.startswith("test_scope_")
        metafunc.parametrize("path", ["scope"] if scope_only else ["direct", "scope"])


@pytest.fixture(scope="session")
def engine_credentials() -> Credentials:
    if DIRECT_REASON is not None:
        pytest.skip(DIRECT_REASON)
    try:
        return engine_account(ENGINE_USER)
    except EngineAccountError as e:
        pytest.fail(f"the engine account: {e}")


@pytest.fixture(scope="session")
def run_marker() -> str:
    """This run's marker: engines get MOSAIC_COHORT_RUN=<it>, the final sweep looks for it."""
    return RUN


@pytest.fixture(scope="session")
def stage() -> Iterator[str]:
    """A world-readable directory with the tree script (facts §7.7: /root is 0700)."""
    d = tempfile.mkdtemp(prefix=f"mosaic-cohort-stage-{RUN}-")
    stage_tree(d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def socket_dir() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix=f"mcs-{RUN}-")  # short: <dir>/<unit>.sock fits in sun_path
    os.chmod(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def direct_parent() -> Iterator[str]:
    """``<cgroup2 root>/mosaic-cohort-<run>``: root-owned, so the engine uid owns no ancestor of engine/."""
    if DIRECT_REASON is not None:
        pytest.skip(DIRECT_REASON)
    path = os.path.join(find_cgroup2().mount_point, f"mosaic-cohort-{RUN}")
    os.mkdir(path, 0o755)
    yield path
    remove_cgroup(path)


@pytest.fixture(scope="session")
def root_manager() -> Iterator[sandbox.Sandbox]:
    if SCOPE_REASON is not None:
        pytest.skip(f"scope path unavailable: {SCOPE_REASON}")
    sb = sandbox.up("root", name=f"mosaic-cohort-sbx-{RUN}")
    yield sb
    sandbox.down(sb)


@pytest.fixture(scope="session")
def user_manager(engine_credentials: Credentials) -> Iterator[sandbox.Sandbox]:
    """An unprivileged ``systemd --user`` (uid cohorttest) in its own sandbox (facts §2.2)."""
    if SCOPE_REASON is not None:
        pytest.skip(f"scope path unavailable: {SCOPE_REASON}")
    sb = sandbox.up(ENGINE_USER, name=f"mosaic-cohort-usbx-{RUN}")
    yield sb
    sandbox.down(sb)


@pytest.fixture(scope="session")
def vendored_shim() -> Iterator[str]:
    """The package (with mosaic.safe_open) and cffi's C backend, ``_cffi_backend``, copied where an
    unprivileged uid can read them: all the shim and the spawn helper import beyond the standard library
    (the bindings are cffi's out-of-line ABI module, README "Threads"; no cffi, no pycparser).

    /root is 0700 (facts §7.7), so a shim running as cohorttest cannot import from this venv; it runs
    /usr/bin/python3 (the same CPython 3.11 ABI) on this copy instead.
    """
    import _cffi_backend  # type: ignore[import-untyped]  # noqa: PLC0415

    import mosaic.cgroup_cohort as pkg  # noqa: PLC0415
    import mosaic.safe_open as bottom  # noqa: PLC0415

    probe = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.implementation.cache_tag)"],
                           capture_output=True, text=True)
    if probe.stdout.strip() != sys.implementation.cache_tag:
        pytest.skip(f"/usr/bin/python3 is {probe.stdout.strip()!r}, not {sys.implementation.cache_tag}: the "
                    "vendored _cffi_backend would not load in an unprivileged shim")
    d = tempfile.mkdtemp(prefix=f"mosaic-cohort-vendor-{RUN}-")
    # The shim imports mosaic.safe_open too (README "The shim"): the vendored tree holds both packages.
    for module, name in ((pkg, "cgroup_cohort"), (bottom, "safe_open")):
        shutil.copytree(Path(str(module.__file__)).parent, Path(d) / "mosaic" / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(_cffi_backend.__file__, d)
    for root, _dirs, files in os.walk(d):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def new_unit() -> str:
    """A unit name of the shape the writer claim records (mosaic.writer_claim.unit_name_for): a fresh claim
    ID in ``cohort-claim-<32 hex>.scope``."""
    return f"cohort-claim-{secrets.token_hex(16)}.scope"


def read_json_line(fd: int, timeout: float = 20.0) -> dict[str, Any]:
    """The next line on ``fd`` as JSON, waited for with a bound (a timeout or EOF fails the test)."""
    buf = b""
    while not buf.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            raise TimeoutError(f"no line within {timeout}s (got {buf!r})")
        chunk = os.read(fd, 1)
        if not chunk:
            raise AssertionError(f"stream closed (got {buf!r})")
        buf += chunk
    line: dict[str, Any] = json.loads(buf)
    return line


@dataclass
class Launched:
    """A cohort started by a test: its handle, the engine's stdio (taken from the handle, as the
    controller's engine link takes it), the engine's ready message, and where things are."""

    handle: CohortHandle
    stdin_fd: int | None
    stdout_fd: int | None
    ready: dict[str, Any]
    engine_path_host: str  # engine/ as the test (host) sees it
    unit_path_host: str
    launcher: Any = None

    @property
    def ref(self) -> CohortRef:
        return self.handle.ref

    def members(self, role_prefix: str = "") -> list[ProcessRef]:
        return [ProcessRef(m["pid"], m["startTime"]) for m in self.ready["members"]
                if m["role"].startswith(role_prefix)]

    def member(self, role: str) -> dict[str, Any]:
        (m,) = [m for m in self.ready["members"] if m["role"] == role]
        member: dict[str, Any] = m
        return member

    def send(self, obj: dict[str, Any]) -> None:
        assert self.stdin_fd is not None
        os.write(self.stdin_fd, (json.dumps(obj) + "\n").encode())

    def close_stdin(self) -> None:
        if self.stdin_fd is not None:
            os.close(self.stdin_fd)
            self.stdin_fd = None

    def close_stdio(self) -> None:
        self.close_stdin()
        if self.stdout_fd is not None:
            os.close(self.stdout_fd)
            self.stdout_fd = None

    def read_line(self, timeout: float = 20.0) -> dict[str, Any]:
        """The engine's next stdout line, waited for with a bound (a timeout fails the test)."""
        assert self.stdout_fd is not None
        return read_json_line(self.stdout_fd, timeout)


def marked_processes() -> list[ProcessRef]:
    """Every live process whose environment carries this run's marker (all started by this suite)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if MARKER.encode() in env:
            st = read_stat(int(name))
            if st is not None and st.state not in ("Z", "X"):
                found.append(ProcessRef(st.pid, st.start_time))
    return found


@dataclass
class Lab:
    """Launches cohorts on one path and cleans every one of them up by its recorded name."""

    path: str
    socket_dir: str
    stage: str
    engine: Credentials
    direct_parent: str | None = None
    manager: sandbox.Sandbox | None = None
    launched: list[Launched] = field(default_factory=list)
    tracked: list[ProcessRef] = field(default_factory=list)
    extra_cgroups: list[str] = field(default_factory=list)

    # --- where things are
    def paths(self, unit: str) -> tuple[str, str]:
        """(the unit's cgroup as the ENGINE sees it, as the TEST sees it)."""
        if self.path == "direct":
            assert self.direct_parent is not None
            path = os.path.join(self.direct_parent, unit)
            return path, path
        assert self.manager is not None
        return f"/sys/fs/cgroup/app.slice/{unit}", os.path.join(self.manager.cgroup, "app.slice", unit)

    def engine_view_root(self) -> str:
        """The cgroup2 mount point as the engine sees it."""
        return find_cgroup2().mount_point if self.path == "direct" else "/sys/fs/cgroup"

    def host_root(self) -> str:
        """The directory the engine sees as its cgroup2 mount root, as the test sees it."""
        if self.path == "direct":
            return find_cgroup2().mount_point
        assert self.manager is not None
        return str(self.manager.cgroup)

    def user_manager(self) -> UserManager | None:
        return None if self.manager is None else UserManager(self.manager.prefix())

    def launcher(self, engine: Credentials | None) -> DirectCgroupLauncher | ScopeLauncher:
        if self.path == "direct":
            assert self.direct_parent is not None
            return DirectCgroupLauncher(self.direct_parent, self.socket_dir, engine=engine, log_dir=self.socket_dir)
        assert self.manager is not None
        return ScopeLauncher(UserManager(self.manager.prefix()), self.socket_dir, engine=engine,
                             log_dir=self.socket_dir)

    def launch(self, spec: dict[str, Any] | Callable[[str], dict[str, Any]], *, unit: str | None = None,
               as_root: bool = False, launcher: Any = None, limits: EngineLimits | None = None) -> Launched:
        """Start the misbehaving tree as the engine under ``unit`` (a fresh claim-shaped name by default),
        with ``limits`` (None: the launcher's defaults), take its stdio as a controller would, and return
        once every member has reported."""
        unit = unit or new_unit()
        engine_unit, host_unit = self.paths(unit)
        if callable(spec):
            spec = spec(engine_unit)
        launcher = launcher or self.launcher(None if as_root else self.engine)
        handle = launcher.launch(unit, ["/usr/bin/python3", os.path.join(self.stage, "misbehaving_tree.py"),
                                        json.dumps(spec)],
                                 env={"PATH": "/usr/bin:/bin", "MOSAIC_COHORT_RUN": RUN}, cwd=self.stage,
                                 limits=limits)
        stdin_fd, stdout_fd = handle.take_stdio()
        launched = Launched(handle, stdin_fd, stdout_fd, {}, os.path.join(host_unit, "engine"), host_unit, launcher)
        self.launched.append(launched)
        self.tracked.append(handle.ref.engine)
        launched.ready = launched.read_line()
        assert launched.ready["type"] == "ready"
        self.tracked.extend(launched.members())
        return launched

    def request(self, ref: CohortRef) -> StopRequest:
        tag = secrets.token_hex(3)
        return StopRequest(f"stop-{tag}", f"pi-{ref.unit}", f"exec-{ref.unit}",
                           {"confirmation": f"conf-{tag}", "actor": "local-operator"})

    def stop(self, launched: Launched | CohortRef, **kw: Any) -> StopResult:
        ref = launched.ref if isinstance(launched, Launched) else launched
        kw.setdefault("grace", GRACE)
        return force_stop(ref, self.request(ref), manager=self.user_manager(), **kw)

    def other_cgroup(self) -> tuple[str, str]:
        """A cgroup outside the cohort owned by the engine uid: (engine's view, test's view)."""
        name = f"other-{RUN}-{secrets.token_hex(2)}"
        host = os.path.join(self.host_root() if self.path == "scope" else self.direct_parent or "", name)
        os.mkdir(host)
        self.extra_cgroups.append(host)
        for rel in (".", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"):
            os.chown(os.path.join(host, rel), self.engine.uid, self.engine.gid)
        view = os.path.join(self.engine_view_root(), name) if self.path == "scope" else host
        return view, host

    def cleanup(self) -> list[str]:
        problems: list[str] = []
        for item in self.launched:
            try:
                remove_cgroup(item.engine_path_host) if os.path.isdir(item.engine_path_host) else None
            except OSError as e:
                problems.append(f"{item.engine_path_host}: {e}")
            item.close_stdio()
            try:
                item.handle.release(force=True, timeout=15)
            except Exception as e:  # noqa: BLE001 - keep cleaning the others
                problems.append(f"release {item.ref.unit}: {e}")
            if self.path == "direct" and os.path.isdir(item.unit_path_host):
                try:
                    remove_cgroup(item.unit_path_host)
                except OSError as e:
                    problems.append(f"{item.unit_path_host}: {e}")
        for m in self.tracked:
            if alive(m):
                kill_member(m)
        for path in self.extra_cgroups:
            try:
                remove_cgroup(path)
            except OSError as e:
                problems.append(f"{path}: {e}")
        return problems


@pytest.fixture
def lab(request: pytest.FixtureRequest, path: str, socket_dir: str, stage: str,
        engine_credentials: Credentials) -> Iterator[Lab]:
    if path == "direct":
        if DIRECT_REASON is not None:
            pytest.skip(DIRECT_REASON)
        lab = Lab(path, socket_dir, stage, engine_credentials,
                  direct_parent=request.getfixturevalue("direct_parent"))
    else:
        if SCOPE_REASON is not None:
            pytest.skip(f"scope path unavailable: {SCOPE_REASON}")
        lab = Lab(path, socket_dir, stage, engine_credentials, manager=request.getfixturevalue("root_manager"))
    yield lab
    problems = lab.cleanup()
    assert not problems, problems


@pytest.fixture(scope="session", autouse=True)
def no_leftovers() -> Iterator[None]:
    """After the whole suite: no process of this run alive, nothing of ours under the cgroup2 root."""
    yield
    left = marked_processes()
    for m in left:
        kill_member(m)
    assert not left, f"processes of run {RUN} were still alive after the suite (killed now): {left}"
    if DIRECT_REASON is None:
        root = find_cgroup2().mount_point
        ours = [n for n in os.listdir(root) if RUN in n]
        assert not ours, f"cgroups of run {RUN} left under {root}: {ours}"
