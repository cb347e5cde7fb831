"""The Claude engine for the lifecycle (`ClaudeEngine`, the seam's `Engine`; `ClaudeSpec.engine()` makes one):
where a transcript is and what it holds (`engines/claude/_session`), the sealed launch, its pins and its
check at bind, whether Claude can load the session without writing to it, K8's load check
(`engines/claude/_launch`), the history pages (`engines/claude/_history`) and the core's rules
(`CLAUDE_RULES`).

An engine uid per execution (the lifecycle's `EngineUids`, README "An engine uid per execution"): the seal's
three directories (`HOME`, `CLAUDE_CONFIG_DIR`, the private `CLAUDE_CODE_TMPDIR`) are state directories, named
before they are made, so the live-session guard checks each at construction and at bind and each execution's
uid is handed what an earlier one left in them; `argv(uids=)` makes them as this process's (nothing given to
anyone before the claim is taken), and `bind(uid=)` gives the ones the seal made (this process's, or an earlier
execution's uid's: nobody else's) to the execution's uid and checks the launch again as that uid's.

The idle drift check (`engines/claude/_drift`): `drift` gives the claimed session id and, for a transcript that
existed at the claim, its baseline (the read K8 compared: identity, digest, lines, the recorded leaf), so the
first check goes on from the claim's bytes and proves the first prompt hangs on the leaf."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence

from mosaic.cgroup_cohort import EngineLimits
from mosaic.claude_rpc import ClaudeRpcRefusal, SealedLaunch
from mosaic.claude_rpc.seal import sealed_env
from mosaic.controller_client import ControlRefusal
from mosaic.pi_rpc import EngineLink
from mosaic.writer_claim import Pins

from .._seam import EngineRules, PageReader, Place, SessionRead
from .._verdict import DriftConfig
from ._drift import baseline
from ._history import history_reader
from ._launch import ClaudeDescription, bind_check, current_pins, load_check, loadable, sealed_launch
from ._session import ClaudePlace, ClaudeSessionRead, claude_place, read_transcript
from ._wire import CLAUDE_RULES

__all__ = ["ClaudeEngine"]


class ClaudeEngine:
    """The pinned Claude Code (or a test command standing for it) as the lifecycle uses it."""

    name = "claude"  # the claim's session key and the binding record

    def __init__(self, spec: ClaudeDescription, *, seat: str, limits: EngineLimits | None,
                 state_dirs: tuple[str, ...]) -> None:
        self.spec = spec
        self.seat = seat
        self.limits = limits
        self._state_dirs = state_dirs
        self._uids: range | None = None  # each execution's uid is one of these, told at bind (`argv(uids=)`)
        self._launch: SealedLaunch | None = None

    @property
    def rules(self) -> EngineRules:
        return CLAUDE_RULES

    @property
    def env(self) -> Mapping[str, str]:
        """Exactly the sealed environment (`CLAUDE_CODE_TMPDIR` private, inside the scratch directory)."""
        if self._launch is not None:
            return self._launch.env
        return sealed_env(self.spec.scratch, config_dir=self.spec.config_dir, base_url=self.spec.base_url,
                          api_key=self.spec.api_key, owner=self.spec.engine_uid if self._uids is None else self._uids)

    @property
    def config_dir(self) -> str:
        """`CLAUDE_CONFIG_DIR`: the configured one, or the seal's inside the scratch (named, not made)."""
        return self.spec.config_dir or os.path.join(os.path.normpath(self.spec.scratch), "claude")

    @property
    def made_dirs(self) -> tuple[str, ...]:
        """The directories the seal makes (claude-rpc `sealed_env`: `HOME`, `CLAUDE_CODE_TMPDIR` and, without a
        configured one, `CLAUDE_CONFIG_DIR`), named without making them."""
        base = os.path.normpath(self.spec.scratch)
        made = (os.path.join(base, "home"), os.path.join(base, "tmp"))
        return made if self.spec.config_dir is not None else (*made, os.path.join(base, "claude"))

    @property
    def seal_dirs(self) -> tuple[str, str, str]:
        """`HOME`, `CLAUDE_CODE_TMPDIR` and `CLAUDE_CONFIG_DIR` as the seal sets them, named without making them."""
        base = os.path.normpath(self.spec.scratch)
        return os.path.join(base, "home"), os.path.join(base, "tmp"), os.path.normpath(self.config_dir)

    @property
    def state_dirs(self) -> tuple[str, ...]:
        """The configured state directories, then the seal's three (module docstring)."""
        return (*self._state_dirs, *(d for d in self.seal_dirs if d not in self._state_dirs))

    def place(self, session_path: str) -> ClaudePlace:
        return claude_place(session_path, project=self.spec.project, seat=self.seat, config_dir=self.config_dir)

    def read(self, place: Place) -> ClaudeSessionRead:
        return read_transcript(_claude(place))

    def conversation(self, place: Place) -> str:
        return history_reader(_claude(place))[0]

    def argv(self, session_path: str, *, uids: range | None = None) -> list[str]:
        """The sealed argv; `uids`: each execution's uid is allocated from it at launch, so the seal's
        directories are made as this process's and checked as its or a range uid's (an earlier execution's)
        until `bind` names the uid. Refuses `configuration` for `uids` beside `ClaudeSpec.engine_uid` (one
        uid for every launch, or one per launch: not both)."""
        if uids is not None and self.spec.engine_uid is not None:
            raise ControlRefusal("configuration", f"ClaudeSpec.engine_uid {self.spec.engine_uid} names one uid for "
                                                  "every launch; an engine uid per execution names each launch's")
        self._uids = uids
        place = self.place(session_path)
        launch = sealed_launch(self.spec, place, read_transcript(place), owner=uids)
        named = (launch.env["HOME"], launch.env["CLAUDE_CODE_TMPDIR"], launch.env["CLAUDE_CONFIG_DIR"])
        if named != self.seal_dirs:  # the guard checked the ones named before: the seal made no other
            raise ControlRefusal("configuration", f"the seal's directories {named} are not the ones named "
                                                  f"before it made them {self.seal_dirs}")
        self._launch = launch
        return launch.argv

    def pins(self, argv: Sequence[str]) -> Pins:
        return current_pins(self.spec, self._sealed(argv))

    def bind(self, argv: Sequence[str], *, uid: int | None = None) -> None:
        """The launch checked whole again (`engines/claude/_launch` rule 3); with `uid` (the execution's own,
        allocated from the range `argv` was told), first the directories the seal made are given to it
        (module docstring) and the launch is the uid's: its private temp directory must be that uid's."""
        launch = self._sealed(argv)
        if uid is not None:
            uids = self._uids
            if uids is None or uid not in uids:
                raise ControlRefusal("configuration", f"engine uid {uid} is not of the range the seal was made for "
                                                      f"({uids})")
            for path in self.made_dirs:
                _give(path, uid, uids)
            launch = self._launch = dataclasses.replace(launch, owner=uid)
        bind_check(launch)

    def loadable(self, identity: SessionRead) -> None:
        loadable(_identity(identity))

    async def load_check(self, link: EngineLink, *, bound: float, session_file: str, identity: SessionRead,
                         step: Callable[[str], None]) -> str | None:
        return await load_check(link, bound=bound, place=self.place(session_file), identity=_identity(identity),
                                step=step)

    def drift(self, identity: SessionRead) -> DriftConfig | None:
        read = _identity(identity)
        if not read.exists:
            return DriftConfig(read.header_id)
        return DriftConfig(read.header_id, baseline=baseline(read.size, read.sha256, read.lines, dev=read.dev,
                                                             ino=read.inode, leaf=read.leaf))

    def history(self, place: Place) -> tuple[str, PageReader]:
        return history_reader(_claude(place))

    def _sealed(self, argv: Sequence[str]) -> SealedLaunch:
        """The launch `argv` is: only the one `argv()` sealed (anything else is `unsealed-engine`)."""
        launch = self._launch
        if launch is None or list(argv) != launch.argv:
            raise ClaudeRpcRefusal("unsealed-engine", "the argv is not the one the seal made for this session")
        return launch


def _give(path: str, uid: int, uids: range) -> None:
    """`path` (a directory the seal made) made `uid`'s when it is this process's (made at construction) or a
    uid of `uids`' (an earlier execution's): never followed, and nobody else's taken (the seal's check then
    refuses the launch)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return  # the check refuses what must be there
    if st.st_uid != uid and (st.st_uid == os.geteuid() or st.st_uid in uids):
        os.chown(path, uid, -1, follow_symlinks=False)


def _claude(place: Place) -> ClaudePlace:
    """A place this adapter made (`ClaudeEngine.place`): the lifecycle hands back what the engine gave it."""
    assert isinstance(place, ClaudePlace), place
    return place


def _identity(identity: SessionRead) -> ClaudeSessionRead:
    assert isinstance(identity, ClaudeSessionRead), identity
    return identity
