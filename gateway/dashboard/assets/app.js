// codexpool dashboard: polls /dashboard/data twice a second and draws the tables and the charts
// (inline SVG). No library: everything the page runs is this file, served by the gateway.
"use strict";

const POLL_MS = 500;
const SPAN_MS = 15 * 60 * 1000;
const SVG = "http://www.w3.org/2000/svg";

let history = [];
let lastT = 0;
let lastOK = 0;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function num(v) { return el("td", { class: "num" }, v); }

function fmtMS(ms) {
  if (!ms) return "–";
  if (ms < 1000) return ms.toFixed(ms < 10 ? 1 : 0) + " ms";
  return (ms / 1000).toFixed(2) + " s";
}

function fmtIn(t, now) {
  const s = Math.max(0, Math.round((Date.parse(t) - now) / 1000));
  if (s < 60) return s + " s";
  const m = Math.round(s / 60);
  if (m < 120) return m + " min";
  const h = Math.floor(m / 60);
  if (h < 48) return h + " h " + (m % 60) + " min";
  return Math.floor(h / 24) + " d " + (h % 24) + " h";
}

function fill(tableId, rows, cols, emptyText) {
  const body = document.querySelector("#" + tableId + " tbody");
  body.replaceChildren(...rows);
  if (rows.length === 0) {
    body.append(el("tr", {}, el("td", { class: "empty", colspan: cols }, emptyText)));
  }
}

function workerRows(d) {
  return d.workers.map((w) => el("tr", { "data-worker": w.id },
    el("td", {}, w.id, w.draining ? " (draining)" : ""),
    num(w.inflight + " / " + w.max_inflight), num(w.requests), num(w.completed), num(w.failed),
    num(w.busy), num(w.errors), num(fmtMS(w.latency_avg_ms)), num(w.sockets),
    el("td", {}, (w.accounts || []).join(", "))));
}

function windowCell(ws, now) {
  const td = el("td", {});
  for (const w of ws) {
    const p = w.used_percent;
    const bar = el("span", { class: "bar" + (p >= 100 ? " full" : p >= 80 ? " high" : "") });
    const fillBar = el("i", {});
    fillBar.style.width = Math.min(100, Math.max(0, p)) + "%"; // CSSOM, which the page's CSP allows
    bar.append(fillBar);
    const line = el("div", { class: "window", "data-class": w.class }, bar, p.toFixed(p < 10 ? 1 : 0) + "%");
    if (w.class === "other") line.append(" (" + w.label + ")");
    if (w.reset_at) line.append(el("span", { class: "reset" }, "resets in " + fmtIn(w.reset_at, now)));
    td.append(line);
  }
  if (ws.length === 0) td.append("–");
  return td;
}

function accountRows(d, now) {
  return d.accounts.map((a) => {
    const by = (c) => (a.windows || []).filter((w) => w.class === c);
    const cool = a.cooling_down
      ? el("span", { class: "badge bad" }, "cooling " + fmtIn(a.cooldown_until, now) + (a.cooldown_reason ? " (" + a.cooldown_reason + ")" : ""))
      : el("span", { class: "badge ok" }, "ready");
    return el("tr", { "data-account": a.name }, el("td", {}, a.name),
      windowCell(by("5h"), now), windowCell(by("weekly"), now), windowCell(by("monthly"), now), windowCell(by("other"), now),
      el("td", {}, cool), num(a.inflight), num(a.requests), num(a.completed), num(a.limited),
      el("td", {}, (a.workers || []).join(", ")));
  });
}

function gateRows(d) {
  return (d.gates || []).map((g) => el("tr", {}, el("td", {}, g.worker), el("td", {}, g.account),
    el("td", {}, g.mode || "–"), num(g.spacing_ms ? fmtMS(g.spacing_ms) : "0 ms"),
    el("td", {}, g.closed ? el("span", { class: "badge bad" }, "closed") : "open"),
    num(g.in_flight), num(g.queued), num(g.rejections)));
}

function jobRows(d) {
  const j = d.jobs;
  document.getElementById("jobs-note").textContent = d.jobs_note || "";
  if (!j) return [];
  return [el("tr", {}, el("td", {}, j.stream), num(j.pending), num(j.running), num(j.redelivered), num(j.stored), num(j.waiting))];
}

function requestRows(list) {
  return (list || []).map((r) => el("tr", { "data-request": r.request_id },
    el("td", {}, new Date(r.time).toLocaleTimeString()), el("td", {}, r.request_id),
    el("td", {}, r.method + " " + r.path), el("td", { title: r.error || "" }, r.status + " " + r.code),
    num(fmtMS(r.duration_ms)), el("td", {}, r.key || "–"), el("td", { class: "trace" }, r.trace_id || "–")));
}

