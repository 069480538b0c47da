#!/usr/bin/env node
// The browser pages against a real `ponder serve` with the real model (part of scripts/test.sh;
// scripts/setup-browser.sh installs Debian's chromium and pinned playwright-core first):
//
// 1. Playground: submit a question with a small budget; the tree gains nodes while the search
//    runs (sampled in the page before the answer arrives), then the answer, spend and leader
//    appear; the tree is reachable by keyboard; screenshot target/artifacts/playground.png.
// 2. Trace viewer: open the committed sample Outcome (tests/fixtures/sample_outcome.json); the
//    node count, the leader (the selected candidate's node), the answer and the faded branches
//    match the file; clicking a node shows its text; screenshot trace.png.
// 3. Eval report page: a report.json draws the table and chart; screenshot report.png.
// 4. Auth on: the pages load without a key; the API asks for one; the key, typed once, goes
//    as a bearer header on every API call and is kept in memory only (no storage, no cookie);
//    a search runs; screenshot playground-auth.png.
//
// Every request the pages make must stay on the server's origin, and no page may log an error.
// Prints one JSON line of measurements; exits non-zero on any failure. While working on the pages,
// `--ui-dir ui` serves them from disk instead of the binary's embedded copy (no rebuild needed).
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import readline from "node:readline";
import assert from "node:assert/strict";

function args() {
  const out = { ponder: "target/debug/ponder", chromium: "/usr/bin/chromium", playwright: "target/browser", artifacts: "target/artifacts" };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  return out;
}

const opts = args();
const require = createRequire(path.resolve(opts.playwright) + "/");
const { chromium } = require("playwright-core");
const SAMPLE = "tests/fixtures/sample_outcome.json";
const KEY = "browser-test-key-0123456789";
const results = {};
const servers = [];

function serve(env) {
  return new Promise((resolve, reject) => {
    // The project's own templated problems as the worked-example pool (~900, embedded in
    // seconds): the shipped GSM8K pool's 6,338 questions would cost a clean clone minutes of
    // embedding before the first server listens (what loading it checks is a unit test).
    const proc = spawn(opts.ponder, ["serve", "--port", "0", "--max-budget-tokens", "2000", "--max-completion-tokens", "256",
      "--exemplars", "evals/data/gsm_gen.jsonl"], {
      env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"],
    });
    servers.push(proc);
    const timer = setTimeout(() => reject(new Error("ponder serve did not start in 600 s")), 600_000);
    proc.on("exit", (code) => reject(new Error(`ponder serve exited with ${code}`)));
    readline.createInterface({ input: proc.stdout }).once("line", (line) => {
      clearTimeout(timer);
      if (!line.includes("listening on")) reject(new Error("ponder serve said: " + line));
      resolve({ proc, url: line.trim().split(" ").pop() });
    });
  });
}

function stop(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve();
    proc.removeAllListeners("exit");
    proc.on("exit", resolve);
    proc.kill("SIGTERM");
  });
}

/** A page that fails the test on any console error, page error or off-origin request. */
async function open(browser, origin) {
  const context = await browser.newContext({ viewport: { width: 1366, height: 820 } });
  const page = await context.newPage();
  if (opts["ui-dir"]) await fromDisk(page, origin);
  const problems = [];
  const requests = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("request", (r) => {
    requests.push(r);
    const url = r.url();
    if (!url.startsWith(origin + "/") && !url.startsWith("blob:") && !url.startsWith("data:")) problems.push("off-origin request: " + url);
  });
  return { context, page, problems, requests };
}

const PAGES = { "/": "index.html", "/playground": "index.html", "/trace": "trace.html", "/report": "report.html" };

/** Serves the pages and their assets from `--ui-dir` (development only). */
async function fromDisk(page, origin) {
  await page.route((url) => url.origin === origin && (url.pathname in PAGES || url.pathname.startsWith("/ui/")), (route) => {
    const pathname = new URL(route.request().url()).pathname;
    const file = PAGES[pathname] || pathname.slice(4);
    const type = file.endsWith(".js") ? "text/javascript" : file.endsWith(".css") ? "text/css" : file.endsWith(".svg") ? "image/svg+xml" : "text/html";
    return route.fulfill({ status: 200, contentType: type, body: readFileSync(path.join(opts["ui-dir"], file)) });
  });
}

