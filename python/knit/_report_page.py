"""The HTML page of Profile.save_html (_report.py): markup, style and drawing code, all inline.

The script reads the JSON in #data and draws each view into its section; when every view is drawn
it sets data-rendered on <body> to their number, and any exception goes to data-error (and the
console), so a headless browser can tell a drawn page from a broken one.
"""

PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Knit profile: @TITLE@</title>
<style>
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; } h2 { font-size: 15px; margin-top: 24px; }
table.summary td { padding: 2px 12px 2px 0; }
svg { border: 1px solid #ccc; background: #fff; }
.note { color: #666; }
pre { font: 12px ui-monospace, monospace; background: #f7f7f7; padding: 8px; overflow-x: auto; }
</style>
</head>
<body>
<h1>Knit profile: @TITLE@</h1>
<section id="summary"><h2>Summary</h2></section>
<section id="timeline"><h2>Engine timeline</h2>
<p class="note">Wheel: zoom; drag: pan; double-click: whole run. Hover an instruction for its source line.</p></section>
<section id="memory"><h2>SBUF and PSUM occupancy</h2></section>
<section id="placements"><h2>SBUF and PSUM placements</h2>
<p class="note">Where each tensor sits over its live range (x: body instruction index, y: byte offset in a
partition; the memory map of docs/profiling.md). Hover a tensor for its partitions, bytes and source line.</p>
@PLACEMENTS@</section>
<section id="bandwidth"><h2>DMA bandwidth</h2></section>
<section id="source"><h2>Source, per line</h2></section>
<script type="application/json" id="data">@DATA@</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg";
const COLORS = {pe: "#4e79a7", act: "#f28e2b", dve: "#59a14f", pool: "#b07aa1"};
const color = q => COLORS[q] || "#9c755f";
const us = ns => (ns / 1e3).toFixed(2) + " us";
const most = a => a.reduce((m, v) => Math.max(m, v), 1);
function el(tag, attrs, parent, text) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function html(tag, parent, text) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}

function drawSummary(sec) {
  const s = D.summary, t = html("table", sec); t.className = "summary";
  const rows = [["latency", s.latency_us.toFixed(2) + " us (" + s.launch_us.toFixed(1) + " us launch)"],
    ["MFU / HFU", (100 * s.mfu).toFixed(1) + "% / " + (100 * s.hfu).toFixed(1) + "%"],
    ["DMA", (s.dma_bytes / 1048576).toFixed(2) + " MiB, " + s.dma_gbps.toFixed(1) + " GB/s, in use " +
      (100 * s.dma_utilization).toFixed(0) + "%"]];
  for (const q in s.engines) rows.push([q + " utilization", (100 * s.engines[q]).toFixed(1) + "%"]);
  for (const [k, v] of rows) { const r = html("tr", t); html("td", r, k); html("td", r, v); }
}

function drawTimeline(sec) {
  const T = D.timeline, n = T.start.length, W = 1200, lane = 18, left = 90;
  const lanes = [], laneOf = {};
  for (let i = 0; i < n; i++) {
    const k = T.core[i] + ":" + T.queue[i];
    if (!(k in laneOf)) { laneOf[k] = lanes.length; lanes.push(k); }
  }
  lanes.sort(); lanes.forEach((k, i) => laneOf[k] = i);
  const end = most(T.end), svg = el("svg", {width: W, height: lanes.length * lane + 24}, sec);
  if (T.rows > n) html("p", sec, "Showing the first " + n + " of " + T.rows + " executed instructions.").className =
    "note";
  let t0 = 0, t1 = end;
  function render() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const x = t => left + (t - t0) / (t1 - t0) * (W - left - 8);
    lanes.forEach((k, i) => {
      const [c, q] = k.split(":");
      el("text", {x: 4, y: i * lane + 13}, svg, "core" + c + " " + D.queues[q]);
    });
    for (let i = 0; i < n; i++) {
      if (T.end[i] < t0 || T.start[i] > t1) continue;
      const q = D.queues[T.queue[i]], site = D.sites[T.ir[i]] || ["?", "?", 0];
      const r = el("rect", {x: Math.max(left, x(T.start[i])), y: laneOf[T.core[i] + ":" + T.queue[i]] * lane + 2,
        width: Math.max(0.5, x(T.end[i]) - Math.max(left, x(T.start[i]))), height: lane - 4, fill: color(q)}, svg);
      el("title", {}, r, site[0] + " @ " + site[1] + ":" + site[2] + "\n" + us(T.start[i]) + " - " + us(T.end[i]) +
        (T.stall[i] > 0 ? "\nwaited " + us(T.stall[i]) : ""));
    }
    el("text", {x: left, y: lanes.length * lane + 18}, svg, us(t0));
    el("text", {x: W - 80, y: lanes.length * lane + 18}, svg, us(t1));
  }
  svg.addEventListener("wheel", ev => {
    ev.preventDefault();
    const at = t0 + (ev.offsetX - left) / (W - left - 8) * (t1 - t0), f = ev.deltaY > 0 ? 1.25 : 0.8;
    t0 = Math.max(0, at - (at - t0) * f); t1 = Math.min(end, at + (t1 - at) * f); render();
  });
  let drag = null;
  svg.addEventListener("mousedown", ev => drag = ev.offsetX);
  svg.addEventListener("mouseup", () => drag = null);
  svg.addEventListener("mousemove", ev => {
    if (drag === null) return;
    const dt = (drag - ev.offsetX) / (W - left - 8) * (t1 - t0), w = t1 - t0;
    t0 = Math.min(Math.max(0, t0 + dt), end - w); t1 = t0 + w; drag = ev.offsetX; render();
  });
  svg.addEventListener("dblclick", () => { t0 = 0; t1 = end; render(); });
  render();
}

function stepChart(sec, label, xs, ys, end, unit, fill) {
  const W = 1200, H = 120, left = 90, top = most(ys);
  const svg = el("svg", {width: W, height: H + 20}, sec);
  const x = t => left + t / end * (W - left - 8), y = v => H - v / top * (H - 10);
  let d = "M" + left + "," + H;
  for (let i = 0; i < xs.length; i++)
    d += " L" + x(xs[i]) + "," + y(i ? ys[i - 1] : 0) + " L" + x(xs[i]) + "," + y(ys[i]);
  d += " L" + x(end) + "," + y(ys.length ? ys[ys.length - 1] : 0) + " L" + x(end) + "," + H + " Z";
  el("title", {}, el("path", {d: d, fill: fill, stroke: "#333", "stroke-width": 0.5}, svg), label);
  el("text", {x: 4, y: 14}, svg, label);
  el("text", {x: 4, y: 30}, svg, "peak " + top.toFixed(0) + " " + unit);
  el("text", {x: left, y: H + 16}, svg, "0");
  el("text", {x: W - 80, y: H + 16}, svg, us(end));
}

function drawMemory(sec) {
  const end = most(D.timeline.end);
  for (const b of ["sbuf", "psum"]) {
    const m = D.memory[b];
    const fill = b === "sbuf" ? "#a0cbe8" : "#ffbe7d";
    stepChart(sec, b.toUpperCase() + " bytes per partition", m.time, m.bytes, end, "B", fill);
    const names = m.alive.map(t => t.name + " " + t.bytes + " B @" + t.offset + " (" + t.where + ")").join(", ");
    const count = m.alive_count + (m.alive_count === 1 ? " tensor" : " tensors");
    const p = html("p", sec, m.alive_count ? "At the peak (" + us(m.peak_at) + "), " + count + " alive: " + names
      : "No " + b.toUpperCase() + " tensors.");
    p.className = "note";
  }
}

function drawBandwidth(sec) {
  const B = D.bandwidth, xs = B.bytes_per_ns.map((_, i) => i * B.bin_ns);
  stepChart(sec, "DMA GB/s (bytes per ns)", xs, B.bytes_per_ns, B.bin_ns * B.bytes_per_ns.length, "GB/s", "#8cd17d");
}

function drawSource(sec) { html("pre", sec, D.source); }

try {
  const views = {summary: drawSummary, timeline: drawTimeline, memory: drawMemory, bandwidth: drawBandwidth,
    source: drawSource};
  for (const id in views) views[id](document.getElementById(id));
  document.body.dataset.rendered = String(Object.keys(views).length);
} catch (e) {
  document.body.dataset.error = String(e);
  console.error(e);
}
</script>
</body>
</html>
"""
