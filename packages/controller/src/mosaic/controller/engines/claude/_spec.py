"""How to run the Claude engine (`ClaudeSpec`): the pinned Claude Code 2.1.283 or a test command (claude-rpc's
fake engine), sealed, in its project, with its scratch and config directories, its model endpoint, limits
and state directories."""

from __future__ import annotations

from dataclasses import dataclass

from mosaic.cgroup_cohort import EngineLimits

from ._engine import ClaudeEngine

__all__ = ["ClaudeSpec"]


@dataclass(frozen=True)
class ClaudeSpec:
    """How to run the engine, sealed (`engines/claude/_launch` rule 1): the pinned install in `claude_dir`
    (its pin is checked at construction and at bind, L7), or a test hook `command` (the fake engine: not
    pinned, its arguments and environment still sealed). `project` is the engine's cwd (an absolute real
    path: the transcript's slug is its), `seat` the seat's name, `scratch` the execution's scratch directory
    (`HOME`, `CLAUDE_CODE_TMPDIR` and, without `config_dir`, `CLAUDE_CONFIG_DIR` are made inside it, 0700),
    `config_dir` a configured `CLAUDE_CONFIG_DIR`. `base_url` and `api_key` are the model endpoint (the
    scripted server and its fake key in tests); `model` and `partial_messages` the seal's two options.
    `limits` and `state_dirs` as `PiSpec`'s; `engine_uid` below."""

    project: str
    seat: str
    scratch: str
    claude_dir: str | None = None
    command: tuple[str, ...] | None = None
    config_dir: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    partial_messages: bool = False
    limits: EngineLimits | None = None
    state_dirs: tuple[str, ...] = ()
    # The uid the engine runs as when it is not this process's (a contained cohort: the launcher's engine
    # account): the scratch directories the seal makes are given to it, and its private temp directory is
    # checked as its (claude-rpc `seal_launch(owner=)`). None: this process's uid.
    engine_uid: int | None = None

    def engine(self) -> ClaudeEngine:
        """The engine this spec describes, as the lifecycle uses it (the seam's `EngineFactory`)."""
        return ClaudeEngine(self, seat=self.seat, limits=self.limits, state_dirs=self.state_dirs)