/** Records the tree's node count and whether an answer is shown, every 25 ms, in the page. */
async function sampleTree(page) {
  await page.evaluate(() => {
    window.__samples = [];
    window.__sampler = setInterval(() => {
      const count = Number(document.getElementById("node-count").dataset.count);
      window.__samples.push({ count, answered: !!document.getElementById("final-answer") });
    }, 25);
  });
}

async function runSearch(page, { strategy, budget, params, question }) {
  await page.waitForSelector(`#strategy option[value="${strategy}"]`, { state: "attached" });
  await page.fill("#question", question);
  await page.selectOption("#strategy", strategy);
  await page.fill("#budget", String(budget));
  // Seed 3: the beam search runs three rounds before it answers, so the tree is seen growing
  // (seed 1 answered in its first round once the attention kernel's summation order changed).
  await page.fill("#seed", "3");
  await page.fill("#params", JSON.stringify(params));
  await sampleTree(page);
  const t = Date.now();
  await page.focus("#run");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#final-answer", { timeout: 120_000 });
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("Done"), null, { timeout: 30_000 });
  const samples = await page.evaluate(() => { clearInterval(window.__sampler); return window.__samples; });
  return { seconds: (Date.now() - t) / 1000, samples };
}

async function playground(browser, url) {
  const { context, page, problems } = await open(browser, url);
  await page.goto(url + "/");
  const { seconds, samples } = await runSearch(page, {
    strategy: "beam_search", budget: 500, question: "Solve step by step: a shop sells pens at 3 dollars each. How much do 5 pens cost?",
    params: { n: 4, width: 2, steps: { max_step_tokens: 24, max_steps: 4 } },
  });
  const before = samples.filter((s) => !s.answered);
  const growing = [...new Set(before.map((s) => s.count).filter((c) => c > 0))];
  assert.ok(growing.length >= 2, `the tree should gain nodes while the search runs; counts seen before the answer: ${JSON.stringify(growing)}`);
  const nodes = await page.locator("g.node").count();
  const answer = (await page.textContent("#final-answer")).trim();
  assert.ok(answer.length > 0, "an answer is shown");
  assert.equal(await page.locator("g.node.leader").count(), 1, "one leader is highlighted");
  assert.match(await page.textContent("#spent-total"), /^\d+ of 500 tokens charged/);
  assert.ok(await page.locator("#router-none").count() === 1, "the router panel says no router ran");
  // Keyboard: the tree is one tab stop; arrows move, Enter shows a node.
  await page.focus('g.node[tabindex="0"]');
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("Enter");
  const focused = await page.evaluate(() => document.activeElement.getAttribute("data-node-id"));
  assert.ok(Number(focused) > 0, "ArrowRight moves focus to a child node");
  const details = await page.textContent("#node-details");
  assert.ok(details.includes("tokens"), `Enter shows node ${focused}'s details, got: ${details}`);
  assert.ok(await page.locator("#node-text").count() === 1, "the node's text is shown");
  await page.screenshot({ path: path.join(opts.artifacts, "playground.png"), fullPage: true });
  assert.deepEqual(problems, []);
  Object.assign(results, { playground_s: seconds, playground_nodes: nodes - 1, playground_counts_while_running: growing, playground_answer: answer });
  await context.close();
}

async function traceViewer(browser, url) {
  const outcome = JSON.parse(readFileSync(SAMPLE, "utf8"));
  const nodes = outcome.tree.nodes.length - 1;
  const leader = outcome.candidates[outcome.selected].node;
  const faded = outcome.tree.nodes.filter((n) => n.status === "pruned" || n.status === "truncated").length;
  const { context, page, problems } = await open(browser, url);
  await page.goto(url + "/trace");
  await page.setInputFiles("#trace-file", SAMPLE);
  await page.waitForSelector(`#node-count[data-count="${nodes}"]`);
  assert.equal(await page.locator("g.node").count(), nodes + 1, "every node and the root are drawn");
  const leaders = await page.locator("g.node.leader").evaluateAll((gs) => gs.map((g) => Number(g.dataset.nodeId)));
  assert.deepEqual(leaders, [leader], "the selected candidate's node is the leader");
  assert.equal((await page.textContent("#final-answer")).trim(), outcome.answer);
  assert.equal(await page.locator("g.node.faded").count(), faded, "pruned and truncated nodes are faded");
  await page.click(`g.node[data-node-id="${leader}"]`);
  const shown = (await page.textContent("#node-text")).trim();
  assert.equal(shown, outcome.tree.nodes[leader].text.trim() || "(empty)");
  await page.screenshot({ path: path.join(opts.artifacts, "trace.png"), fullPage: true });
  assert.deepEqual(problems, []);
  Object.assign(results, { trace_nodes: nodes, trace_leader: leader, trace_faded: faded });
  await context.close();
}

