// Live estimate on the schedule form: runs, points, cluster setups and a rough
// wall-clock time, with the same rule as runs.services.experiments.experiment_estimate
// (hosts work in parallel; each runs its runs one after another; every run is
// one cluster setup, and in rounds every repeat of a cell is its own run; a
// client host is busy for every run of every server host).

const form = document.getElementById("schedule-form");

function checked(name) {
  return [...form.querySelectorAll(`input[name="${name}"]:checked`)];
}

function clientCounts() {
  const text = form.elements.clients.value;
  const parts = text.split(/[\s,;]+/).filter(Boolean);
  return parts.every((p) => /^\d+$/.test(p) && Number(p) > 0) ? parts.length : 0;
}

function storageLayouts() {
  return form.elements.storage.value.split(/[\s,;]+/).filter(Boolean).length;
}

function formatSeconds(total) {
  const s = Math.round(total);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h) return `${h} h ${String(m).padStart(2, "0")} min`;
  if (m) return `${m} min ${String(s % 60).padStart(2, "0")} s`;
  return `${s} s`;
}

export function estimate() {
  const hosts = checked("hosts").length;
  const perHostCells = checked("builds").length * checked("config_profiles").length * storageLayouts();
  const workloads = checked("workloads");
  const repeats = Number(form.elements.repeats.value) || 0;
  const rounds = form.elements.execution.value === "rounds";
  const lifecycles = rounds ? repeats : 1;
  const runs = hosts * perHostCells * workloads.length * lifecycles;
  const pointsPerRun = clientCounts() * (rounds ? 1 : repeats);
  const duration = Number(form.elements.duration_s.value) || 0;
  const warmup = Number(form.elements.warmup_s.value) || 0;
  const overhead = Number(form.dataset.runOverhead);
  const loadPerScale = Number(form.dataset.scaleLoad);
  const setupOf = (w) => overhead + Number(w.dataset.scale || 1) * loadPerScale;
  const perHostSetups = workloads.reduce((sum, w) => sum + perHostCells * lifecycles * setupOf(w), 0);
  const perRunMeasured = warmup + pointsPerRun * duration;
  const perHost = perHostSetups + perHostCells * workloads.length * lifecycles * perRunMeasured;
  const busiest = form.elements.client_host && form.elements.client_host.value ? hosts : 1;
  const timed = duration && runs;
  return {
    runs,
    points: runs * pointsPerRun,
    setupSeconds: timed ? busiest * perHostSetups : null,
    seconds: timed ? busiest * perHost : null,
  };
}

function show() {
  const result = estimate();
  const field = (key) => form.querySelector(`[data-estimate="${key}"]`);
  field("runs").textContent = result.runs.toLocaleString();
  field("points").textContent = result.points.toLocaleString();
  field("setups").textContent = result.setupSeconds === null ? "—" : `≈ ${formatSeconds(result.setupSeconds)}`;
  field("time").textContent = result.seconds === null ? (result.runs ? "depends on tps" : "—") : `≈ ${formatSeconds(result.seconds)}`;
}

if (form) {
  form.addEventListener("input", show);
  form.addEventListener("change", show);
  show();
}
