#include "cli/web_view.h"

namespace slip::cli {

// Elements carry ids and data-* attributes so a headless browser test can
// read what the page shows (test/integration/web_view_test.cc).
const char* WebViewPage() {
  return R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Slipstream</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
  h1 { font-size: 1.4em; margin: 0 0 .3em; } h2 { font-size: 1.1em; margin: 1.2em 0 .4em; }
  table { border-collapse: collapse; } td, th { padding: .2em .7em; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
  th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
  tr[data-state="down"] td, tr[data-answers="no"] td { color: #b00; }
  #status { color: #666; } canvas { border: 1px solid #ddd; }
  .legend span { margin-right: 1em; }
</style>
</head>
<body>
<h1>Slipstream <span id="design"></span></h1>
<div id="summary"></div>
<div id="status">loading…</div>
<h2>Nodes</h2>
<table id="nodes"><thead><tr><th>node</th><th>state</th><th>answers</th><th>term</th><th>lease left (s)</th>
<th>ops/s</th><th>put p50 / p99 (ms)</th><th>get p50 / p99 (ms)</th><th>CPU %</th><th>writes in flight</th><th>keys</th></tr></thead>
<tbody></tbody></table>
<h2>Throughput (operations/s, whole cluster)</h2>
<canvas id="throughput" width="760" height="160"></canvas>
<h2>Latency (ms, at the primaries)</h2>
<div class="legend"><span style="color:#1f77b4">put p50</span><span style="color:#d62728">put p99</span><span style="color:#2ca02c">get p99</span></div>
<canvas id="latency" width="760" height="160"></canvas>
<h2>Shards</h2>
<table id="shards"><thead><tr><th>shard</th><th>primary</th><th>backups</th><th>syncing</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
const keep = 120;
const series = { ops: [], putP50: [], putP99: [], getP99: [] };
let previous = null, busy = false, updates = 0;

function operations(s) { return (s.puts || 0) + (s.gets || 0) + (s.dels || 0) + (s.writes || 0); }
function cpuNs(s) {
  let t = 0;
  for (const [role, ns] of Object.entries(s.cpu_ns || {})) if (role !== "flush" && role !== "compaction") t += ns;
  return t;
}
// A quantile (ns) of the requests between two histogram snapshots, or null.
function quantile(before, after, q) {
  if (!after || !after.buckets) return null;
  const b = before && before.buckets ? before : { count: 0, buckets: [] };
  const total = after.count - b.count;
  if (total <= 0) return null;
  const target = q * total;
  let prevCum = 0, prevBound = 0;
  for (let i = 0; i < after.buckets.length; i++) {
    const bound = after.buckets[i][0];
    const cum = after.buckets[i][1] - (b.buckets[i] ? b.buckets[i][1] : 0);
    if (cum >= target && cum > prevCum) return prevBound + (bound - prevBound) * (target - prevCum) / (cum - prevCum);
    prevCum = cum; prevBound = bound;
  }
  return prevBound;
}
function mergeHistograms(list) {
  let out = null;
  for (const h of list) {
    if (!h || !h.buckets) continue;
    if (!out) { out = { count: h.count, buckets: h.buckets.map(x => [x[0], x[1]]) }; continue; }
    out.count += h.count;
    h.buckets.forEach((x, i) => { if (out.buckets[i] && out.buckets[i][0] === x[0]) out.buckets[i][1] += x[1]; });
  }
  return out;
}
const ms = ns => ns === null ? "–" : (ns / 1e6).toFixed(2);
function cell(tr, text) { const td = document.createElement("td"); td.textContent = text; tr.appendChild(td); return td; }

function render(data) {
  const c = data.config;
  document.getElementById("design").textContent = "— " + c.design;
  document.getElementById("summary").textContent =
    "term " + c.term + " · " + c.nodes.length + " nodes · " + c.shards.length + " shards · RF " + c.replication_factor +
    " · " + c.provider + " · PM " + (c.pm || "?") + " · page served by node " + data.self;
  const answers = {};
  for (const n of data.nodes) answers[n.node] = n;
  const before = {};
  if (previous) for (const n of previous.nodes) if (n.ok) before[n.node] = n.stats;
  const dt = previous ? (data.now_ms - previous.now_ms) / 1000 : 0;
  const tbody = document.querySelector("#nodes tbody");
  tbody.textContent = "";
  let totalOps = 0;
  const putNow = [], putThen = [], getNow = [], getThen = [];
  for (const node of c.nodes) {
    const a = answers[node.id];
    const s = a && a.ok ? a.stats : null;
    const b = before[node.id];
    const tr = document.createElement("tr");
    tr.id = "node-" + node.id;
    tr.dataset.state = node.state;
    tr.dataset.answers = s ? "yes" : "no";
    cell(tr, "node " + node.id);
    cell(tr, node.state);
    cell(tr, s ? "yes" : "no" + (a && a.error ? " (" + a.error + ")" : ""));
    cell(tr, s ? (s.term ?? s.serving_term ?? "–") : "–");
    cell(tr, s && s.lease_ms_left !== undefined ? (s.lease_ms_left / 1000).toFixed(1) : "–");
    let ops = null;
    if (s && b && dt > 0) { ops = (operations(s) - operations(b)) / dt; totalOps += ops; }
    cell(tr, ops === null ? "–" : ops.toFixed(0));
    const lat = s && s.latency_ns ? s.latency_ns : {};
    const latB = b && b.latency_ns ? b.latency_ns : {};
    cell(tr, ms(quantile(latB.put, lat.put, 0.5)) + " / " + ms(quantile(latB.put, lat.put, 0.99)));
    cell(tr, ms(quantile(latB.get, lat.get, 0.5)) + " / " + ms(quantile(latB.get, lat.get, 0.99)));
    cell(tr, s && b && dt > 0 ? (100 * (cpuNs(s) - cpuNs(b)) / 1e9 / dt).toFixed(0) : "–");
    cell(tr, s && s.in_flight_writes !== undefined ? s.in_flight_writes : "–");
    cell(tr, s && s.store ? s.store.keys : "–");
    tbody.appendChild(tr);
    if (s && b) { putNow.push(lat.put); putThen.push(latB.put); getNow.push(lat.get); getThen.push(latB.get); }
  }
  if (previous) {
    const pn = mergeHistograms(putNow), pt = mergeHistograms(putThen);
    const gn = mergeHistograms(getNow), gt = mergeHistograms(getThen);
    push(series.ops, totalOps);
    push(series.putP50, quantile(pt, pn, 0.5));
    push(series.putP99, quantile(pt, pn, 0.99));
    push(series.getP99, quantile(gt, gn, 0.99));
    draw("throughput", [[series.ops, "#1f77b4", 1]]);
    draw("latency", [[series.putP50, "#1f77b4", 1e-6], [series.putP99, "#d62728", 1e-6], [series.getP99, "#2ca02c", 1e-6]]);
  }
  const sbody = document.querySelector("#shards tbody");
  sbody.textContent = "";
  c.shards.forEach((sh, i) => {
    const tr = document.createElement("tr");
    tr.id = "shard-" + i;
    cell(tr, i); cell(tr, sh.primary); cell(tr, (sh.backups || []).join(", ")); cell(tr, (sh.syncing || []).join(", "));
    sbody.appendChild(tr);
  });
  previous = data;
  updates++;
  document.body.dataset.updates = updates;
  document.body.dataset.term = c.term;
  document.getElementById("status").textContent = "updated " + new Date(data.now_ms).toLocaleTimeString();
}
function push(a, v) { a.push(v); if (a.length > keep) a.shift(); }
function draw(id, lines) {
  const cv = document.getElementById(id), g = cv.getContext("2d");
  g.clearRect(0, 0, cv.width, cv.height);
  let max = 0;
  for (const [data, , scale] of lines) for (const v of data) if (v !== null) max = Math.max(max, v * scale);
  max = max > 0 ? max * 1.1 : 1;
  g.fillStyle = "#666"; g.font = "11px sans-serif";
  g.fillText(max.toPrecision(3), 4, 12); g.fillText("0", 4, cv.height - 4);
  for (const [data, color, scale] of lines) {
    g.strokeStyle = color; g.lineWidth = 1.5; g.beginPath();
    let started = false;
    data.forEach((v, i) => {
      if (v === null) { started = false; return; }
      const x = 40 + (cv.width - 50) * i / (keep - 1), y = cv.height - 6 - (cv.height - 20) * v * scale / max;
      if (started) g.lineTo(x, y); else { g.moveTo(x, y); started = true; }
    });
    g.stroke();
  }
}
async function poll() {
  if (busy) return;
  busy = true;
  try {
    const r = await fetch("/api/cluster", { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + await r.text());
    render(await r.json());
  } catch (e) {
    document.getElementById("status").textContent = "no answer from this node: " + e.message;
  } finally {
    busy = false;
  }
}
poll();
setInterval(poll, 1000);
</script>
</body>
</html>
)HTML";
}

}  // namespace slip::cli