function drawUsage(d) {
  const box = document.getElementById("usage");
  if (!d.usage_enabled) {
    box.replaceChildren(el("p", { class: "note" }, "Usage accounting is not enabled on this gateway."));
    return;
  }
  const kids = [];
  if (d.usage_error) kids.push(el("p", { class: "problems" }, d.usage_error));
  const u = d.usage;
  if (Array.isArray(u) && u.length > 0 && typeof u[0] === "object") {
    const cols = Object.keys(u[0]);
    const head = el("tr", {}, ...cols.map((c) => el("th", {}, c)));
    const rows = u.map((r) => el("tr", {}, ...cols.map((c) => {
      const v = r[c];
      return typeof v === "number" ? num(v) : el("td", {}, typeof v === "object" ? JSON.stringify(v) : String(v ?? ""));
    })));
    kids.push(el("table", { id: "usage-table" }, el("thead", {}, head), el("tbody", {}, ...rows)));
  } else if (u !== undefined && u !== null) {
    kids.push(el("pre", {}, JSON.stringify(u, null, 2)));
  }
  box.replaceChildren(...kids);
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

// drawChart plots key of the history over the last SPAN_MS ending at now.
function drawChart(id, key, now, fmt) {
  const W = 600, H = 160, L = 44, R = 8, T = 8, B = 20;
  const pts = history.filter((p) => p.t >= now - SPAN_MS);
  const top = Math.max(...pts.map((p) => p[key]), 0);
  const ymax = top > 0 ? top * 1.15 : 1;
  const x = (t) => L + ((t - (now - SPAN_MS)) / SPAN_MS) * (W - L - R);
  const y = (v) => T + (1 - v / ymax) * (H - T - B);
  const kids = [];
  for (const f of [0, 0.5, 1]) {
    kids.push(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(ymax * f), y2: y(ymax * f) }));
    const label = svg("text", { class: "axis", x: L - 4, y: y(ymax * f) + 4, "text-anchor": "end" });
    label.textContent = fmt(ymax * f);
    kids.push(label);
  }
  for (const [m, text] of [[15, "-15 min"], [10, "-10"], [5, "-5"], [0, "now"]]) {
    const t = svg("text", { class: "axis", x: x(now - m * 60000), y: H - 5, "text-anchor": m === 15 ? "start" : m === 0 ? "end" : "middle" });
    t.textContent = text;
    kids.push(t);
  }
  if (pts.length > 0) {
    const line = pts.map((p) => x(p.t).toFixed(1) + "," + y(p[key]).toFixed(1)).join(" ");
    const first = x(pts[0].t).toFixed(1), last = x(pts[pts.length - 1].t).toFixed(1), base = y(0).toFixed(1);
    kids.push(svg("polygon", { class: "area", points: first + "," + base + " " + line + " " + last + "," + base }));
    kids.push(svg("polyline", { class: "line", points: line, "data-points": pts.length }));
  }
  document.getElementById(id).replaceChildren(...kids);
}

const round = (v) => (v >= 10 ? v.toFixed(0) : v.toFixed(1));

function draw(d) {
  const now = Date.parse(d.time);
  const t = d.totals;
  document.getElementById("total-workers").textContent = t.workers;
  document.getElementById("total-requests").textContent = t.requests;
  document.getElementById("total-completed").textContent = t.completed;
  document.getElementById("total-inflight").textContent = t.inflight;
  document.getElementById("total-errors").textContent = t.errors;
  fill("workers", workerRows(d), 10, "no worker answers");
  fill("accounts", accountRows(d, now), 11, "no account reported");
  fill("gates", gateRows(d), 8, "no gate reported");
  fill("jobs", jobRows(d), 6, "no jobs stream");
  fill("slow", requestRows(d.recent && d.recent.slow), 7, "no request yet");
  fill("failed", requestRows(d.recent && d.recent.failed), 7, "no failed request");
  drawUsage(d);
  const probs = document.getElementById("problems");
  probs.replaceChildren(...(d.problems || []).map((p) => el("li", {}, p)));
  drawChart("chart-throughput", "throughput", now, round);
  drawChart("chart-latency", "latency_ms", now, (v) => v.toFixed(0));
  drawChart("chart-errors", "errors", now, round);
  const cur = history[history.length - 1];
  if (cur) {
    document.getElementById("now-throughput").textContent = round(cur.throughput);
    document.getElementById("now-latency").textContent = fmtMS(cur.latency_ms);
    document.getElementById("now-errors").textContent = round(cur.errors);
  }
}

async function poll() {
  try {
    const r = await fetch("/dashboard/data?since=" + lastT, { cache: "no-store", credentials: "same-origin" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    const d = await r.json();
    if (!d.time || Date.parse(d.time) <= 0) throw new Error("no sample yet");
    const pts = d.history || [];
    if (pts.length > 0 && pts[0].t <= lastT) history = []; // the gateway restarted
    history = history.concat(pts).filter((p) => p.t >= Date.parse(d.time) - SPAN_MS);
    if (history.length > 0) lastT = history[history.length - 1].t;
    draw(d);
    lastOK = Date.now();
    const st = document.getElementById("status");
    st.textContent = "updated " + new Date(d.time).toLocaleTimeString();
    st.className = "status";
    st.dataset.updated = d.time;
  } catch (e) {
    const st = document.getElementById("status");
    st.textContent = "not updating: " + e.message + (lastOK ? " (last update " + new Date(lastOK).toLocaleTimeString() + ")" : "");
    st.className = "status stale";
  }
  setTimeout(poll, POLL_MS);
}

poll();
