// Stepwise dashboard: renders what the server pushes over server-sent
// events (fed by the cluster's watches); it never polls. Text from the
// cluster is only ever set with textContent, never parsed as HTML.
"use strict";

const token = document.querySelector('meta[name="stepwise-token"]').content;
const main = document.getElementById("main");
const live = document.getElementById("live");
const SVG = "http://www.w3.org/2000/svg";

let source = null;
let state = { list: null, rollout: null };
let result = null; // the answer to the last request, shown until the page changes

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children.flat(Infinity)) if (c) e.append(c);
  return e;
}

function route() {
  const m = location.hash.match(/^#\/rollouts\/([^/]+)\/([^/]+)$/);
  return m ? { ns: decodeURIComponent(m[1]), name: decodeURIComponent(m[2]) } : null;
}

function connect() {
  if (source) source.close();
  state = { list: null, rollout: null };
  const r = route();
  const url = "/api/stream" + (r ? "?rollout=" + encodeURIComponent(r.ns + "/" + r.name) : "");
  source = new EventSource(url);
  source.addEventListener("open", () => { live.textContent = "live"; live.classList.remove("off"); });
  source.addEventListener("error", () => { live.textContent = "reconnecting"; live.classList.add("off"); });
  source.addEventListener("list", (e) => { state.list = JSON.parse(e.data); render(); });
  source.addEventListener("rollout", (e) => { state.rollout = JSON.parse(e.data); render(); });
  render();
}

window.addEventListener("hashchange", () => { result = null; connect(); });
document.addEventListener("DOMContentLoaded", connect);

function render() {
  const scope = document.getElementById("scope");
  if (state.list) scope.textContent = state.list.namespace ? "namespace " + state.list.namespace : "all namespaces";
  main.replaceChildren(route() ? detailPage() : listPage());
}

function phase(p) {
  return el("span", { class: "phase phase-" + p, "data-phase": p, text: p });
}

function listPage() {
  const l = state.list;
  if (!l) return el("p", { class: "muted", text: "Loading…" });
  const page = el("section", { id: "list" }, el("h1", { text: "Rollouts" }));
  if (l.error) page.append(el("div", { class: "error", id: "list-error", text: l.error }));
  if (!l.rollouts.length) {
    if (!l.error) page.append(el("p", { class: "muted", text: "No Rollout here yet." }));
    return page;
  }
  const rows = l.rollouts.map((r) => {
    const href = "#/rollouts/" + encodeURIComponent(r.namespace) + "/" + encodeURIComponent(r.name);
    const pods = r.workloadNote ? el("span", { class: "warn", text: r.workloadNote })
      : `${r.updated}/${r.replicas} updated, ${r.ready}/${r.replicas} ready`;
    return el("tr", { class: "rollout", "data-rollout": r.namespace + "/" + r.name, onclick: () => { location.hash = href; } },
      el("td", {}, el("a", { href, text: r.name })),
      el("td", { text: r.namespace }),
      el("td", {}, phase(r.phase), r.reason ? el("div", { class: "muted", text: r.reason }) : null),
      el("td", { class: "step", text: r.step }),
      el("td", { class: "mono", text: r.canary || "-" }),
      el("td", { class: "mono", text: r.stable || "-" }),
      el("td", {}, pods));
  });
  page.append(el("table", {},
    el("thead", {}, el("tr", {}, ["Name", "Namespace", "Phase", "Step", "Canary", "Stable", "Pods"].map((h) => el("th", { text: h })))),
    el("tbody", {}, rows)));
  return page;
}

function detailPage() {
  const r = route();
  const v = state.rollout;
  const page = el("section", { id: "rollout" }, el("p", {}, el("a", { href: "#/", text: "← all rollouts" })));
  if (!v) { page.append(el("p", { class: "muted", text: "Loading…" })); return page; }
  if (v.error) {
    page.append(el("h1", { text: r.ns + "/" + r.name }), el("div", { class: "error", id: "rollout-error", text: v.error }));
    return page;
  }
  const d = v.rollout;
  page.append(el("h1", {}, d.namespace + "/" + d.name + " ", phase(d.phase)));
  for (const n of v.notes || []) page.append(el("div", { class: "note", text: n }));
  if (d.stale) page.append(el("div", { class: "note", text: "Stale: " + d.stale }));
  const facts = [["Message", d.message], ["Reason", d.reason], ["Workload", d.workload], ["Canary", d.canary || "-"],
    ["Stable", d.stable || "-"], ["Gate", d.gate], ["Pause", d.pause]];
  for (const p of d.pending || []) facts.push(["Request", p]);
  page.append(el("div", { class: "card" },
    el("dl", { class: "facts" }, facts.filter(([, x]) => x).map(([k, x]) => [el("dt", { text: k }), el("dd", { "data-field": k.toLowerCase(), text: x })])),
    actions(d)));

  page.append(el("h2", { text: "Steps" }), el("ol", { class: "steps" }, d.steps.map((s) => {
    const li = el("li", { "data-step": s.number, "data-state": s.state },
      el("div", { class: "n", text: "Step " + s.number }),
      el("div", { text: "partition " + s.partition }),
      s.pause ? el("div", { class: "muted", text: "pause " + s.pause }) : null,
      s.analysis ? el("div", { class: "muted", text: "analysis: " + s.analysis }) : null);
    if (s.state === "current" && d.progress) {
      const pct = d.progress.target > 0 ? Math.min(100, 100 * d.progress.ready / d.progress.target) : 100;
      const fill = el("span");
      fill.style.width = pct + "%";
      li.append(el("div", { class: "bar" }, fill), el("div", { class: "muted progress", text: `${d.progress.ready}/${d.progress.target} updated Pods ready` }));
    }
    return li;
  })));

  page.append(el("h2", { text: "Analysis" }));
  if (d.analysis) {
    const a = d.analysis;
    page.append(el("p", {}, `Step ${a.step}: `, el("strong", { text: a.phase }), a.message ? " — " + a.message : ""));
    page.append(el("table", { id: "metrics" },
      el("thead", {}, el("tr", {}, ["Metric", "Phase", "Measured", "Successful", "Failed", "Inconclusive", "Errors", "Last"].map((h) => el("th", { text: h })))),
      el("tbody", {}, a.metrics.map((m) => el("tr", {},
        el("td", { text: m.name }), el("td", { text: m.phase || "-" }), el("td", { text: m.of ? `${m.count}/${m.of}` : m.count }),
        el("td", { text: m.successful }), el("td", { class: m.failed ? "bad" : "", text: m.failed }),
        el("td", { text: m.inconclusive }), el("td", { text: m.errors }), el("td", { class: "mono", text: m.last || "-" }))))));
    const judged = a.metrics.filter((m) => m.figure);
    if (judged.length) {
      page.append(el("div", { class: "charts", id: "judge" }, judged.map((m) =>
        el("figure", {}, el("img", { src: m.figure, alt: m.judge, width: 320, height: 200 }), el("figcaption", { class: "mono", text: m.judge })))));
    }
  } else {
    page.append(el("p", { class: "muted", text: "No analysis in progress." }));
  }
  if (d.charts.length) page.append(el("div", { class: "charts" }, d.charts.map(chart)));
  else page.append(el("p", { class: "muted", id: "no-measurements", text: "No measurement yet." }));

  page.append(el("h2", { text: "Pods" }), el("table", { id: "pods" },
    el("thead", {}, el("tr", {}, ["Pod", "Revision", "Ready", "Restarts", "Phase", "Node"].map((h) => el("th", { text: h })))),
    el("tbody", {}, d.pods.map((p) => el("tr", { "data-pod": p.name, "data-role": p.role || "" },
      el("td", { class: "mono", text: p.name }),
      el("td", { class: "mono" }, p.revision || "-", p.role ? el("span", { class: "muted", text: " (" + p.role + ")" }) : null),
      el("td", { class: p.ready ? "ok" : "warn", text: p.ready ? "ready" : (p.updating ? "updating in place" : "not ready") }),
      el("td", { text: p.restarts }), el("td", { text: p.phase }), el("td", { class: "muted", text: p.node || "-" }))))));

  page.append(el("h2", { text: "Events" }));
  if (!d.events.length) page.append(el("p", { class: "muted", text: "No Event about this Rollout (Events expire after an hour by default)." }));
  else page.append(el("table", { id: "events" },
    el("thead", {}, el("tr", {}, ["Time", "Type", "Reason", "Message"].map((h) => el("th", { text: h })))),
    el("tbody", {}, d.events.map((e) => el("tr", { class: "ev-" + e.type },
      el("td", { class: "muted", text: new Date(e.time).toLocaleTimeString() + (e.count > 1 ? ` (×${e.count})` : "") }),
      el("td", { text: e.type }), el("td", { class: "reason", text: e.reason }), el("td", { text: e.message }))))));
  return page;
}

function actions(d) {
  const box = el("div", { class: "actions" }, d.actions.map((a) => el("div", { class: "action" },
    el("button", {
      type: "button", "data-action": a.name, class: a.name === "abort" ? "danger" : "",
      disabled: !a.allowed, title: a.allowed ? a.effect : a.reason,
      onclick: () => ask(d, a),
    }, a.name[0].toUpperCase() + a.name.slice(1)),
    a.allowed ? null : el("span", { class: "why", "data-why": a.name, text: a.reason }))));
  const out = el("div", {}, box);
  if (result) out.append(el("div", { id: "result", class: result.ok ? "ok" : "bad", text: result.message }));
  return out;
}

// ask confirms with a dialog of the page (not window.confirm, which blocks
// the page), then sends the request.
function ask(d, a) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = `${a.name[0].toUpperCase() + a.name.slice(1)} ${d.namespace}/${d.name}?`;
  document.getElementById("confirm-text").textContent = "The controller " + a.effect + ".";
  document.getElementById("confirm-annotation").textContent = "writes " + a.annotation + " with the current time, as kubectl stepwise " + a.name + " does";
  const ok = document.getElementById("confirm-ok");
  const cancel = document.getElementById("confirm-cancel");
  ok.dataset.action = a.name;
  const close = () => { ok.onclick = null; cancel.onclick = null; dlg.close(); };
  cancel.onclick = close;
  ok.onclick = async () => {
    close();
    try {
      const res = await fetch(`/api/rollouts/${encodeURIComponent(d.namespace)}/${encodeURIComponent(d.name)}/${a.name}`, {
        method: "POST", headers: { "X-Stepwise-Token": token }, credentials: "same-origin",
      });
      const body = await res.json();
      result = { ok: res.ok, message: body.message };
    } catch (err) {
      result = { ok: false, message: String(err) };
    }
    render();
  };
  dlg.showModal();
}

