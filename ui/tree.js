// The search view shared by the playground (fed live progress events) and the trace viewer (fed
// a whole Outcome): the tree as an SVG (nodes coloured by score, pruned and truncated branches
// faded, the leader and its path highlighted), the selected node's details, the vote tally,
// the spend by kind, the router's decision and the answer.
//
// Keyboard: the tree is one tab stop (ARIA tree, roving tabindex); arrows move (← parent,
// → first child, ↑/↓ previous/next sibling, Home root), Enter or Space shows the node. SVG
// elements are kept per node id and updated in place, so focus survives live redraws.

import { el, num } from "/ui/common.js";

const SVG = "http://www.w3.org/2000/svg";
const DX = 74, DY = 22, R = 7, PAD = 18;

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

/** Red (`lo`) → amber → green (`hi`); grey when unscored. */
export function scoreColour(score, lo = 0, hi = 1) {
  if (score === null || score === undefined || Number.isNaN(score)) return "#c4c4c0";
  const s = hi - lo > 1e-9 ? Math.max(0, Math.min(1, (score - lo) / (hi - lo))) : 0.5;
  const lerp = (a, b, t) => Math.round(a + (b - a) * t);
  const [a, b, t] = s < 0.5 ? [[0xc2, 0x3b, 0x3b], [0xe0, 0xb1, 0x2b], s * 2] : [[0xe0, 0xb1, 0x2b], [0x2e, 0x9e, 0x5b], (s - 0.5) * 2];
  return `rgb(${lerp(a[0], b[0], t)}, ${lerp(a[1], b[1], t)}, ${lerp(a[2], b[2], t)})`;
}

const FADED = new Set(["pruned", "truncated"]);

export class SearchView {
  constructor(root) {
    this.root = root;
    this.build();
    this.reset();
  }

  build() {
    this.svg = svg("svg", { role: "tree", "aria-label": "Search tree", "aria-describedby": "tree-help", width: 200, height: 80 });
    this.edgeLayer = svg("g", { class: "edges" });
    this.nodeLayer = svg("g", { class: "nodes" });
    this.svg.append(this.edgeLayer, this.nodeLayer);
    this.svg.addEventListener("keydown", (e) => this.onKey(e));
    this.countEl = el("span", { id: "node-count", "data-count": "0" }, "0 nodes");
    this.answerEl = el("div", { id: "answer" }, el("p", { class: "muted" }, "No answer yet."));
    this.detailsEl = el("div", { id: "node-details", class: "details" }, el("p", { class: "muted" }, "Select a node (click, or arrows and Enter) to read its text, tokens and scores."));
    this.tallyEl = el("div", { id: "tally" });
    this.spendEl = el("div", { id: "spend" });
    this.routerEl = el("div", { id: "router" });
    const legend = el("p", { class: "legend" },
      el("span", {}, "score ", this.rangeLo = el("span", {}, "low"), " ", el("span", { class: "ramp", "aria-hidden": "true" }), " ", this.rangeHi = el("span", {}, "high")),
      el("span", {}, el("span", { class: "swatch grey", "aria-hidden": "true" }), "unscored"),
      el("span", {}, "faded: pruned / truncated"),
      el("span", {}, "gold ring: leader"),
      el("span", {}, "thick outline: finished"));
    this.root.replaceChildren(el("div", { class: "search" },
      el("div", {},
        el("h2", {}, "Search tree ", el("span", { class: "muted small" }, "(", this.countEl, ")")),
        legend,
        el("div", { class: "tree-wrap" }, this.svg),
        el("p", { id: "tree-help", class: "muted small" }, "Tab to the tree, then arrows: ← parent, → first child, ↑ ↓ siblings, Home the root; Enter shows the node.")),
      el("aside", { "aria-label": "Search details" },
        el("h3", {}, "Answer"), this.answerEl,
        el("h3", {}, "Node"), this.detailsEl,
        el("h3", {}, "Votes"), this.tallyEl,
        el("h3", {}, "Budget spent"), this.spendEl,
        el("h3", {}, "Router"), this.routerEl)));
  }

