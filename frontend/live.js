// Live run page: follows the run's Server-Sent Events and extends the
// server-built figures in place. Points are laid end to end on one time axis
// with a gap between them, the same rule as runs/charts/timelines.py.

const head = document.getElementById("run-head");
// The run states after which nothing changes (Run.FINAL_STATES).
const FINAL_STATES = ["succeeded", "failed", "cancelled"];

class Timeline {
  // Tracks where the next sample of each trace goes on the shared time axis.
  // Starts where the server-drawn trace ends (its `meta`: last point and t).
  constructor(trace) {
    const xs = trace ? trace.x.filter((x) => x !== null) : [];
    const meta = (trace && trace.meta) || {};
    this.lastX = xs.length ? xs[xs.length - 1] : 0;
    this.currentPoint = meta.last_point ?? null;
    this.offset = this.lastX - (meta.last_t ?? 0);
  }

  // x positions for one sample: [gapX?, x]; a new point starts at the last x.
  // The stream sends every stored sample once, after those the page was built with.
  place(point, t) {
    const xs = [];
    if (point !== this.currentPoint) {
      if (this.currentPoint !== null) xs.push(this.lastX);
      this.offset = this.lastX;
      this.currentPoint = point;
    }
    this.lastX = this.offset + t;
    xs.push(this.lastX);
    return xs;
  }
}

// A chart's line for one of the run's traces, found by the name the server gave it (its
// `meta.trace`, runs/charts/timelines.py), not by its position; -1 when not drawn.
function traceIndex(element, name) {
  return (element.data || []).findIndex((trace) => trace.meta?.trace === name);
}

function trace(element, name) {
  return element.data?.[traceIndex(element, name)];
}

// `valuesByTrace`: the sample's value for each trace it extends (a trace the chart
// does not draw is left out). `count`: what the sample rests on (logged transactions),
// for traces whose hover shows it.
function extend(element, timeline, point, t, valuesByTrace, count = null) {
  const xs = timeline.place(point, t);
  if (!element.data) return;
  const drawn = Object.entries(valuesByTrace)
    .map(([name, value]) => [traceIndex(element, name), value])
    .filter(([index]) => index >= 0);
  if (!drawn.length) return;
  const gap = xs.length === 2;
  const indices = drawn.map(([index]) => index);
  const x = drawn.map(() => (gap ? [xs[0], xs[1]] : [xs[0]]));
  const y = drawn.map(([, value]) => (gap ? [null, value] : [value]));
  const update = { x, y };
  if (indices.every((i) => Array.isArray(element.data[i].customdata))) {
    update.customdata = drawn.map(() => (gap ? [null, count] : [count]));
  }
  window.Plotly.extendTraces(element, update, indices);
}

// A server sample: its buffer rates and wait-event types extend the server chart's traces
// by name (a wait-event type seen for the first time gets its own stacked trace, and a
// drawn type the sample lacks counts 0), and the checkpoints it starts or ends become
// markers (triangle up: start, down: end) in their cause's colour.
function extendServer(element, timeline, d) {
  if (!element.data) {
    timeline.place(d.point, d.t);
    return;
  }
  const values = { ...d.values };
  element.data.forEach((drawnTrace) => {
    const name = drawnTrace.meta?.trace;
    if (name?.startsWith("wait.") && !(name in values)) values[name] = 0;
  });
  const added = Object.keys(values).filter(
    (name) => name.startsWith("wait.") && traceIndex(element, name) < 0,
  );
  if (added.length) window.Plotly.addTraces(element, added.map(waitTrace));
  extend(element, timeline, d.point, d.t, values);
  const markers = traceIndex(element, "checkpoints");
  if (!d.checkpoints.length || markers < 0) return;
  const colors = element.data[markers].meta.colors || {};
  const x = d.checkpoints.map(() => timeline.lastX);
  const update = {
    x: [x],
    y: [x.map(() => 0)],
    text: [d.checkpoints.map((c) => `${c.kind} checkpoint ${c.edge}`)],
    "marker.symbol": [d.checkpoints.map((c) => (c.edge === "start" ? "triangle-up" : "triangle-down"))],
    "marker.color": [d.checkpoints.map((c) => colors[c.kind])],
  };
  window.Plotly.extendTraces(element, update, [markers]);
  if (!element.data[markers].showlegend) window.Plotly.restyle(element, { showlegend: true }, [markers]);
}