function fmt(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(2);
  return String(Number(v.toPrecision(3)));
}

// chart draws one metric: its measurements over time (x) and value (y),
// the successful band shaded between the threshold's bounds, failed points
// in red with a cross, and points without a value (inconclusive, error) as
// hollow markers on the bottom edge.
function chart(c) {
  const W = 560, H = 220, L = 52, R = 14, T = 14, B = 30;
  const pts = c.points.map((p) => ({ ...p, t: Date.parse(p.time) }));
  let t0 = Math.min(...pts.map((p) => p.t)), t1 = Math.max(...pts.map((p) => p.t));
  if (t1 - t0 < 1000) { t0 -= 5000; t1 += 5000; }
  const values = pts.filter((p) => p.value !== null && p.value !== undefined).map((p) => p.value);
  const bounds = [c.min, c.max].filter((x) => x !== null && x !== undefined);
  let lo = Math.min(...values, ...bounds, 0), hi = Math.max(...values, ...bounds);
  if (!(hi > lo)) hi = lo + 1;
  const pad = (hi - lo) * 0.1;
  lo = lo === 0 ? 0 : lo - pad; hi += pad;
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = (v) => H - B - (H - T - B) * (v - lo) / (hi - lo);
  const g = svg("svg", {
    class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "data-metric": c.metric,
    "data-points": String(pts.length), "data-failed": String(pts.filter((p) => p.phase === "Failed").length),
  });
  g.append(svg("title", {}, document.createTextNode(`${c.metric}: ${pts.length} measurements`)));
  const bandTop = c.max !== null && c.max !== undefined ? y(c.max) : T;
  const bandBottom = c.min !== null && c.min !== undefined ? y(c.min) : H - B;
  g.append(svg("rect", { class: "band", x: L, y: bandTop, width: W - L - R, height: Math.max(0, bandBottom - bandTop) }));
  for (const [v, name] of [[c.min, "min"], [c.max, "max"]]) {
    if (v === null || v === undefined) continue;
    g.append(svg("line", { class: "edge", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    const label = svg("text", { x: W - R - 2, y: y(v) - 3, "text-anchor": "end" });
    label.textContent = name + " " + fmt(v);
    g.append(label);
  }
  g.append(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }), svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  for (const v of [lo, hi]) {
    const t = svg("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" });
    t.textContent = fmt(v);
    g.append(t);
  }
  for (const [t, anchor] of [[t0, "start"], [t1, "end"]]) {
    const e = svg("text", { x: x(t), y: H - B + 14, "text-anchor": anchor });
    e.textContent = new Date(t).toLocaleTimeString();
    g.append(e);
  }
  const valued = pts.filter((p) => p.value !== null && p.value !== undefined);
  if (valued.length > 1) g.append(svg("polyline", { class: "line", points: valued.map((p) => `${x(p.t)},${y(p.value)}`).join(" ") }));
  for (const p of pts) {
    const has = p.value !== null && p.value !== undefined;
    const cx = x(p.t), cy = has ? y(p.value) : H - B;
    const dot = svg("circle", { class: "pt pt-" + p.phase, cx, cy, r: p.phase === "Failed" ? 5 : 4, "data-phase": p.phase });
    const tip = svg("title");
    tip.textContent = `${new Date(p.t).toLocaleTimeString()} step ${p.step}: ${p.text || "no value"} (${p.phase})${p.message ? " — " + p.message : ""}`;
    dot.append(tip);
    g.append(dot);
    if (p.phase === "Failed") {
      g.append(svg("path", { class: "cross", d: `M${cx - 8},${cy - 8} l16,16 M${cx + 8},${cy - 8} l-16,16` }));
    }
  }
  const failed = pts.filter((p) => p.phase === "Failed").length;
  const noValue = pts.filter((p) => p.phase === "Inconclusive" || p.phase === "Error").length;
  return el("div", { class: "card" },
    el("strong", { text: c.metric }),
    g,
    el("div", { class: "legend" },
      el("span", {}, el("i", { class: "lg-band" }), "successful band" + (bounds.length ? "" : " (none)")),
      el("span", { text: `${pts.length} measurements` }),
      el("span", { class: failed ? "bad" : "", text: `${failed} failed` }),
      el("span", { class: noValue ? "warn" : "", text: `${noValue} inconclusive or errors` })));
}
