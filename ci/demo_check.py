#!/usr/bin/env python3
"""Check the demo's transcript (what `ci/demo.py` printed) and the facts it recorded (`--evidence`), step by
step (issue 12's six steps on Pi; issue 32's seventh, a Claude Code seat), and that what it printed is in
plain words (issue 21: ids shortened, no Pi source line numbers, no raw D-Bus text; issue 29: none of the
protocol's words, which --verbose adds). Exit 1, naming every failed check, when one does not hold.

    python ci/demo_check.py TRANSCRIPT EVIDENCE
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

from mosaic.controller.plain import shorten

# What a person must not read at the terminal: a Pi source citation ("agent-session.js 827-835"), systemctl's
# D-Bus error, a 32-hex id in full (a claim, an eligibility, a digest).
PI_SOURCE_LINES = re.compile(r"\b[\w.-]+\.(?:js|mjs|ts) \d+")
FULL_ID = re.compile(r"[0-9a-f]{32}")
# What belongs behind --verbose or in the records (issue 29): the protocol's words and ids.
TECHNICAL = re.compile(r"\b(?:incarnation|seam|R3-1|membershipComplete|leaf)\b|\bk\d+\b")


def checks(text: str, facts: dict[str, Any]) -> list[tuple[str, Callable[[], bool]]]:
    s1, s2, s3, s4, s5, s6, s7 = (facts.get(f"step{i}", {}) for i in range(1, 8))
    headings = [text.find(f"== step {i}:") for i in range(1, 8)]
    c7 = s7.get("force", {})
    return [
        ("every step ran, in order", lambda: all(h >= 0 for h in headings) and headings == sorted(headings)),
        # plain words (issue 21)
        ("the cohort route is said in plain words", lambda: re.search(
            r"^cohort route: (no systemd user manager: using a direct cgroup under \S+|a systemd user manager "
            r"answers: using a transient systemd scope for each engine)$", text, re.M) is not None),
        ("no raw D-Bus text", lambda: "Failed to connect to bus" not in text and "No medium found" not in text),
        ("no Pi source line numbers", lambda: PI_SOURCE_LINES.search(text) is None),
        ("no technical words (incarnation, seam, R3-1, a confirmation id, membershipComplete, leaf)",
         lambda: TECHNICAL.search(text) is None),
        ("the stop is said in plain words",
         lambda: "the engine was proven stopped: every process it started has ended" in text),
        ("ids are shortened (no 32-hex id in full)", lambda: FULL_ID.search(text) is None
         and shorten(facts["claim1"]) in text and facts["claim1"] not in text
         and shorten(s7["claim"]) in text and s7["claim"] not in text),
        # 1. two clients, one controls, the answer (with a tool call) streams to both
        ("1: A controls, B observes", lambda: s1["roles"] == ["controller", "observer"]),
        ("1: the receipt went admitted -> dispatched -> acknowledged -> working -> finished",
         lambda: s1["receipts"] == ["admitted", "dispatched", "acknowledged", "working", "finished"]),
        ("1: the turn completed", lambda: s1["label"] == "finished (completed)"),
        ("1: both clients render the same stream", lambda: s1["same_stream"] is True),
        ("1: the stream shows the tool call and its result",
         lambda: any("calls bash" in x for x in s1["transcript"])
         and any("tool result (bash): tool-ran-ok" in x for x in s1["transcript"])
         and any("Tool result was: tool-ran-ok." in x for x in s1["transcript"])),
        # 2. refusals
        ("2: the observer's prompt is refused `controller`", lambda: s2["B"] == "controller"),
        ("2: a '/' prompt is refused `text-policy`", lambda: s2["A"] == "text-policy"),
        ("2: the refusals are printed with their codes",
         lambda: "refused: controller" in text and "refused: text-policy" in text),
        # 3. takeover, interrupt (R3-1), admission reopens
        ("3: the takeover moved the generation by one", lambda: s3["generation"] == s1["generation"] + 1),
        ("3: B controls, A observes", lambda: s3["roles"] == ["observer", "controller"]),
        ("3: the interrupt reconciled", lambda: s3["stop"] == "reconciled"),
        ("3: the turn finished interrupted", lambda: s3["turnState"] == "interrupted"),
        ("3: admission reopened", lambda: s3["admission"] == "open"),
        # 4. force stop with a confirmation and a proof
        ("4: the confirmation named the execution and unit and counted the processes",
         lambda: s4["summary"]["execution"] == facts["claim1"] and s4["summary"]["unit"] == f"cohort-{facts['claim1']}.scope"
         and isinstance(s4["summary"]["members"], int) and s4["summary"]["members"] >= 1),
        ("4: the force stop ended stopped", lambda: s4["state"] == "stopped"),
        ("4: with a complete cohort proof", lambda: s4["membershipComplete"] is True and isinstance(s4["members"], int)),
        ("4: whose digest is printed (shortened)", lambda: bool(re.fullmatch(r"sha256:[0-9a-f]{64}", s4["digest"]))
         and shorten(s4["digest"]) in text),
        # 5. recover and relaunch
        ("5: a new claim id, the one recover reserved",
         lambda: s5["claim2"] == s5["record_claim"] != s5["claim1"] == facts["claim1"]),
        ("5: the relaunch is the recovered mode", lambda: s5["mode"] == "recovered"),
        ("5: recover moved the generation by one", lambda: s5["record_generation"] == s5["generation_before"] + 1),
        ("5: one more turn completed", lambda: s5["label"] == "finished (completed)"),
        ("5: the demo's last engine was stopped with a proof", lambda: s5["final_stop"] == "stopped"),
        # 6. the reader's view
        ("6: the reader answered", lambda: s6["rc"] == [0, 0, 0]),
        ("6: the catalogue lists the Claude Code session beside the Pi one, harness named",
         lambda: any(line.startswith(s6["claude"]["cid"]) and line.endswith("ok  (claude-code)")
                     for line in s6["catalogue"].splitlines())
         and any(line.startswith("pi-") and line.endswith("bytes  ok") for line in s6["catalogue"].splitlines())),
        ("6: the Claude directory's decoy is never listed", lambda: s6["claude"]["decoys"]
         and not any(d in s6["catalogue"] for d in s6["claude"]["decoys"])),
        ("6: the Claude Code session opens on its main branch, the binary's own turns in it",
         lambda: "branch main (default main" in s6["claude"]["text"]
         and all(x in s6["claude"]["text"] for x in ("hello one", "[toolCall Bash]", "linear-bash-ran"))),
        ("6: the session holds each prompt once, nothing replayed",
         lambda: s6["users"] == ["TOOLCALL please run it", "SLOW stream please", "Say hello again"]),
        ("6: the reader's page shows the whole conversation",
         lambda: all(x in s6["text"] for x in ("TOOLCALL please run it", "[toolCall bash]", "tool-ran-ok",
                                               "SLOW stream please", "Say hello again",
                                               "Hello from the fake model."))),
        # 7. a Claude Code seat (issue 32 item 7): take control, a permission request answered, interrupt, force stop
        ("7: the sealed Claude Code 2.1.283 launched in its own cohort, contained",
         lambda: re.search(r"^controller 3 launched the sealed Claude Code 2\.1\.283 under claim "
                           + re.escape(shorten(s7["claim"])) + r" in \S+ \(engine pid \d+; containment held\)",
                           text, re.M) is not None and s7["unit"] == f"cohort-{s7['claim']}.scope"),
        ("7: D took control", lambda: s7["role"] == "controller" and s7["generation"] == 2),
        ("7: Claude asked permission for the Bash call, shown with its input",
         lambda: s7["decision"]["method"] == "can_use_tool" and s7["decision"]["tool"] == "Bash"
         and s7["decision"]["input"]["command"] == f"mkdir {s7['path']}"
         and "[D] Claude asks permission to use Bash (shown to every client, as data): {" in text),
        ("7: only allow once and deny are offered; the three widening choices are shown disabled",
         lambda: s7["decision"]["choices"] == ["allow once", "deny"] and len(s7["decision"]["refused"]) == 3
         and all(f"      {c}" in text for c in s7["decision"]["refused"])),
        ("7: allowed once, the tool ran (its folder is there) and the turn completed",
         lambda: s7["made"] is True and s7["allowed"] == "finished (completed)"
         and "[D] answered allow once: prompt demo-7: finished (completed); the folder it asked to make is there: "
             "yes" in text),
        ("7: the stream shows the Bash call and its result",
         lambda: any(x.startswith("  assistant calls Bash(") for x in s7["transcript"])
         and any(x.startswith("  tool Bash(") and "(error)" not in x for x in s7["transcript"])
         and any("tool result seen (is_error=false)" in x for x in s7["transcript"])),
        ("7: the interrupt came while the model streamed the slow reply, and cut it short",
         lambda: 0 < s7["model"]["sent_at_interrupt"] <= s7["model"]["sent"] < s7["model"]["pieces"]
         and s7["model"]["outcome"] == "disconnected"),
        ("7: the interrupt reconciled, the turn finished interrupted, admission reopened",
         lambda: s7["stop"] == "reconciled" and s7["turnState"] == "interrupted" and s7["admission"] == "open"
         and "[D] the answer stopped (reconciled); prompt demo-8: finished (interrupted); new prompts open; "
             "Claude closed the model's reply early" in text),
        ("7: the force stop's confirmation named Claude's execution and unit",
         lambda: c7["summary"]["execution"] == s7["claim"] and c7["summary"]["unit"] == s7["unit"]
         and isinstance(c7["summary"]["members"], int) and c7["summary"]["members"] >= 1),
        ("7: the force stop ended stopped, with a complete cohort proof whose digest is printed (shortened)",
         lambda: c7["state"] == "stopped" and c7["membershipComplete"] is True and isinstance(c7["members"], int)
         and bool(re.fullmatch(r"sha256:[0-9a-f]{64}", c7["digest"])) and c7["digest"] != s4["digest"]
         and f"proof {shorten(c7['digest'])})" in text),
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        text = f.read()
    with open(argv[1], encoding="utf-8") as f:
        facts = json.load(f)
    failed = 0
    for name, check in checks(text, facts):
        try:
            ok = bool(check())
        except (KeyError, TypeError, IndexError) as e:
            ok = False
            name += f" (missing: {e!r})"
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        failed += not ok
    print(f"demo check: {failed} failed" if failed else "demo check: every step holds")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