  reset() {
    this.nodes = new Map([[0, { id: 0, parent: null, depth: 0, tokens: 0, score: null, status: "expanded", text: "" }]]);
    this.candidates = [];
    this.leaderAnswer = null;
    this.voteMargin = null;
    this.selectedCandidate = null;
    this.selectedId = null;
    this.focusId = 0;
    this.spend = { spent: 0, budget: 0, generated: 0 };
    this.usage = null;
    this.router = undefined;
    this.answer = undefined;
    this.els = new Map();
    this.edgeEls = new Map();
    this.edgeLayer.replaceChildren();
    this.nodeLayer.replaceChildren();
    this.detailsEl.replaceChildren(el("p", { class: "muted" }, "Select a node (click, or arrows and Enter) to read its text, tokens and scores."));
    this.answerEl.replaceChildren(el("p", { class: "muted" }, "No answer yet."));
    this.schedule();
  }

  // ---- feeding -------------------------------------------------------------------------------

  /** Adds or updates a node (a progress `node` event, or an Outcome tree node). */
  upsertNode(n) {
    const old = this.nodes.get(n.id) || {};
    const merged = { ...old };
    for (const [k, v] of Object.entries(n)) if (v !== undefined && k !== "event") merged[k] = v;
    this.nodes.set(n.id, merged);
    this.schedule();
  }

  /** Records a candidate (a progress `candidate` event or an Outcome candidate). */
  addCandidate(c) {
    this.candidates[c.index ?? this.candidates.length] = c;
    if (c.leader !== undefined) this.leaderAnswer = c.leader;
    if (c.vote_margin !== undefined) this.voteMargin = c.vote_margin;
    this.schedule();
  }

  setSpend(spent, budget, generated) {
    this.spend = { spent, budget, generated: generated ?? this.spend.generated };
    this.schedule();
  }

  /** The final state: the summary of a streamed run, or a whole Outcome. */
  finish({ answer, text, finishReason, usage, router, selected, support, strategy, budget }) {
    this.answer = { answer, text, finishReason, support, strategy };
    if (usage) this.usage = usage;
    if (router !== undefined) this.router = router;
    if (selected !== undefined && selected !== null) this.selectedCandidate = selected;
    if (budget) this.spend.budget = budget;
    if (usage) this.spend.spent = spentOf(usage);
    this.schedule();
  }

  /** Shows a whole Outcome (`POST /v1/reason`'s body). */
  loadOutcome(o) {
    this.reset();
    for (const n of (o.tree && o.tree.nodes) || []) this.upsertNode(n);
    (o.candidates || []).forEach((c, index) => this.addCandidate({ ...c, index }));
    this.leaderAnswer = o.answer ?? null;
    const voted = (o.candidates || []).filter((c) => c.answer !== null && c.answer !== undefined).length;
    this.voteMargin = null;
    if (voted) {
      const t = tally(o.candidates.filter((c) => c.answer !== null && c.answer !== undefined));
      this.voteMargin = ((t[0]?.[1] ?? 0) - (t[1]?.[1] ?? 0)) / voted;
    }
    this.finish({ answer: o.answer, text: o.text, finishReason: o.finish_reason, usage: o.usage, router: o.router ?? null,
      selected: o.selected, support: o.support, strategy: o.strategy });
    this.renderNow();
  }

  // ---- derived -------------------------------------------------------------------------------

  children(id) {
    if (!this._children) {
      this._children = new Map();
      for (const n of this.nodes.values()) {
        if (n.parent === null || n.parent === undefined) continue;
        if (!this._children.has(n.parent)) this._children.set(n.parent, []);
        this._children.get(n.parent).push(n.id);
      }
      for (const list of this._children.values()) list.sort((a, b) => a - b);
    }
    return this._children.get(id) || [];
  }

  /** The node the search currently favours: the chosen candidate's once known; else the best
   *  scored candidate voting for the leader; else the best scored live leaf. */
  leaderNode() {
    const cands = this.candidates.filter(Boolean);
    if (this.selectedCandidate !== null && cands[this.selectedCandidate]) return cands[this.selectedCandidate].node;
    const pool = cands.filter((c) => this.leaderAnswer === null || c.answer === this.leaderAnswer);
    if (pool.length) return pool.reduce((a, b) => ((b.score ?? -Infinity) > (a.score ?? -Infinity) ? b : a)).node;
    let best = null;
    for (const n of this.nodes.values()) {
      if (n.id === 0 || FADED.has(n.status) || this.children(n.id).length) continue;
      if (n.score !== null && n.score !== undefined && (best === null || n.score > best.score)) best = n;
    }
    return best ? best.id : null;
  }

