// weir dashboard: polls the REST API once a second and draws what it answers.
// Plain DOM calls only (textContent, never innerHTML): job and operator names are user text.
"use strict";

const REFRESH_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";
const BOX_W = 220, BOX_H = 84, COL_GAP = 90, ROW_GAP = 36, PAD = 16;
let selectedJob = null;

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svgEl(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function fmtCount(n) { return Number(n).toLocaleString("en-US"); }

function fmtBytes(n) {
  if (n < 0) return "-";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

function fmtMs(ms) {
  if (ms < 0) return "-";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 120) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

function fmtTime(epochMs) { return epochMs > 0 ? new Date(epochMs).toLocaleTimeString() : "-"; }

function fillRows(table, rows) {
  const body = table.querySelector("tbody");
  body.replaceChildren(...rows);
}

function renderOverview(o) {
  const items = [
    ["TaskManagers", o.taskmanagers], ["slots", o["slots-total"]], ["available", o["slots-available"]],
    ["running jobs", o["jobs-running"]], ["finished", o["jobs-finished"]], ["failed", o["jobs-failed"]],
  ];
  document.getElementById("overview").replaceChildren(...items.map(([label, value]) => {
    const li = el("li", {}, `${label} `);
    li.appendChild(el("b", {}, String(value)));
    return li;
  }));
}

function renderJobs(jobs) {
  if (selectedJob === null || !jobs.some((j) => j.jid === selectedJob)) {
    const running = jobs.find((j) => !["FINISHED", "CANCELED", "FAILED"].includes(j.state));
    selectedJob = (running || jobs[jobs.length - 1] || { jid: null }).jid;
  }
  fillRows(document.getElementById("jobs"), jobs.map((j) => {
    const tr = el("tr", { class: "selectable" + (j.jid === selectedJob ? " selected" : "") });
    tr.append(el("td", {}, j.name), el("td", { class: `state-${j.state}` }, j.state),
      el("td", {}, fmtTime(j["start-time"])), el("td", { class: "num" }, fmtMs(j.duration)),
      el("td", { class: "num" }, `${j.tasks.running} running / ${j.tasks.total}`), el("td", { class: "muted" }, j.jid));
    tr.addEventListener("click", () => { selectedJob = j.jid; refresh(); });
    return tr;
  }));
}

// Columns by depth (sources first), rows in plan order: the JobGraph reads left to right.
function layout(nodes) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const depth = new Map();
  const depthOf = (n) => {
    if (depth.has(n.id)) return depth.get(n.id);
    depth.set(n.id, 0);
    const d = n.inputs.length ? 1 + Math.max(...n.inputs.map((i) => (byId.has(i.id) ? depthOf(byId.get(i.id)) : 0))) : 0;
    depth.set(n.id, d);
    return d;
  };
  const rows = [];
  const pos = new Map();
  for (const n of nodes) {
    const d = depthOf(n);
    rows[d] = (rows[d] || 0);
    pos.set(n.id, { x: PAD + d * (BOX_W + COL_GAP), y: PAD + rows[d] * (BOX_H + ROW_GAP) });
    rows[d] += 1;
  }
  const width = PAD * 2 + rows.length * (BOX_W + COL_GAP) - COL_GAP;
  const height = PAD * 2 + Math.max(1, ...rows) * (BOX_H + ROW_GAP) - ROW_GAP;
  return { pos, width, height };
}

function shorten(text, max) { return text.length > max ? text.slice(0, max - 1) + "…" : text; }

function renderGraph(job, pressure) {
  const svg = document.getElementById("graph");
  const nodes = job.plan.nodes;
  const { pos, width, height } = layout(nodes);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const defs = svgEl("defs");
  const marker = svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5",
    markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.appendChild(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z" }));
  defs.appendChild(marker);
  const parts = [defs];
  for (const n of nodes) {
    for (const input of n.inputs) {
      const from = pos.get(input.id), to = pos.get(n.id);
      if (!from || !to) continue;
      const x1 = from.x + BOX_W, y1 = from.y + BOX_H / 2, x2 = to.x, y2 = to.y + BOX_H / 2;
      const mx = (x1 + x2) / 2;
      parts.push(svgEl("path", { class: "edge", "data-from": input.id, "data-to": n.id,
        d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)" }));
      parts.push(svgEl("text", { class: "edge-label", x: mx, y: (y1 + y2) / 2 - 6, "text-anchor": "middle" },
        input.ship_strategy));
    }
  }
  const vertices = new Map(job.vertices.map((v) => [v.id, v]));
  for (const n of nodes) {
    const v = vertices.get(n.id);
    const bp = pressure.get(n.id) || { level: "ok", ratio: 0 };
    const { x, y } = pos.get(n.id);
    const g = svgEl("g", { class: `vertex bp-${bp.level}`, "data-vertex-id": n.id,
      "data-backpressure": bp.level, transform: `translate(${x},${y})` });
    g.appendChild(svgEl("title", {}, `${n.description}\nstatus ${v ? v.status : "?"}\nback pressure ${(bp.ratio * 100).toFixed(0)}% (${bp.level})`));
    g.appendChild(svgEl("rect", { width: BOX_W, height: BOX_H, rx: 6, ry: 6 }));
    g.appendChild(svgEl("text", { class: "name", x: 10, y: 20 }, shorten(n.description, 30)));
    g.appendChild(svgEl("text", { class: "parallelism", x: 10, y: 39 },
      `parallelism ${n.parallelism} · ${v ? v.status : "?"}`));
    const m = v ? v.metrics : { "read-records": 0, "write-records": 0 };
    g.appendChild(svgEl("text", { class: "records", x: 10, y: 57 },
      `in ${fmtCount(m["read-records"])} · out ${fmtCount(m["write-records"])}`));
    g.appendChild(svgEl("text", { class: "backpressure", x: 10, y: 75 },
      `back pressure ${(bp.ratio * 100).toFixed(0)}% ${bp.level}`));
    parts.push(g);
  }
  svg.replaceChildren(...parts);
}

function renderCheckpoints(cp) {
  const c = cp.counts;
  document.getElementById("checkpoint-counts").textContent =
    `${c.completed} completed · ${c.in_progress} in progress · ${c.failed} failed · ${c.restored} restored`;
  fillRows(document.getElementById("checkpoints"), cp.history.map((h) => {
    const tr = el("tr");
    tr.append(el("td", { class: "num" }, String(h.id)), el("td", { class: `state-${h.status}` }, h.status),
      el("td", {}, h.checkpoint_type.toLowerCase().replace("_", " ")), el("td", {}, fmtTime(h.trigger_timestamp)),
      el("td", { class: "num" }, fmtMs(h.end_to_end_duration)), el("td", { class: "num" }, fmtBytes(h.checkpointed_size)),
      el("td", { class: "num" }, fmtBytes(h.state_size)), el("td", { class: "num" }, fmtMs(h.alignment_duration)),
      el("td", { class: "num" }, fmtBytes(h.persisted_data)));
    if (h.failure_message) tr.title = h.failure_message;
    return tr;
  }));
}

function renderTaskManagers(tms) {
  fillRows(document.getElementById("taskmanagers"), tms.taskmanagers.map((tm) => {
    const tr = el("tr");
    const slots = el("td");
    for (const s of tm.slots) {
      const span = el("span", { class: `slot slot-${s.state}`, title: s.job ? `job ${s.job}` : "free" }, `${s.index}: ${s.state.toLowerCase()}`);
      slots.appendChild(span);
    }
    tr.append(el("td", {}, tm.id), el("td", { class: "num" }, String(tm.slotsNumber)),
      el("td", { class: "num" }, String(tm.freeSlots)), slots, el("td", { class: "num" }, String(tm.tasks)),
      el("td", {}, fmtTime(tm.timeSinceLastHeartbeat)));
    return tr;
  }));
}

async function refreshJob() {
  const section = document.getElementById("job");
  if (selectedJob === null) { section.hidden = true; return; }
  const job = await getJson(`/jobs/${selectedJob}`);
  const pressure = new Map();
  await Promise.all(job.vertices.map(async (v) => {
    try {
      const bp = await getJson(`/jobs/${selectedJob}/vertices/${v.id}/backpressure`);
      pressure.set(v.id, { level: bp["backpressure-level"], ratio: Math.max(0, ...bp.subtasks.map((s) => s.ratio)) });
    } catch (e) { /* the vertex went away with a restart: drawn without a level this time */ }
  }));
  section.hidden = false;
  document.getElementById("job-title").textContent = `${job.name} — ${job.state} — ${fmtMs(job.duration)}`;
  renderGraph(job, pressure);
  try {
    renderCheckpoints(await getJson(`/jobs/${selectedJob}/checkpoints`));
  } catch (e) {
    document.getElementById("checkpoint-counts").textContent = "this job takes no checkpoints";
    fillRows(document.getElementById("checkpoints"), []);
  }
}

async function refresh() {
  try {
    const [overview, jobs, tms] = await Promise.all([getJson("/overview"), getJson("/jobs/overview"), getJson("/taskmanagers")]);
    renderOverview(overview);
    renderJobs(jobs.jobs);
    renderTaskManagers(tms);
    await refreshJob();
    document.getElementById("refreshed").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    document.getElementById("refreshed").textContent = `not reachable: ${e.message}`;
  }
}

async function loop() {
  await refresh();
  setTimeout(loop, REFRESH_MS);
}

loop();
