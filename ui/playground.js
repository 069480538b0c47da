// The playground: ask a question, pick a strategy (or auto) and a budget, and watch the search
// over the streaming API (`POST /v1/chat/completions` with `stream: true`): `ponder.progress`
// events grow the tree (node events), fill the vote tally (candidate events) and the spend (step
// events); the final chunk's `ponder` summary brings the answer, the usage by kind, the router's
// decision and the whole trace (node texts).

import { api, stream, keyForm, el, ApiError } from "/ui/common.js";
import { SearchView } from "/ui/tree.js";

const $ = (id) => document.getElementById(id);
const view = new SearchView($("search-view"));
let strategies = [];
let running = null;

function status(text, error) {
  $("status").textContent = text;
  $("status").classList.toggle("error", !!error);
}

async function loadStrategies() {
  const select = $("strategy");
  try {
    const list = await api("/v1/strategies");
    strategies = list.data || [];
    const chosen = select.value || list.default;
    const names = strategies.map((s) => s.name);
    select.replaceChildren(
      ...(names.includes("auto") ? [] : [el("option", { value: "auto", disabled: true }, "auto (router: not enabled on this server)")]),
      ...strategies.map((s) => el("option", { value: s.name }, s.name === "auto" ? "auto (router decides)" : s.name)));
    select.value = names.includes(chosen) ? chosen : names[0] || "";
    describeStrategy();
    if (!running) status("Ready.");
  } catch (e) {
    status(e instanceof ApiError && e.status === 401 ? "This server needs an API key: enter it above." : "Could not list strategies: " + e.message, true);
    if (e instanceof ApiError && e.status === 401) $("api-key").focus();
  }
}

function describeStrategy() {
  const s = strategies.find((x) => x.name === $("strategy").value);
  $("strategy-help").textContent = s ? `${s.description}. Defaults: ${JSON.stringify(s.defaults)}` : "";
}

function params() {
  const text = $("params").value.trim();
  if (!text) return undefined;
  const value = JSON.parse(text);
  if (typeof value !== "object" || Array.isArray(value) || value === null) throw new Error("parameters must be a JSON object");
  return value;
}

function onChunk(chunk) {
  if (chunk.error) throw new ApiError(500, chunk.error.message || "the search failed");
  const p = chunk.ponder;
  if (p && p.progress) {
    const e = p.progress;
    if (e.event === "node") view.upsertNode(e);
    else if (e.event === "candidate") view.addCandidate(e);
    if (e.spent !== undefined) view.setSpend(e.spent, e.budget, e.generated_tokens);
    $("spend-bar").max = e.budget || 1;
    $("spend-bar").value = e.spent || 0;
    status(`Searching… ${view.nodes.size - 1} nodes, ${e.spent} of ${e.budget} tokens spent.`);
  }
  if (p && p.strategy) {
    if (p.trace) for (const n of p.trace.nodes || []) view.upsertNode(n);
    view.finish({ answer: p.answer, text: running.text, finishReason: p.finish_reason, usage: p.usage, router: p.router ?? null,
      support: p.support, strategy: p.strategy });
    running.summary = p;
  }
  const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
  if (delta && delta.content) running.text += delta.content;
}

async function run(e) {
  e.preventDefault();
  if (running) return;
  let body;
  try {
    body = {
      model: "ponder",
      messages: [{ role: "user", content: $("question").value }],
      strategy: $("strategy").value,
      budget_tokens: Number($("budget").value),
      stream: true,
      return_trace: true,
    };
    const seed = $("seed").value.trim();
    if (seed !== "") body.seed = Number(seed);
    const p = params();
    if (p) body.strategy_params = p;
  } catch (err) {
    status("Parameters: " + err.message, true);
    return;
  }
  view.reset();
  view.setSpend(0, body.budget_tokens, 0);
  $("spend-bar").max = body.budget_tokens;
  $("spend-bar").value = 0;
  const controller = new AbortController();
  running = { controller, text: "", summary: null };
  $("run").disabled = true;
  $("stop").disabled = false;
  status("Searching…");
  const started = performance.now();
  try {
    await stream("/v1/chat/completions", body, onChunk, controller.signal);
    const s = running.summary;
    const secs = ((performance.now() - started) / 1000).toFixed(1);
    if (s) {
      view.finish({ answer: s.answer, text: running.text, finishReason: s.finish_reason, usage: s.usage, router: s.router ?? null,
        support: s.support, strategy: s.strategy, budget: body.budget_tokens });
      $("spend-bar").value = s.spent;
      status(`Done in ${secs} s: ${view.nodes.size - 1} nodes, ${s.spent} of ${body.budget_tokens} tokens, finish: ${s.finish_reason}.`);
    } else {
      status("The stream ended without a summary.", true);
    }
  } catch (err) {
    status(err.name === "AbortError" ? "Stopped." : "Failed: " + err.message, err.name !== "AbortError");
  } finally {
    running = null;
    $("run").disabled = false;
    $("stop").disabled = true;
  }
}

$("run-form").addEventListener("submit", run);
$("stop").addEventListener("click", () => running && running.controller.abort());
$("strategy").addEventListener("change", describeStrategy);
keyForm(loadStrategies);
loadStrategies();
