#!/usr/bin/env python3
"""Check the demo's `--interactive` run as a person would use it (issues 20 and 29): `ci/demo.py --interactive`
in a private tmux server (its own socket name, 100x24), inside the loopback-only network namespace, with the
real sealed Pi 0.85.1 under a cohort; then, through the keys of mosaic-terminal: take control, a prompt (a
tool call), a second one (thinking), a long stream watched while scrolled up (the view holds still and
counts the new rows below), interrupt (Esc), force stop (with its confirmation and the cohort proof; its
next step said once), recover (with its confirmation; the next step names the launch), launch again (the
demo launches a controller from the record; Ctrl-O connects), take control again, prompt again, quit. No
traceback anywhere. Each step prints one line; the first that does not hold prints the screen and exits 1.

    python ci/demo_interactive_check.py [--screens FILE]    (root, like ci/demo.py; run by `nox -s demo`)

`--screens FILE` writes the screen after each step there (text, as capture-pane shows it): the captures in
packages/mediated-terminal/README.md come from it.

It leaves nothing: on success the terminal quits and the demo removes what it made (its own cleanup); on a
failure it quits the terminal the same way (Ctrl-C) before it kills its tmux server by name.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from mosaic.mediated_terminal.testing import TmuxError, TmuxTerminal

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[1])
WIDTH, HEIGHT = 100, 24
WAIT = 90.0  # the real Pi's launch and a turn through the scripted model, on a busy 2-core machine
STATUS_STARTS = ("You control this conversation", "Watching (Ctrl-T takes control)", "NOT CONNECTED", "Attaching")


class Failed(Exception):
    pass


def label_row(rows: list[str]) -> int:
    """mosaic-terminal's composer label (the lowest row that starts " composer"); the regions above it grow
    (the notes with a long newest note, the composer with its text), so they are found from it."""
    return next((i for i in range(len(rows) - 1, -1, -1) if rows[i].startswith(" composer")), HEIGHT - 5)


def status_row(rows: list[str]) -> int:
    return next((i for i in range(label_row(rows) - 4, 0, -1) if rows[i].strip().startswith(STATUS_STARTS)),
                HEIGHT - 12)


def status(rows: list[str]) -> str:
    return rows[status_row(rows)].strip()


def transcript(rows: list[str]) -> list[str]:
    return rows[1:status_row(rows)]


def notes(rows: list[str]) -> str:
    """Every notes row (between the status and the three prompt rows), wrapped lines joined again."""
    return " ".join(r.strip() for r in rows[status_row(rows) + 1:label_row(rows) - 3] if r.strip())


def fixed(rows: list[str]) -> list[str]:
    """The transcript rows down to the streaming reply's first row (which grows in place), with its index."""
    shown = transcript(rows)
    cut = next((i for i, r in enumerate(shown) if r.startswith("assistant (streaming)")), len(shown))
    return [*shown[:cut], f"streaming at row {cut}"]


def below(rows: list[str]) -> int | None:
    found = re.search(r"scrolled up: (\d+) new below", status(rows))
    return int(found.group(1)) if found else None


