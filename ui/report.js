// The eval report page: open what the harness wrote (report.json or results.jsonl, report.md,
// the accuracy_vs_spend plot) and see the table and an accuracy-vs-spend chart drawn here.
// Everything stays in the page; nothing is uploaded.

import { el, num, dropZone } from "/ui/common.js";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const COLOURS = ["#2457c5", "#d9822b", "#2e9e5b", "#c23b3b", "#7b4fc9", "#8c6d31", "#1b9aaa", "#e377c2"];

function status(text, error) {
  $("status").textContent = text;
  $("status").classList.toggle("error", !!error);
}

/**
 * The name of a configuration: the strategy, its parameters when a run set them and its
 * verifier when one ran, so that runs of one strategy under other settings stay apart (as
 * `ponder-eval report` keeps them).
 */
export function configuration(c) {
  let name = c.strategy;
  if (c.params !== undefined && c.params !== null) name += " " + JSON.stringify(c.params);
  if (c.verifier && c.verifier !== "none") name += " + " + c.verifier;
  return name;
}

/** One cell per (configuration, budget) from harness rows (results.jsonl), as `report.json` has. */
export function summarize(rows) {
  const cells = new Map();
  for (const r of rows) {
    const key = configuration(r) + "\u0000" + r.budget;
    if (!cells.has(key)) cells.set(key, { strategy: r.strategy, params: r.params ?? null, verifier: r.verifier, budget: r.budget, rows: [] });
    cells.get(key).rows.push(r);
  }
  const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
  return [...cells.values()].map(({ strategy, params, verifier, budget, rows }) => ({
    strategy, params, verifier, budget, n: rows.length,
    accuracy: mean(rows.map((r) => (r.correct ? 1 : 0))),
    mean_spent: mean(rows.map((r) => (r.spend && r.spend.spent) || 0)),
    mean_generated: mean(rows.map((r) => (r.spend && r.spend.generated_tokens) || 0)),
    budget_stops: rows.filter((r) => r.finish_reason === "budget").length,
    errors: rows.filter((r) => r.error).length,
  })).sort((a, b) => configuration(a).localeCompare(configuration(b)) || a.budget - b.budget);
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function chart(cells) {
  const W = 640, H = 340, L = 56, R = 150, T = 16, B = 44;
  const xs = cells.map((c) => c.mean_spent);
  const xmax = Math.max(1, ...xs) * 1.05;
  const x = (v) => L + (v / xmax) * (W - L - R);
  const y = (v) => T + (1 - v) * (H - T - B);
  const root = svg("svg", { width: W, height: H, role: "img", "aria-label": "Accuracy against mean tokens spent per strategy" });
  for (let i = 0; i <= 4; i++) {
    const v = i / 4;
    root.append(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }), svg("text", { x: L - 8, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(2)));
    const xv = (xmax * i) / 4;
    root.append(svg("text", { x: x(xv), y: H - B + 16, "text-anchor": "middle" }, Math.round(xv)));
  }
  root.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: y(0), y2: y(0) }), svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: y(0) }));
  root.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "mean tokens spent"));
  root.append(svg("text", { x: 14, y: (T + H - B) / 2, transform: `rotate(-90 14 ${(T + H - B) / 2})`, "text-anchor": "middle" }, "accuracy"));
  const configurations = [...new Set(cells.map(configuration))];
  configurations.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const pts = cells.filter((c) => configuration(c) === s).sort((a, b) => a.mean_spent - b.mean_spent);
    root.append(svg("polyline", { points: pts.map((c) => `${x(c.mean_spent)},${y(c.accuracy)}`).join(" "), fill: "none", stroke: colour, "stroke-width": 2 }));
    for (const c of pts) {
      const dot = svg("circle", { cx: x(c.mean_spent), cy: y(c.accuracy), r: 4, fill: colour });
      dot.append(svg("title", {}, `${s} @ budget ${c.budget}: accuracy ${num(c.accuracy)}, mean spent ${num(c.mean_spent)}`));
      root.append(dot);
    }
    root.append(svg("rect", { x: W - R + 12, y: T + i * 18, width: 10, height: 10, fill: colour }), svg("text", { x: W - R + 28, y: T + i * 18 + 9 }, s));
  });
  return root;
}

function table(cells) {
  const cols = [["configuration", "configuration"], ["budget", "budget"], ["n", "items"], ["accuracy", "accuracy"], ["maj_at_k", "maj@k"],
    ["mean_spent", "mean spent"], ["mean_generated", "mean generated"], ["p50_ms", "p50 ms"], ["budget_stops", "budget stops"], ["errors", "errors"]]
    .filter(([k]) => cells.some((c) => c[k] !== undefined));
  return el("table", {},
    el("caption", { class: "muted small" }, "One row per (configuration, budget)"),
    el("thead", {}, el("tr", {}, cols.map(([, h]) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, cells.map((c) => el("tr", {}, cols.map(([k]) => el("td", {}, typeof c[k] === "number" ? num(c[k]) : c[k] ?? "—"))))));
}

function show(raw, source) {
  const cells = raw.map((c) => ({ ...c, configuration: configuration(c) }));
  $("chart").replaceChildren(chart(cells));
  $("chart-figure").hidden = false;
  $("table").replaceChildren(table(cells));
  status(`${source}: ${cells.length} cells, ${new Set(cells.map((c) => c.configuration)).size} configurations.`);
}

async function openFiles(files) {
  for (const file of files) {
    const name = file.name.toLowerCase();
    try {
      if (name.endsWith(".png") || name.endsWith(".svg")) {
        $("plot").src = URL.createObjectURL(file);
        $("plot-figure").hidden = false;
      } else if (name.endsWith(".md")) {
        $("md").textContent = await file.text();
        $("md-details").hidden = false;
      } else if (name.endsWith(".jsonl")) {
        const rows = (await file.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
        show(summarize(rows), file.name);
      } else {
        const value = JSON.parse(await file.text());
        if (!Array.isArray(value)) throw new Error("expected report.json's array of cells");
        show(value, file.name);
      }
    } catch (e) {
      status(`${file.name}: ${e.message}`, true);
    }
  }
}

$("report-files").addEventListener("change", (e) => openFiles(e.target.files));
dropZone($("drop"), openFiles);
