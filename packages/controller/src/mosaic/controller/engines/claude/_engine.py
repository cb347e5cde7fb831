"""The Claude engine for the lifecycle (`ClaudeEngine`, the seam's `Engine`; `ClaudeSpec.engine()` makes one):
where a transcript is and what it holds (`engines/claude/_session`), the sealed launch, its pins and its
check at bind, whether Claude can load the session without writing to it, K8's load check
(`engines/claude/_launch`), the history pages (`engines/claude/_history`) and the core's rules
(`CLAUDE_RULES`).

The idle drift check (`engines/claude/_drift`): `drift` gives the claimed session id and, for a transcript that
existed at the claim, its baseline (the read K8 compared: identity, digest, lines, the recorded leaf), so the
first check goes on from the claim's bytes and proves the first prompt hangs on the leaf."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from mosaic.cgroup_cohort import EngineLimits
from mosaic.claude_rpc import ClaudeRpcRefusal, SealedLaunch
from mosaic.claude_rpc.seal import sealed_env
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
        self.state_dirs = state_dirs
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
                          api_key=self.spec.api_key, owner=self.spec.engine_uid)

    @property
    def config_dir(self) -> str:
        return self.spec.config_dir or self.env["CLAUDE_CONFIG_DIR"]

    def place(self, session_path: str) -> ClaudePlace:
        return claude_place(session_path, project=self.spec.project, seat=self.seat, config_dir=self.config_dir)

    def read(self, place: Place) -> ClaudeSessionRead:
        return read_transcript(_claude(place))

    def conversation(self, place: Place) -> str:
        return history_reader(_claude(place))[0]

    def argv(self, session_path: str) -> list[str]:
        place = self.place(session_path)
        self._launch = sealed_launch(self.spec, place, read_transcript(place))
        return self._launch.argv

    def pins(self, argv: Sequence[str]) -> Pins:
        return current_pins(self.spec, self._sealed(argv))

    def bind(self, argv: Sequence[str]) -> None:
        bind_check(self._sealed(argv))

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


def _claude(place: Place) -> ClaudePlace:
    """A place this adapter made (`ClaudeEngine.place`): the lifecycle hands back what the engine gave it."""
    assert isinstance(place, ClaudePlace), place
    return place


def _identity(identity: SessionRead) -> ClaudeSessionRead:
    assert isinstance(identity, ClaudeSessionRead), identity
    return identity
