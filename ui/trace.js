// The trace viewer: open a saved Outcome (file picker, drop, or paste) and explore it offline —
// nothing is sent anywhere. Also accepts a chat/text completion body whose `ponder` summary
// carries a trace (`"return_trace": true`), or a bare `{"nodes": [...]}` tree.

import { dropZone } from "/ui/common.js";
import { SearchView } from "/ui/tree.js";

const $ = (id) => document.getElementById(id);
const view = new SearchView($("search-view"));

function status(text, error) {
  $("status").textContent = text;
  $("status").classList.toggle("error", !!error);
}

/** An Outcome-shaped object from whatever JSON was opened. */
export function asOutcome(value) {
  if (value && value.tree && Array.isArray(value.tree.nodes)) return value;
  if (value && Array.isArray(value.nodes)) return { tree: value, candidates: [] };
  const p = value && value.ponder;
  if (p && p.trace) {
    const choice = (value.choices || [])[0] || {};
    const text = (choice.message && choice.message.content) || choice.text || null;
    return { strategy: p.strategy, answer: p.answer, text, support: p.support, finish_reason: p.finish_reason, usage: p.usage,
      router: p.router ?? null, tree: p.trace, candidates: [] };
  }
  throw new Error("not an Outcome: expected a `tree` with `nodes` (the body of POST /v1/reason)");
}

function open(text, name) {
  try {
    const outcome = asOutcome(JSON.parse(text));
    view.loadOutcome(outcome);
    const nodes = outcome.tree.nodes.length - 1;
    status(`${name}: ${outcome.strategy ?? "a search"}, ${nodes} nodes, ${(outcome.candidates || []).length} candidates, answer ${outcome.answer ?? "none"}.`);
  } catch (e) {
    status(`${name}: ${e.message}`, true);
  }
}

async function openFiles(files) {
  const file = files[0];
  if (file) open(await file.text(), file.name);
}

$("trace-file").addEventListener("change", (e) => openFiles(e.target.files));
$("trace-open").addEventListener("click", () => open($("trace-text").value, "pasted JSON"));
dropZone($("drop"), openFiles);
