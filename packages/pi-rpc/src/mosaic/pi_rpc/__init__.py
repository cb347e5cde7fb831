"""mosaic.pi_rpc: LF framing, the engine link and its write outcomes, the Pi pin and seal, the Pi installer,
and the testing module (fake engine, scripted model server, conformance suite).

* Framing (:class:`RecordDecoder`, :func:`encode_record`): LF only, one CR stripped, UTF-8 per record, a
  record over the cap poisons (brief §1, fixture E2).
* The engine link: :class:`LinkCore` (sans-io: write outcomes written / acknowledged / unknown, poison,
  correlation by id, the two prompt rules of FACTS.md a5 as API) and :class:`EngineLink` (its asyncio shell
  over two pipe fds).
* The seal and the pin: :func:`check_seal`, :func:`build_sealed_argv`, :func:`check_pin`,
  :func:`sealed_engine_argv`; refusals are :class:`PiRpcRefusal` values (``unsealed-engine``,
  ``engine-pin-mismatch``).
* The installer (issue 2): :func:`install_pi`, :func:`ensure_pi`, :func:`verify_pi`.
"""

from mosaic.pi_rpc._framing import (
    DEFAULT_MAX_RECORD_BYTES,
    FramingError,
    RecordDecoder,
    encode_record,
    js_json_dumps,
)
from mosaic.pi_rpc._install import (
    NODE_PACKAGE,
    NODE_VERSION,
    PI_INTEGRITY,
    PI_PACKAGE,
    PI_VERSION,
    PiInstall,
    PiInstallError,
    PinMismatch,
    bundle_manifest,
    ensure_pi,
    install_pi,
    pin_data,
    verify_pi,
)
from mosaic.pi_rpc._link import (
    DEFAULT_BOUND,
    Command,
    CommandOutcome,
    EngineEvent,
    LateResponse,
    LinkCore,
    LinkEvent,
    LinkPoisoned,
    LinkUsageError,
    NotEvidence,
    OutcomeKnown,
    OutcomeUnknown,
    Poisoned,
    PromptNotAcknowledged,
    PromptStateEvidence,
    ProtocolViolation,
    TruncatedOutput,
    UnknownReason,
)
from mosaic.pi_rpc._pin import (
    CHORD_INTEGRITY,
    CHORD_PACKAGE,
    check_pin,
    default_engine_command,
    pin_mismatches,
    sealed_engine_argv,
)
from mosaic.pi_rpc._refusal import CODES, PiRpcRefusal
from mosaic.pi_rpc._seal import (
    OPTIONAL_FLAGS,
    SEALED_FLAGS,
    THINKING_LEVELS,
    build_sealed_argv,
    check_pre_args,
    check_seal,
)
from mosaic.pi_rpc._shell import EngineLink, OutcomeUnknownError

__all__ = [
    "CHORD_INTEGRITY",
    "CHORD_PACKAGE",
    "CODES",
    "Command",
    "CommandOutcome",
    "DEFAULT_BOUND",
    "DEFAULT_MAX_RECORD_BYTES",
    "EngineEvent",
    "EngineLink",
    "FramingError",
    "LateResponse",
    "LinkCore",
    "LinkEvent",
    "LinkPoisoned",
    "LinkUsageError",
    "NODE_PACKAGE",
    "NODE_VERSION",
    "NotEvidence",
    "OPTIONAL_FLAGS",
    "OutcomeKnown",
    "OutcomeUnknown",
    "OutcomeUnknownError",
    "PI_INTEGRITY",
    "PI_PACKAGE",
    "PI_VERSION",
    "PiInstall",
    "PiInstallError",
    "PiRpcRefusal",
    "PinMismatch",
    "Poisoned",
    "PromptNotAcknowledged",
    "PromptStateEvidence",
    "ProtocolViolation",
    "RecordDecoder",
    "SEALED_FLAGS",
    "THINKING_LEVELS",
    "TruncatedOutput",
    "UnknownReason",
    "build_sealed_argv",
    "bundle_manifest",
    "check_pin",
    "check_pre_args",
    "check_seal",
    "default_engine_command",
    "encode_record",
    "ensure_pi",
    "install_pi",
    "js_json_dumps",
    "pin_data",
    "pin_mismatches",
    "sealed_engine_argv",
    "verify_pi",
]