async function reportPage(browser, url) {
  const cells = [];
  // Two strategies at their defaults and one of them again under other parameters: three
  // configurations, each its own line and rows.
  for (const [strategy, params, acc] of [["best_of_n", null, [0.2, 0.35, 0.5]], ["beam_search", null, [0.25, 0.45, 0.6]], ["best_of_n", { n: 2 }, [0.1, 0.15, 0.2]]]) {
    [256, 512, 1024].forEach((budget, i) => cells.push({ strategy, params, verifier: "none", budget, n: 20, accuracy: acc[i], mean_spent: budget * 0.8, mean_generated: budget * 0.6, budget_stops: 1, errors: 0 }));
  }
  const { context, page, problems } = await open(browser, url);
  await page.goto(url + "/report");
  await page.setInputFiles("#report-files", { name: "report.json", mimeType: "application/json", buffer: Buffer.from(JSON.stringify(cells)) });
  await page.waitForSelector("#chart svg");
  assert.equal(await page.locator("#table tbody tr").count(), cells.length);
  assert.equal(await page.locator("#chart polyline").count(), 3);
  assert.equal(await page.locator("#table tbody tr", { hasText: 'best_of_n {"n":2}' }).count(), 3);
  await page.screenshot({ path: path.join(opts.artifacts, "report.png"), fullPage: true });
  assert.deepEqual(problems, []);
  await context.close();
}

async function withAuth(browser, url) {
  const { context, page, problems, requests } = await open(browser, url);
  const response = await page.goto(url + "/");
  assert.equal(response.status(), 200, "the page loads without a key");
  await page.waitForFunction(() => document.getElementById("status").textContent.includes("API key"));
  // The 401 the page asked for was expected; nothing else may have failed.
  const unexpected = problems.filter((p) => !p.includes("401"));
  assert.deepEqual(unexpected, []);
  problems.length = 0;
  await page.fill("#api-key", KEY);
  await page.press("#api-key", "Enter");
  assert.equal(await page.inputValue("#api-key"), "", "the key field is cleared once used");
  const { seconds } = await runSearch(page, {
    strategy: "self_consistency", budget: 300, question: "What is 2 + 3?", params: { n: 2, max_tokens: 24 },
  });
  const apiCalls = requests.filter((r) => new URL(r.url()).pathname.startsWith("/v1/"));
  const keyed = await Promise.all(apiCalls.map(async (r) => (await r.allHeaders())["authorization"] === "Bearer " + KEY));
  assert.ok(apiCalls.length >= 3 && keyed.slice(1).every(Boolean), "every API call after the key was entered carries it");
  const stored = await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.length, cookie: document.cookie }));
  assert.deepEqual(stored, { local: 0, session: 0, cookie: "" }, "the key is kept in memory only");
  await page.screenshot({ path: path.join(opts.artifacts, "playground-auth.png"), fullPage: true });
  assert.deepEqual(problems, []);
  Object.assign(results, { auth_search_s: seconds, auth_api_calls: apiCalls.length });
  await context.close();
}

async function main() {
  mkdirSync(opts.artifacts, { recursive: true });
  const t0 = Date.now();
  const browser = await chromium.launch({ executablePath: opts.chromium, headless: true, args: ["--no-sandbox"] });
  try {
    const open = await serve({ PONDER_API_KEYS: "" });
    await playground(browser, open.url);
    await traceViewer(browser, open.url);
    await reportPage(browser, open.url);
    await stop(open.proc);
    const locked = await serve({ PONDER_API_KEYS: KEY });
    await withAuth(browser, locked.url);
    await stop(locked.proc);
  } finally {
    await browser.close();
    for (const p of servers) p.kill("SIGKILL");
  }
  results.total_s = (Date.now() - t0) / 1000;
  results.screenshots = ["playground.png", "trace.png", "report.png", "playground-auth.png"].map((f) => path.join(opts.artifacts, f));
  console.log(JSON.stringify(results));
}

main().catch((e) => {
  console.error(e);
  for (const p of servers) p.kill("SIGKILL");
  process.exit(1);
});