// A wait-event type's stacked line, drawn as the server figure draws it (runs/charts/timelines.py).
function waitTrace(name) {
  return {
    type: "scatter",
    x: [],
    y: [],
    name: name.slice("wait.".length),
    mode: "lines",
    stackgroup: "waits",
    line: { width: 0.5 },
    xaxis: "x2",
    yaxis: "y2",
    connectgaps: false,
    meta: { trace: name },
  };
}

function setStatus(data) {
  const badge = head.querySelector("[data-status]");
  badge.textContent = data.status;
  badge.className = `badge ${data.status}`;
  document.getElementById("run-step").textContent = data.step ? `Step: ${data.step}` : "";
  // A final run cannot be cancelled: its button goes as soon as the stream says so.
  if (FINAL_STATES.includes(data.status)) document.getElementById("run-cancel")?.remove();
}

function addResultRow(data) {
  const body = document.querySelector("#results-table tbody");
  const template = document.createElement("template");
  template.innerHTML = data.html.trim();
  body.appendChild(template.content.firstElementChild);
  document.getElementById("results-empty")?.remove();
  document.getElementById("points-done").textContent = body.rows.length;
}

function follow() {
  const charts = {
    tps: document.getElementById("chart-tps"),
    latency: document.getElementById("chart-latency"),
    host: document.getElementById("chart-host"),
    server: document.getElementById("chart-server"),
  };
  const progressLine = new Timeline(trace(charts.tps, "tps"));
  const latencyLine = new Timeline(trace(charts.latency, "latency_ms"));
  const hostLine = new Timeline(trace(charts.host, "host.cpu_user"));
  const hostKeys = ["cpu_user", "cpu_system", "cpu_iowait", "disk_data_util", "disk_wal_util"];
  // A run with a client host: its CPU user and system traces follow the host's.
  const clientLine = new Timeline(trace(charts.host, "client.cpu_user"));
  const serverLine = new Timeline(trace(charts.server, "server.buffers_checkpoint_per_s"));
  const url = `${head.dataset.eventsUrl}?after=${encodeURIComponent(head.dataset.cursor)}`;
  const source = new EventSource(url);

  source.addEventListener("progress", (event) => {
    const d = JSON.parse(event.data);
    extend(charts.tps, progressLine, d.point, d.t, { tps: d.tps }, d.sampled);
    // The latency chart's percentile lines, when it has them, follow the average.
    const latency = { latency_ms: d.latency_ms, p50_ms: d.p50_ms, p95_ms: d.p95_ms, p99_ms: d.p99_ms };
    extend(charts.latency, latencyLine, d.point, d.t, latency, d.sampled);
    document.querySelector(".chart-empty")?.remove();
  });
  source.addEventListener("host", (event) => {
    const d = JSON.parse(event.data);
    const values = Object.fromEntries(hostKeys.map((key) => [`host.${key}`, d[key]]));
    extend(charts.host, hostLine, d.point, d.t, values);
  });
  source.addEventListener("client_host", (event) => {
    const d = JSON.parse(event.data);
    const values = { "client.cpu_user": d.cpu_user, "client.cpu_system": d.cpu_system };
    extend(charts.host, clientLine, d.point, d.t, values);
  });
  source.addEventListener("server", (event) => {
    extendServer(charts.server, serverLine, JSON.parse(event.data));
    document.getElementById("server-empty")?.remove();
  });
  source.addEventListener("result", (event) => addResultRow(JSON.parse(event.data)));
  source.addEventListener("status", (event) => setStatus(JSON.parse(event.data)));
  source.addEventListener("end", () => {
    source.close();
    document.getElementById("live-badge")?.remove();
    // The finished page has the snapshot (settings, facts, commands): show it.
    window.setTimeout(() => window.location.reload(), 800);
  });
  window.benchlabLive = source;
}

if (head && head.hasAttribute("data-live")) {
  if (document.documentElement.dataset.chartsReady) follow();
  else document.addEventListener("benchlab:charts-ready", follow, { once: true });
}
