"""Test helpers the other suites use too (conformance, smoke, the controller, the demo): the scripted model
server, the fake engine (``python -m mosaic.pi_rpc.testing.fake_engine``) with its control channel and hold
points, a harness that prepares the fake in a scratch tree (:func:`prepare_fake_engine`: argv, env, cwd and
control channel for any launcher) or runs it raw (:class:`FakeRun`), and the conformance suite that holds
the fake to the real binary (with its session seeds ``FLUSHED`` and ``NOTHINK``).

Nothing here is imported by the runtime package; it needs only the standard library (the smoke suite's
network namespace uses pyroute2 when it is installed). The conformance suite's engines (`real_engine`,
`fake_engine`) are in `mosaic.pi_rpc.testing.conformance`: here `fake_engine` names the public module
`mosaic.pi_rpc.testing.fake_engine`, the fake's process entry point.
"""

from mosaic.pi_rpc.testing._fake_control import HOLD_POINTS, FakeControl, Held
from mosaic.pi_rpc.testing.conformance import (
    CONFORMANCE,
    FLUSHED,
    NOTHINK,
    SCENARIOS,
    SCENARIOS_REF,
    Engine,
    EngineProcess,
    Script,
    ScriptError,
    Step,
    Transcript,
    diff_transcripts,
    load_golden,
    normalize,
    prepare_tree,
    record_goldens,
    run_normalized,
    run_script,
)
from mosaic.pi_rpc.testing.harness import (
    WAIT,
    FakeEngineSetup,
    FakeRun,
    child_env,
    fake_engine_command,
    prepare_fake_engine,
)
from mosaic.pi_rpc.testing.model_server import (
    DEFAULT_SCENARIOS,
    HttpError,
    ModelServer,
    RecordedRequest,
    Reply,
    Scenario,
    StreamText,
    StreamToolCall,
    models_json,
)

__all__ = [
    "CONFORMANCE",
    "DEFAULT_SCENARIOS",
    "Engine",
    "EngineProcess",
    "FLUSHED",
    "FakeControl",
    "FakeEngineSetup",
    "FakeRun",
    "HOLD_POINTS",
    "Held",
    "HttpError",
    "ModelServer",
    "NOTHINK",
    "RecordedRequest",
    "Reply",
    "SCENARIOS",
    "SCENARIOS_REF",
    "Scenario",
    "Script",
    "ScriptError",
    "Step",
    "StreamText",
    "StreamToolCall",
    "Transcript",
    "WAIT",
    "child_env",
    "diff_transcripts",
    "fake_engine_command",
    "load_golden",
    "models_json",
    "normalize",
    "prepare_fake_engine",
    "prepare_tree",
    "record_goldens",
    "run_normalized",
    "run_script",
]


def __dir__() -> list[str]:
    return sorted(__all__)
