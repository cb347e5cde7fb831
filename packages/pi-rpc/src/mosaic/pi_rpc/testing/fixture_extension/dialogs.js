// Mosaic's fixture extension for test seats only (issue 33). Never load it in a live seat.
//
// The seal lets Pi 0.85.1 load this file, and nothing else, only when the seal's fixture option is on, only
// at this exact path and only with the sha256 the seal names (mosaic.pi_rpc.seal.FIXTURE_EXTENSION_SHA256);
// the engine's environment must carry JITI_FS_CACHE=false (docs/pi-0.85.1.md "The fixture extension").
//
// It registers one tool, mosaic_fixture_dialog. A model turn cues a dialog by calling it (the scripted model
// answers "DIALOG <kind> [timeout=<ms>] [abortable]" with that call): the tool raises one dialog of <kind>
// (confirm, select, input, editor) through ctx.ui with the fixed labels below, waits for it, and reports what
// the handler got as its result text: "<kind> answered <value>", the value as JSON.stringify writes it, or
// undefined. timeout=<ms> passes { timeout } to the dialog; abortable passes the tool's abort signal too, so
// an abort settles the dialog. The editor takes neither (rpc-mode.js 174-192: editor(title, prefill)).
// The labels hold markup, bidi controls and an escape sequence on purpose: they arrive verbatim (P2).
import { Type } from "typebox";

const CONFIRM_TITLE = "Allow <b>bash</b>: rm -rf \u202Eplh.tset\u202C?";
const CONFIRM_MESSAGE = "The tool runs \u001b[31mrm\u001b[0m in \u2066/tmp/<i>x</i>\u2069.";
const SELECT_TITLE = "Pick \u202Eeno\u202C <i>now</i>";
const SELECT_OPTIONS = ["Allow once", "<i>Deny</i>", "Always \u202Ewolla\u202C", "\u001b[2Jclear"];
const INPUT_TITLE = "Your <b>name</b>";
const INPUT_PLACEHOLDER = "\u202Eeman\u202C";
const EDITOR_TITLE = "Edit <i>the plan</i>";
const EDITOR_PREFILL = "line 1\nline \u202E2\u202C\u2028same record";

export default function (pi) {
  pi.registerTool({
    name: "mosaic_fixture_dialog",
    label: "Mosaic fixture dialog",
    description: "Raise one extension UI dialog and report the answer (Mosaic test seats only)",
    parameters: Type.Object({
      kind: Type.String(),
      timeout: Type.Optional(Type.Number()),
      abortable: Type.Optional(Type.Boolean()),
    }),
    async execute(_toolCallId, params, signal, _onUpdate, ctx) {
      const opts = {};
      if (params.timeout !== undefined) opts.timeout = params.timeout;
      if (params.abortable) opts.signal = signal;
      let answer;
      if (params.kind === "confirm") answer = await ctx.ui.confirm(CONFIRM_TITLE, CONFIRM_MESSAGE, opts);
      else if (params.kind === "select") answer = await ctx.ui.select(SELECT_TITLE, SELECT_OPTIONS, opts);
      else if (params.kind === "input") answer = await ctx.ui.input(INPUT_TITLE, INPUT_PLACEHOLDER, opts);
      else if (params.kind === "editor") answer = await ctx.ui.editor(EDITOR_TITLE, EDITOR_PREFILL);
      else throw new Error(`unknown dialog kind ${JSON.stringify(params.kind)}`);
      const shown = answer === undefined ? "undefined" : JSON.stringify(answer);
      return { content: [{ type: "text", text: `${params.kind} answered ${shown}` }], details: {} };
    },
  });
}