  pathTo(id) {
    const path = [];
    for (let n = this.nodes.get(id); n && n.id !== 0; n = this.nodes.get(n.parent)) path.unshift(n.id);
    return path;
  }

  // ---- drawing -------------------------------------------------------------------------------

  schedule() {
    this._children = null;
    if (this._frame) return;
    this._frame = requestAnimationFrame(() => {
      this._frame = null;
      this.renderNow();
    });
  }

  renderNow() {
    this._children = null;
    this.drawTree();
    this.drawAnswer();
    this.drawTally();
    this.drawSpend();
    this.drawRouter();
    if (this.selectedId !== null) this.drawDetails();
  }

  layout() {
    const pos = new Map();
    let next = 0;
    let maxDepth = 0;
    const visit = (id, depth) => {
      maxDepth = Math.max(maxDepth, depth);
      const kids = this.children(id);
      if (!kids.length) {
        pos.set(id, { x: PAD + depth * DX, y: PAD + next++ * DY });
        return;
      }
      kids.forEach((k) => visit(k, depth + 1));
      const ys = kids.map((k) => pos.get(k).y);
      pos.set(id, { x: PAD + depth * DX, y: (ys[0] + ys[ys.length - 1]) / 2 });
    };
    visit(0, 0);
    // Nodes whose parent was never reported hang off the root.
    for (const n of this.nodes.values()) if (!pos.has(n.id)) pos.set(n.id, { x: PAD + (n.depth || 1) * DX, y: PAD + next++ * DY });
    return { pos, width: PAD * 2 + maxDepth * DX + 40, height: PAD * 2 + Math.max(0, next - 1) * DY };
  }

  drawTree() {
    const { pos, width, height } = this.layout();
    this.svg.setAttribute("width", width);
    this.svg.setAttribute("height", height);
    const leader = this.leaderNode();
    const scores = [...this.nodes.values()].map((n) => n.score).filter((x) => typeof x === "number");
    const lo = scores.length ? Math.min(...scores) : 0, hi = scores.length ? Math.max(...scores) : 1;
    this.rangeLo.textContent = num(lo);
    this.rangeHi.textContent = num(hi);
    const onPath = new Set(leader === null ? [] : this.pathTo(leader));
    if (!this.nodes.has(this.focusId)) this.focusId = 0;
    for (const n of this.nodes.values()) {
      const p = pos.get(n.id);
      const faded = FADED.has(n.status);
      if (n.id !== 0) {
        let edge = this.edgeEls.get(n.id);
        if (!edge) {
          edge = svg("path", { class: "edge" });
          this.edgeEls.set(n.id, edge);
          this.edgeLayer.append(edge);
        }
        const q = pos.get(n.parent) || pos.get(0);
        const mx = (q.x + p.x) / 2;
        edge.setAttribute("d", `M${q.x},${q.y} C${mx},${q.y} ${mx},${p.y} ${p.x},${p.y}`);
        edge.setAttribute("class", "edge" + (faded ? " faded" : "") + (onPath.has(n.id) ? " leader" : ""));
      }
      let e = this.els.get(n.id);
      if (!e) {
        const g = svg("g", { role: "treeitem", "data-node-id": n.id });
        const halo = svg("circle", { class: "halo", r: R + 5, fill: "none" });
        const ring = svg("circle", { class: "ring", r: R + 3, fill: "none" });
        const dot = svg("circle", { class: "dot", r: n.id === 0 ? R + 1 : R });
        const label = svg("text", { class: "label", x: R + 3, y: -R - 1 });
        const title = svg("title", {});
        g.append(title, halo, ring, dot, label);
        g.addEventListener("click", () => { this.focusId = n.id; this.select(n.id, true); });
        g.addEventListener("focus", () => { this.focusId = n.id; this.syncTabStops(); });
        e = { g, dot, label, title };
        this.els.set(n.id, e);
        this.nodeLayer.append(g);
      }
      const status = n.status || "open";
      e.g.setAttribute("transform", `translate(${p.x},${p.y})`);
      e.g.setAttribute("class", ["node", status, faded ? "faded" : "", leader === n.id ? "leader" : "", this.selectedId === n.id ? "selected" : ""].filter(Boolean).join(" "));
      e.g.setAttribute("data-status", status);
      e.g.setAttribute("aria-level", (n.depth ?? 0) + 1);
      e.g.setAttribute("aria-selected", this.selectedId === n.id ? "true" : "false");
      const kids = this.children(n.id).length;
      if (kids) e.g.setAttribute("aria-expanded", "true"); else e.g.removeAttribute("aria-expanded");
      e.dot.setAttribute("fill", n.id === 0 ? "#3b6fd4" : scoreColour(n.score, lo, hi));
      e.label.textContent = n.id === 0 ? "prompt" : "#" + n.id;
      const words = describe(n, leader === n.id);
      e.g.setAttribute("aria-label", words);
      e.title.textContent = words;
    }
    this.syncTabStops();
    const count = this.nodes.size - 1;
    this.countEl.textContent = count + (count === 1 ? " node" : " nodes");
    this.countEl.setAttribute("data-count", count);
  }

