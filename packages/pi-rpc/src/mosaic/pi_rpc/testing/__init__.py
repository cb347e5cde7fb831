"""Test helpers that later issues reuse (conformance, smoke, the controller, the demo): the scripted model
server, the fake engine (``python -m mosaic.pi_rpc.testing.fake_engine``) with its control channel and hold
points, a harness that prepares the fake in a scratch tree (:func:`prepare_fake_engine`: argv, env, cwd and
control channel for any launcher) or runs it raw (:class:`FakeRun`), and the conformance suite that holds
the fake to the real binary (with its session seeds ``FLUSHED`` and ``NOTHINK``).

Nothing here is imported by the runtime package; it needs only the standard library (the smoke suite's
network namespace uses pyroute2 when it is installed).
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
    ScenarioError,
    Script,
    Step,
    Transcript,
    diff_transcripts,
    fake_engine,
    load_golden,
    normalize,
    prepare_tree,
    real_engine,
    record_goldens,
    run_normalized,
    run_scenario,
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
    "ScenarioError",
    "Script",
    "Step",
    "StreamText",
    "StreamToolCall",
    "Transcript",
    "WAIT",
    "child_env",
    "diff_transcripts",
    "fake_engine",
    "fake_engine_command",
    "load_golden",
    "models_json",
    "normalize",
    "prepare_fake_engine",
    "prepare_tree",
    "real_engine",
    "record_goldens",
    "run_normalized",
    "run_scenario",
]