class Check:
    def __init__(self, term: TmuxTerminal, screens: Path | None = None) -> None:
        self.term = term
        self.step = 0
        self.screens = screens
        self.shots: list[str] = []

    async def until(self, predicate: Callable[[list[str]], bool], what: str) -> list[str]:
        try:
            return await self.term.wait_for(predicate, what, WAIT)
        except AssertionError as exc:
            raise Failed(str(exc)) from None

    async def text(self, text: str) -> list[str]:
        return await self.until(lambda rows: any(text in r for r in rows), repr(text))

    async def ok(self, what: str) -> None:
        self.step += 1
        print(f"interactive {self.step}: {what}: ok", flush=True)
        await self.shot(f"{self.step}: {what}")

    async def shot(self, label: str) -> None:
        """With --screens: the screen now, under `label`."""
        if self.screens is not None:
            rows = await self.term.screen()
            self.shots.append(f"== {label}\n" + "\n".join(rows).rstrip("\n") + "\n")
            self.screens.write_text("\n".join(self.shots))

    async def run(self) -> None:
        term = self.term
        await self.text("composer disabled: observer (Ctrl-T takes control)")
        await self.ok("mosaic-terminal attached to the demo's controller as an observer")
        await term.keys("C-t")
        rows = await self.text("you control the conversation now (generation 2)")
        if not status(rows).startswith("You control this conversation"):
            raise Failed(f"the status after Ctrl-T: {status(rows)!r}")
        await self.ok("Ctrl-T took control (generation 2)")
        for prompt, answer in (("TOOLCALL please run it", "assistant: Tool result was: tool-ran-ok."),
                               ("THINK about it", "assistant: (thinking) Let me think about this.")):
            await term.type(prompt)
            await term.keys("Enter")
            await self.text(f'prompt "{prompt}": done')
            await self.text(answer)
        await self.ok("two prompts: a tool call with its result, then thinking and text, each receipt done")
        await term.type("SLOW stream please")
        await term.keys("Enter")
        await self.until(lambda r: any(x.startswith("assistant (streaming): tick") for x in transcript(r)),
                         "the slow reply to stream")
        await term.keys("PPage")
        rows = await self.until(lambda r: below(r) is not None, "the view to scroll up")
        held, first = fixed(rows), below(rows)
        assert first is not None
        rows = await self.until(lambda r: (below(r) or 0) > first or fixed(r) != held, "new rows to arrive below")
        if fixed(rows) != held:
            raise Failed("scrolled up, the view moved while the reply streamed:\n" + "\n".join(rows))
        await self.ok(f"scrolled up while Pi streamed: the view held still, new rows below {first} -> {below(rows)}")
        await term.keys("Escape")
        rows = await self.text('prompt "SLOW stream please": done (interrupted)')
        await self.until(lambda r: "interrupt: reconciled" in notes(r), "the interrupt's end")
        await self.ok("Esc interrupted the stream: the stop reconciled, the receipt done (interrupted)")
        await term.keys("NPage", "NPage", "NPage", "NPage")
        await term.keys("C-k")
        rows = await self.text("y: force stop    n: cancel")
        await self.shot("the force-stop confirmation")
        screen = "\n".join(rows)
        if "Scope: cgroup unit " not in screen or not re.search(r"Processes in it now: \d+", screen):
            raise Failed("the force-stop confirmation does not name the cohort and count it:\n" + screen)
        await term.keys("y")
        await self.until(lambda r: "force stop: stopped with a proof (" in notes(r) and "digest sha256:" in notes(r),
                         "the force stop's proof")
        rows = await self.until(lambda r: "next: Ctrl-R recovers" in notes(r), "the next step after the stop")
        if notes(rows).count("next:") != 1:
            raise Failed("the next step after the stop is said more than once:\n" + "\n".join(rows))
        await self.ok("Ctrl-K, y: the force stop named its cohort, ended stopped with a proof, and offered recover once")
        await term.keys("C-r")
        await self.text("y: recover    n: cancel")
        await self.shot("the recover confirmation")
        await term.keys("y")
        # The demo launches at once, so the note that the connection went may already stand below these two.
        rows = await self.until(lambda r: "next: the demo, as the launcher" in notes(r), "the recovery's next step")
        await self.shot("the recovery's next step")
        record = re.search(r"--eligibility (elig-[0-9a-f]{32})", notes(rows))
        if record is None:
            raise Failed("the next step does not name the eligibility record:\n" + "\n".join(rows))
        await self.ok(f"Ctrl-R, y: recovered ({record.group(1)[:9]}…); the next step names the launch from it")
        await self.until(lambda r: status(r).startswith("NOT CONNECTED"), "the recovered controller to close")
        for _ in range(int(WAIT)):  # Ctrl-O until the demo's new controller answers (each try is one line)
            await term.keys("C-o")
            rows = await self.until(lambda r: "reconnected to a new controller" in notes(r)
                                    or "reconnect failed" in notes(r), "Ctrl-O's answer")
            if "reconnected to a new controller" in notes(rows):
                break
            await asyncio.sleep(1.0)  # a person's pause before trying again; not a synchronisation
        else:
            raise Failed("Ctrl-O never reached the relaunched controller:\n" + "\n".join(rows))
        await self.ok("launched again from the record: Ctrl-O connected to the new controller")
        await term.keys("C-t")
        rows = await self.text("you control the conversation now (generation 4)")
        await term.type("Say hello again")
        await term.keys("Enter")
        await self.text('prompt "Say hello again": done')
        await self.until(lambda r: sum("assistant: Hello from the fake model." in x for x in transcript(r)) >= 1,
                         "the relaunched engine's answer")
        await self.ok("Ctrl-T took control again (generation 4); a prompt on the resumed conversation is answered")
        await term.keys("C-c")
        rows = await self.text("[terminal exited 0 ]")
        if not any("the terminal closed" in r for r in rows):
            raise Failed("the demo did not say it cleaned up after the terminal quit:\n" + "\n".join(rows))
        if any("Traceback" in r for r in rows) or "Traceback" in term.read_stderr():
            raise Failed("a traceback reached the person:\n" + "\n".join(rows) + "\n" + term.read_stderr())
        await self.ok("Ctrl-C quit; the demo removed what it made and exited 0, with no traceback anywhere")


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--screens", type=Path, help="write the screen after each step to this file")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("demo_interactive_check: needs root, like ci/demo.py", file=sys.stderr)
        return 2
    env = {k: os.environ[k] for k in ("MOSAIC_PI_DIR", "MOSAIC_REPO", "PATH") if k in os.environ}
    term = TmuxTerminal("", width=WIDTH, height=HEIGHT, env=env)
    check = Check(term, args.screens)
    try:
        await term.start([sys.executable, "-m", "mosaic.pi_rpc.testing.netns", "--", sys.executable,
                          str(REPO / "ci" / "demo.py"), "--interactive"])
        await check.run()
    except (Failed, TmuxError) as exc:
        print(f"interactive {check.step + 1}: FAILED: {exc}\n--- stderr:\n{term.read_stderr()}", flush=True)
        # Quit the terminal as a person would, so the demo cleans up after itself, before the server goes.
        for _ in range(2):
            try:
                await term.keys("C-c")
                await term.wait_text("[terminal exited", 30)
                break
            except (AssertionError, TmuxError):
                continue
        return 1
    finally:
        await term.aclose()
    print(f"demo_interactive_check: {check.step} steps ok")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