  syncTabStops() {
    for (const [id, e] of this.els) e.g.setAttribute("tabindex", id === this.focusId ? "0" : "-1");
  }

  onKey(e) {
    const n = this.nodes.get(this.focusId);
    if (!n) return;
    let to = null;
    const siblings = n.parent === null || n.parent === undefined ? [n.id] : this.children(n.parent);
    const at = siblings.indexOf(n.id);
    switch (e.key) {
      case "ArrowLeft": to = n.parent ?? null; break;
      case "ArrowRight": to = this.children(n.id)[0] ?? null; break;
      case "ArrowUp": to = at > 0 ? siblings[at - 1] : null; break;
      case "ArrowDown": to = at >= 0 && at < siblings.length - 1 ? siblings[at + 1] : null; break;
      case "Home": to = 0; break;
      case "Enter": case " ": this.select(n.id, false); e.preventDefault(); return;
      default: return;
    }
    e.preventDefault();
    if (to === null || to === undefined || !this.els.has(to)) return;
    this.focusId = to;
    this.syncTabStops();
    const g = this.els.get(to).g;
    g.focus();
    if (g.scrollIntoView) g.scrollIntoView({ block: "nearest", inline: "nearest" });
  }

  select(id, focus) {
    this.selectedId = id;
    this.drawTree();
    this.drawDetails();
    if (focus) this.els.get(id)?.g.focus();
  }

  drawDetails() {
    const n = this.nodes.get(this.selectedId);
    if (!n) return;
    const rows = [
      ["node", n.id === 0 ? "0 (the prompt)" : n.id],
      ["parent", n.parent ?? "—"],
      ["depth", n.depth ?? "—"],
      ["status", n.status ?? "—"],
      ["tokens", n.tokens ?? "—"],
      ["score", num(n.score)],
      ["mean logprob", num(n.mean_logprob)],
      ["answer", n.answer ?? "—"],
    ];
    for (const [k, v] of Object.entries(n.notes || {})) rows.push([k, typeof v === "number" ? num(v) : typeof v === "object" ? JSON.stringify(v) : String(v)]);
    const path = this.pathTo(n.id);
    const haveText = n.text !== undefined;
    const solution = path.map((i) => this.nodes.get(i)?.text ?? "").join("");
    this.detailsEl.replaceChildren(...present(
      kv(rows),
      el("h4", { class: "small" }, "Step text"),
      haveText ? el("pre", { id: "node-text" }, n.id === 0 ? "(the prompt)" : n.text || "(empty)") : el("p", { class: "muted small" }, "Text arrives with the final trace."),
      path.length > 1 && haveText ? el("details", {}, el("summary", {}, `Solution so far (${path.length} steps)`), el("pre", {}, solution)) : null));
  }

  drawAnswer() {
    if (!this.answer) return;
    const a = this.answer;
    this.answerEl.replaceChildren(...present(
      el("div", { class: "answer", id: "final-answer" }, a.answer ?? "(no answer extracted)"),
      kv([["strategy", a.strategy ?? "—"], ["finish", a.finishReason ?? "—"], ["support", a.support === null || a.support === undefined ? "—" : num(a.support)]]),
      a.text ? el("details", {}, el("summary", {}, "Chosen solution"), el("div", { class: "answer-text" }, a.text)) : null));
  }

