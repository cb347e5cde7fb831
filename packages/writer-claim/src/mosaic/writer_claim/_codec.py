"""The revision record's JSON form, and its strict reader.

The format is documented in the package README ("Record format") and as JSON Schema in
`revision.schema.json` beside this file; the tests hold every revision they produce to that schema.

Reading is strict because §2 "Unreadable revision" makes any damage visible: a head that is not exactly
this format (a missing or extra field, a wrong type, a key or number that does not match where the file
sits) is unreadable, and an unreadable head holds its key as uncertain.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mosaic.safe_open import HostIdentity, ProcessRef, canonical_json

from ._model import (
    Binding,
    Eligibility,
    KeyKind,
    Owner,
    Pins,
    ProcessIdentity,
    ProofKind,
    ProofRef,
    Revision,
    SeatKey,
    SessionKey,
    State,
    StopInfo,
    Writer,
    WriterRole,
    _FrozenObject,
    thaw_json,
)

# /2: the field set with the `cohort` reference. Reading is strict: any other format (/1 too) is unreadable.
FORMAT = "mosaic-writer-claim/2"
# /3 is /2 with one more field, `eligibility` (§6 "Recover"), required there and absent from /2. A revision
# is written in /3 exactly when it carries an eligibility, so every other revision is a /2 revision byte
# for byte, which a /2-only reader reads, and both are read here. The format string names the field set: a
# /2-only reader reads a /3 revision as unreadable (a wrong format) rather than guessing at an extra
# field, which holds the key as uncertain, never free.
FORMAT_ELIGIBILITY = "mosaic-writer-claim/3"
# /4 is /3 with one more field, `engineUid` (the uid allocated for the claim's engine), required there, and
# `eligibility` required too but null when the claim has none. A revision is written in /4 exactly when it
# carries an engine uid: every other one is byte for byte the /2 or /3 revision it was, and a reader that
# knows only those reads a /4 revision as unreadable (held, never free).
FORMAT_ENGINE_UID = "mosaic-writer-claim/4"
# A revision is about 1.5 KiB without a cohort reference (at most MAX_COHORT_BYTES = 16 KiB); anything
# past this cap is not one of ours and is read as unreadable.
MAX_REVISION_BYTES = 64 * 1024


class RecordError(ValueError):
    """The bytes are not a valid revision (the message says why)."""


def _process_json(p: ProcessIdentity) -> dict[str, object]:
    return {"pid": p.pid, "startTime": p.start_time, "pidNamespace": p.pid_namespace}


def revision_to_json(rev: Revision) -> dict[str, object]:
    """The JSON object of a revision (README "Record format"): format /2, or /3 with `eligibility` when the
    revision carries one, or /4 with `engineUid` (and `eligibility`, null or not) when it carries that."""
    return _revision_json(rev, None if rev.cohort is None else thaw_json(rev.cohort))


def _revision_json(rev: Revision, cohort: object) -> dict[str, object]:
    b = rev.binding
    out: dict[str, object] = {
        "format": (FORMAT_ENGINE_UID if rev.engine_uid is not None
                   else FORMAT if rev.eligibility is None else FORMAT_ELIGIBILITY),
        "key": rev.key,
        "revision": rev.number,
        "seat": rev.seat.to_json(),
        "session": rev.session.to_json(),
        "claimId": rev.claim_id,
        "state": rev.state.value,
        "bindingId": b.binding_id,
        "harness": b.harness,
        "conversation": b.conversation,
        "branch": b.branch,
        "leaf": b.leaf,
        "pins": {
            "engineVersion": b.pins.engine_version,
            "binarySha256": b.pins.binary_sha256,
            "argvDigest": b.pins.argv_digest,
        },
        "host": rev.host.to_dict(),
        "owner": {**_process_json(rev.owner.process), "incarnation": rev.owner.incarnation},
        "writer": {**_process_json(rev.writer.process), "incarnation": rev.writer.incarnation,
                   "role": rev.writer.role},
        "unitName": rev.unit_name,
        "spawnMarker": rev.spawn_marker,
        "invocationId": rev.invocation_id,
        "engine": None if rev.engine is None else rev.engine.to_dict(),
        "cohort": cohort,
        "generation": rev.generation,
        "stop": None
        if rev.stop is None
        else {"stopId": rev.stop.stop_id, "confirmation": rev.stop.confirmation, "phase": rev.stop.phase},
        "proof": None
        if rev.proof is None
        else {"kind": rev.proof.kind.value, "digest": rev.proof.digest, "detail": dict(rev.proof.detail)},
        "reason": rev.reason,
        "publishedAt": rev.published_at,
    }
    if rev.eligibility is not None or rev.engine_uid is not None:
        out["eligibility"] = (None if rev.eligibility is None
                              else {"id": rev.eligibility.id, "taken": rev.eligibility.taken})
    if rev.engine_uid is not None:
        out["engineUid"] = rev.engine_uid
    return out


def encode_revision(rev: Revision) -> bytes:
    """The bytes published for a revision: canonical JSON and a trailing newline.

    These are exactly the bytes of `canonical_json(revision_to_json(rev)) + b"\\n"` (sorted keys, no
    spaces, UTF-8), written out field by field in that order rather than by building the object and
    sorting and encoding it generically, which cost about three times as much for each publication. The
    strings go through the `json` module's own string encoder, the integers through `int.__repr__` (what
    `json` does for an int), the proof's detail through `canonical_json`. What every revision of a claim
    written by one store shares (`_shared_text`: binding, keys, host, owner, writer, claim ID, unit name,
    generation) is written once and kept; the cohort reference is the same read-only object in every
    revision of a claim and keeps its own canonical bytes (`_FrozenObject.encoded`), which are spliced in.
    A string that is not valid Unicode (a lone surrogate) raises UnicodeEncodeError, as `canonical_json`
    does. `test_record.py` holds the two to the same bytes for every optional field present and absent,
    for any text, and for revisions of several claims in turn."""
    cohort = rev.cohort
    if cohort is not None and not isinstance(cohort, _FrozenObject):
        return canonical_json(revision_to_json(rev)) + b"\n"
    q, n = _quote, int.__repr__
    shared = _shared_text(rev)
    tail: list[str] = [shared[1]]
    if rev.eligibility is not None or rev.engine_uid is not None:
        e = rev.eligibility
        tail += (',"eligibility":', "null" if e is None else
                 f'{{"id":{q(e.id)},"taken":{"true" if e.taken else "false"}}}')
    engine = rev.engine
    tail += (',"engine":', "null" if engine is None else
             f'{{"pid":{n(engine.pid)},"startTime":{n(engine.start_time)}}}')
    if rev.engine_uid is not None:
        tail += (',"engineUid":', n(rev.engine_uid))
    fmt = (FORMAT_ENGINE_UID if rev.engine_uid is not None else FORMAT if rev.eligibility is None
           else FORMAT_ELIGIBILITY)
    stop, proof = rev.stop, rev.proof
    tail += (
        ',"format":', q(fmt), shared[2], "null" if rev.invocation_id is None else q(rev.invocation_id),
        ',"key":', q(rev.key), shared[3],
        "null" if proof is None else "".join((
            '{"detail":', canonical_json(dict(proof.detail)).decode(), ',"digest":', q(proof.digest),
            ',"kind":', q(proof.kind.value), "}")),
        ',"publishedAt":', q(rev.published_at), ',"reason":', q(rev.reason), ',"revision":', n(rev.number),
        shared[4], "true" if rev.spawn_marker else "false", ',"state":', q(rev.state.value),
        ',"stop":', "null" if stop is None else "".join((
            '{"confirmation":', "null" if stop.confirmation is None else q(stop.confirmation),
            ',"phase":', q(stop.phase), ',"stopId":', q(stop.stop_id), "}")),
        shared[5],
    )
    return b"".join((shared[0], b"null" if cohort is None else cohort.encoded, "".join(tail).encode()))


def _shared_text(rev: Revision) -> tuple[bytes, str, str, str, str, str]:
    """The text of what the revisions of one claim written by one store share, in the six runs between
    the fields that change: up to the cohort (as bytes), the conversation, generation to invocation ID,
    leaf to proof, seat and session to the spawn marker, and the unit name and writer to the end. Kept for
    the last claim written: the same binding, keys, host, owner and writer process objects (the revisions
    of a claim carry the very objects they were built from) and the same claim ID, unit name, generation,
    writer incarnation and role; anything else is written again."""
    b, w = rev.binding, rev.writer
    wp = w.process
    kept = _shared
    if kept is not None:
        k = kept[0]
        if (k[0] is b and k[1] is rev.seat and k[2] is rev.session and k[3] is rev.host and k[4] is rev.owner
                and k[5] is wp and k[6] == rev.claim_id and k[7] == rev.unit_name and k[8] == rev.generation
                and k[9] == w.incarnation and k[10] == w.role):
            return kept[1]
    key: tuple[object, ...] = (b, rev.seat, rev.session, rev.host, rev.owner, wp, rev.claim_id, rev.unit_name,
                               rev.generation, w.incarnation, w.role)
    q, n = _quote, int.__repr__
    pins, host, owner, seat, session = b.pins, rev.host, rev.owner, rev.seat, rev.session
    op = owner.process
    texts = (
        "".join(('{"bindingId":', q(b.binding_id), ',"branch":', q(b.branch), ',"claimId":', q(rev.claim_id),
                 ',"cohort":')).encode(),
        "".join((',"conversation":', q(b.conversation))),
        "".join((',"generation":', n(rev.generation), ',"harness":', q(b.harness),
                 ',"host":{"bootId":', q(host.boot_id), ',"machineId":', q(host.machine_id), '},"invocationId":')),
        "".join((',"leaf":', "null" if b.leaf is None else q(b.leaf),
                 ',"owner":{"incarnation":', q(owner.incarnation), ',"pid":', n(op.pid), ',"pidNamespace":',
                 q(op.pid_namespace), ',"startTime":', n(op.start_time),
                 '},"pins":{"argvDigest":', q(pins.argv_digest), ',"binarySha256":', q(pins.binary_sha256),
                 ',"engineVersion":', q(pins.engine_version), '},"proof":')),
        "".join((',"seat":{"project":', q(seat.project), ',"seat":', q(seat.seat), ',"workspace":',
                 q(seat.workspace), '},"session":{"harness":', q(session.harness), ',"sessionId":',
                 q(session.session_id), '},"spawnMarker":')),
        "".join((',"unitName":', q(rev.unit_name), ',"writer":{"incarnation":', q(w.incarnation), ',"pid":',
                 n(wp.pid), ',"pidNamespace":', q(wp.pid_namespace), ',"role":', q(w.role), ',"startTime":',
                 n(wp.start_time), "}}\n")),
    )
    _remember(key, texts)
    return texts


def _remember(key: tuple[object, ...], texts: tuple[bytes, str, str, str, str, str]) -> None:
    global _shared
    _shared = (key, texts)


# (key, texts) of the last claim `_shared_text` wrote: one tuple, replaced whole.
_shared: tuple[tuple[object, ...], tuple[bytes, str, str, str, str, str]] | None = None

# The `json` module's encoder of one string (`"` and the escapes, non-ASCII kept: ensure_ascii=False).
_quote: Callable[[str], str] = json.encoder.encode_basestring


# -- strict reading ----------------------------------------------------------------------------------------


def _obj(value: object, what: str, keys: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise RecordError(f"{what} is not an object")
    got = set(value)
    if got != keys:
        missing, extra = sorted(keys - got), sorted(got - keys)
        raise RecordError(f"{what}: missing {missing}, unexpected {extra}")
    return value


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise RecordError(f"{what} is not a string")
    return value


def _opt_str(value: object, what: str) -> str | None:
    return None if value is None else _str(value, what)


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordError(f"{what} is not an integer")
    return value


def _process(value: object, what: str, extra: set[str]) -> tuple[ProcessIdentity, Mapping[str, Any]]:
    o = _obj(value, what, {"pid", "startTime", "pidNamespace"} | extra)
    return (
        ProcessIdentity(_int(o["pid"], f"{what}.pid"), _int(o["startTime"], f"{what}.startTime"),
                        _str(o["pidNamespace"], f"{what}.pidNamespace")),
        o,
    )


_TOP = {
    "format", "key", "revision", "seat", "session", "claimId", "state", "bindingId", "harness",
    "conversation", "branch", "leaf", "pins", "host", "owner", "writer", "unitName", "spawnMarker",
    "invocationId", "engine", "cohort", "generation", "stop", "proof", "reason", "publishedAt",
}


def revision_from_json(value: object) -> Revision:
    """Build a revision from its JSON object, refusing anything that is not exactly one of the formats:
    /2 (no `eligibility`), /3 (with it) or /4 (with `engineUid`, and `eligibility` null or not)."""
    if not isinstance(value, dict):
        raise RecordError("revision is not an object")
    fmt = value.get("format")
    formats = {FORMAT: _TOP, FORMAT_ELIGIBILITY: _TOP | {"eligibility"},
               FORMAT_ENGINE_UID: _TOP | {"eligibility", "engineUid"}}
    fields = formats.get(fmt) if isinstance(fmt, str) else None
    if fields is None:
        raise RecordError(f"format is {fmt!r}, not {FORMAT!r}, {FORMAT_ELIGIBILITY!r} or {FORMAT_ENGINE_UID!r}")
    o = _obj(value, "revision", fields)
    eligibility = None
    engine_uid = None
    if fmt == FORMAT_ENGINE_UID:
        engine_uid = _int(o["engineUid"], "engineUid")
    if fmt == FORMAT_ELIGIBILITY or (fmt == FORMAT_ENGINE_UID and o["eligibility"] is not None):
        el = _obj(o["eligibility"], "eligibility", {"id", "taken"})
        if not isinstance(el["taken"], bool):
            raise RecordError("eligibility.taken is not a bool")
        eligibility = Eligibility(_str(el["id"], "eligibility.id"), el["taken"])
    key = o["key"]
    if key not in ("seat", "session"):
        raise RecordError(f"key {key!r} is not seat or session")
    seat = _obj(o["seat"], "seat", {"seat", "project", "workspace"})
    session = _obj(o["session"], "session", {"harness", "sessionId"})
    pins = _obj(o["pins"], "pins", {"engineVersion", "binarySha256", "argvDigest"})
    host = _obj(o["host"], "host", {"machineId", "bootId"})
    owner_p, owner = _process(o["owner"], "owner", {"incarnation"})
    writer_p, writer = _process(o["writer"], "writer", {"incarnation", "role"})
    engine = None
    if o["engine"] is not None:
        e = _obj(o["engine"], "engine", {"pid", "startTime"})
        engine = ProcessRef(_int(e["pid"], "engine.pid"), _int(e["startTime"], "engine.startTime"))
    cohort = o["cohort"]
    if cohort is not None and not isinstance(cohort, dict):
        raise RecordError("cohort is not an object")
    stop = None
    if o["stop"] is not None:
        s = _obj(o["stop"], "stop", {"stopId", "confirmation", "phase"})
        stop = StopInfo(_str(s["stopId"], "stop.stopId"), _opt_str(s["confirmation"], "stop.confirmation"),
                        _str(s["phase"], "stop.phase"))
    proof = None
    if o["proof"] is not None:
        p = _obj(o["proof"], "proof", {"kind", "digest", "detail"})
        if not isinstance(p["detail"], dict):
            raise RecordError("proof.detail is not an object")
        proof = ProofRef(ProofKind(_str(p["kind"], "proof.kind")), _str(p["digest"], "proof.digest"), p["detail"])
    spawn = o["spawnMarker"]
    if not isinstance(spawn, bool):
        raise RecordError("spawnMarker is not a bool")
    kind: KeyKind = "seat" if key == "seat" else "session"
    role: WriterRole
    if writer["role"] == "owner":
        role = "owner"
    elif writer["role"] == "restart":
        role = "restart"
    else:
        raise RecordError(f"writer.role {writer['role']!r} is not owner or restart")
    return Revision(
        key=kind,
        number=_int(o["revision"], "revision"),
        seat=SeatKey(_str(seat["seat"], "seat.seat"), _str(seat["project"], "seat.project"),
                     _str(seat["workspace"], "seat.workspace")),
        session=SessionKey(_str(session["harness"], "session.harness"),
                           _str(session["sessionId"], "session.sessionId")),
        claim_id=_str(o["claimId"], "claimId"),
        state=State(_str(o["state"], "state")),
        binding=Binding(
            binding_id=_str(o["bindingId"], "bindingId"),
            harness=_str(o["harness"], "harness"),
            conversation=_str(o["conversation"], "conversation"),
            branch=_str(o["branch"], "branch"),
            leaf=_opt_str(o["leaf"], "leaf"),
            pins=Pins(_str(pins["engineVersion"], "pins.engineVersion"),
                      _str(pins["binarySha256"], "pins.binarySha256"),
                      _str(pins["argvDigest"], "pins.argvDigest")),
        ),
        host=HostIdentity(_str(host["machineId"], "host.machineId"), _str(host["bootId"], "host.bootId")),
        owner=Owner(owner_p, _str(owner["incarnation"], "owner.incarnation")),
        writer=Writer(writer_p, _str(writer["incarnation"], "writer.incarnation"), role),
        unit_name=_str(o["unitName"], "unitName"),
        spawn_marker=spawn,
        invocation_id=_opt_str(o["invocationId"], "invocationId"),
        engine=engine,
        cohort=cohort,
        generation=_int(o["generation"], "generation"),
        stop=stop,
        proof=proof,
        reason=_str(o["reason"], "reason"),
        published_at=_str(o["publishedAt"], "publishedAt"),
        eligibility=eligibility,
        engine_uid=engine_uid,
    )


def decode_revision(data: bytes, *, key: KeyKind, dirname: str, number: int) -> Revision:
    """Parse the bytes of `r<number>.json` in key directory `dirname`, or raise RecordError.

    Beyond the format, the revision must say where it sits: its `key` and its number must match the
    chain and file name, and the key directory must be the one its own key hashes to. A revision copied
    or renamed into another place is therefore unreadable, never mistaken for that place's head.
    """
    if len(data) > MAX_REVISION_BYTES:
        raise RecordError(f"{len(data)} bytes is over the {MAX_REVISION_BYTES}-byte cap")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"not JSON: {e}") from None
    except RecursionError:
        # 64 KiB of brackets nests deeper than the parser recurses: damage, never a revision (W16).
        raise RecordError("not JSON: nested too deeply") from None
    try:
        rev = revision_from_json(value)
    except RecordError:
        raise
    except (ValueError, TypeError) as e:
        raise RecordError(str(e)) from None
    if rev.key != key:
        raise RecordError(f"a {rev.key} revision in a {key} chain")
    if rev.number != number:
        raise RecordError(f"revision {rev.number} stored as number {number}")
    if rev.dirname != dirname:
        raise RecordError("the revision's own key does not hash to this key directory")
    if data != encode_revision(rev):
        # Not canonical: not written by this format's writer (or altered after). Reading it anyway would
        # accept bytes no publisher produced.
        raise RecordError("the bytes are not the canonical encoding of the record")
    return rev
