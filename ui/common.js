// Shared by the pages: the API key (in this page's memory only: never in localStorage, a cookie
// or the URL; a reload forgets it), API calls that carry it as a bearer header, a streaming
// (SSE over fetch) reader, and a tiny DOM builder.

let apiKey = "";

/** Sets the key sent with every API call from now on ("" for none). */
export function setKey(key) {
  apiKey = key.trim();
}

/** Whether a key is set. */
export function hasKey() {
  return apiKey !== "";
}

/** An error from the API, with its HTTP status and OpenAI-shaped message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(extra) {
  const h = { ...extra };
  if (apiKey) h["Authorization"] = "Bearer " + apiKey;
  return h;
}

async function fail(response) {
  let message = response.status + " " + response.statusText;
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch (_) { /* not JSON */ }
  if (response.status === 401) message += " — enter the server's API key above";
  return new ApiError(response.status, message);
}

/** GETs (or POSTs `body` to) an API path; resolves to the parsed JSON. */
export async function api(path, body, signal) {
  const init = body === undefined
    ? { headers: headers({}), signal }
    : { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body), signal };
  const response = await fetch(path, init);
  if (!response.ok) throw await fail(response);
  return response.json();
}

/** POSTs `body` and calls `onData(json)` for every SSE `data:` payload until `[DONE]`. */
export async function stream(path, body, onData, signal) {
  const response = await fetch(path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", "Accept": "text/event-stream" }),
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await fail(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
      const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      onData(JSON.parse(data));
    }
  }
}

/** `el("div", {class: "x", onclick: f}, child, "text")`. */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

/** A number for people: integers as is, fractions to 3 places. */
export function num(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return "—";
  return Number.isInteger(x) ? String(x) : Number(x).toFixed(3);
}

/** Wires the header's key form (pages that call the API have one): `onKey()` after a change. */
export function keyForm(onKey) {
  const form = document.getElementById("key-form");
  if (!form) return;
  const input = document.getElementById("api-key");
  const state = document.getElementById("key-state");
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    setKey(input.value);
    input.value = "";
    state.textContent = hasKey() ? "key set (kept in this page's memory only)" : "no key";
    onKey();
  });
}

/** Reads a dropped or picked file as text. */
export function readText(file) {
  return file.text();
}

/** Makes `zone` (and the page) accept dropped files; calls `onFiles(FileList)`. */
export function dropZone(zone, onFiles) {
  const over = (e) => { e.preventDefault(); zone.classList.add("over"); };
  const leave = () => zone.classList.remove("over");
  document.addEventListener("dragover", over);
  document.addEventListener("dragleave", leave);
  document.addEventListener("drop", (e) => {
    e.preventDefault();
    leave();
    if (e.dataTransfer && e.dataTransfer.files.length) onFiles(e.dataTransfer.files);
  });
}