  drawTally() {
    const cands = this.candidates.filter(Boolean);
    if (!cands.length) {
      this.tallyEl.replaceChildren(el("p", { class: "muted small" }, "No candidates yet."));
      return;
    }
    const t = tally(cands);
    const max = Math.max(1, ...t.map(([, n]) => n));
    const margin = this.voteMargin === null ? "" : ` · margin ${num(this.voteMargin)}`;
    this.tallyEl.replaceChildren(
      el("p", { class: "small muted" }, `${cands.length} candidate${cands.length === 1 ? "" : "s"}${margin}`),
      el("ul", { class: "bars", "aria-label": "Votes per answer" }, t.map(([answer, n]) =>
        el("li", { class: answer === this.leaderAnswer ? "lead" : "" },
          el("span", { class: "name", title: answer }, answer === NONE ? "(none)" : answer),
          barFill(n / max),
          el("span", { class: "num" }, n)))));
  }

  drawSpend() {
    const u = this.usage;
    const budget = this.spend.budget || 0;
    const rows = u
      ? [["generated", u.generated_tokens], ["prefill computed", u.prefill_tokens_computed], ["verifier", u.verifier_tokens],
         ["probes (in above)", u.probe_tokens], ["cache reused (free)", u.prefill_tokens_reused]]
      : [["generated", this.spend.generated], ["spent so far", this.spend.spent]];
    const scale = Math.max(1, budget, ...rows.map(([, v]) => v || 0));
    const total = u ? spentOf(u) : this.spend.spent;
    this.spendEl.replaceChildren(
      el("p", { class: "small muted", id: "spent-total" }, (budget ? `${total} of ${budget} tokens charged` : `${total} tokens charged`) + (u ? ` · ${u.verifier_calls} verifier calls · ${u.wall_ms} ms` : "")),
      el("ul", { class: "bars", "aria-label": "Tokens by kind" }, rows.map(([name, v]) =>
        el("li", {}, el("span", { class: "name" }, name), barFill((v || 0) / scale), el("span", { class: "num" }, v ?? 0)))));
  }

  drawRouter() {
    if (this.router === undefined) {
      this.routerEl.replaceChildren(el("p", { class: "muted small" }, "Known when the search ends (the auto strategy routes)."));
    } else if (this.router === null) {
      this.routerEl.replaceChildren(el("p", { class: "muted small", id: "router-none" }, "No router decision: the strategy was chosen by hand."));
    } else {
      this.routerEl.replaceChildren(kv(Object.entries(this.router).map(([k, v]) => [k, typeof v === "object" && v !== null ? JSON.stringify(v) : String(v)])));
    }
  }
}

const NONE = "\u0000none";

/** [answer, votes] pairs, most votes first (ties: first found). */
export function tally(candidates) {
  const counts = new Map();
  for (const c of candidates) {
    const a = c.answer ?? NONE;
    counts.set(a, (counts.get(a) || 0) + 1);
  }
  const order = [...counts.entries()];
  return order.sort((x, y) => (x[0] === NONE) - (y[0] === NONE) || y[1] - x[1]);
}

function spentOf(u) {
  return (u.generated_tokens || 0) + (u.prefill_tokens_computed || 0) + (u.verifier_tokens || 0);
}

function describe(n, leader) {
  if (n.id === 0) return "The prompt (root)";
  const parts = [`Node ${n.id}`, `depth ${n.depth ?? "?"}`, n.status || "open", `${n.tokens ?? 0} tokens`, `score ${num(n.score)}`];
  if (n.answer) parts.push(`answer ${n.answer}`);
  if (leader) parts.push("leader");
  return parts.join(", ");
}

/** The children worth appending (DOM `replaceChildren` would print `null`). */
function present(...children) {
  return children.filter((c) => c !== null && c !== undefined && c !== false);
}

function kv(rows) {
  return el("dl", { class: "kv" }, rows.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v === undefined || v === null ? "—" : String(v))]));
}

function barFill(fraction) {
  const fill = el("span", { class: "fill" });
  fill.style.width = Math.round(Math.max(0, Math.min(1, fraction)) * 100) + "%";
  return el("span", { class: "track" }, fill);
}
