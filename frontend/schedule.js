// Live estimate on the schedule form: runs, points and a rough wall-clock time,
// with the same rule as runs.services.experiments.experiment_estimate
// (hosts work in parallel; each runs its runs one after another).

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
  const runs = hosts * perHostCells * workloads.length;
  const points = clientCounts() * (Number(form.elements.repeats.value) || 0);
  const duration = Number(form.elements.duration_s.value) || 0;
  const warmup = Number(form.elements.warmup_s.value) || 0;
  const overhead = Number(form.dataset.runOverhead);
  const loadPerScale = Number(form.dataset.scaleLoad);
  const perHost = workloads.reduce(
    (sum, w) => sum + perHostCells * (overhead + Number(w.dataset.scale || 1) * loadPerScale + warmup + points * duration),
    0,
  );
  return { runs, points: runs * points, seconds: duration && runs ? perHost : null };
}

function show() {
  const result = estimate();
  const field = (key) => form.querySelector(`[data-estimate="${key}"]`);
  field("runs").textContent = result.runs.toLocaleString();
  field("points").textContent = result.points.toLocaleString();
  field("time").textContent = result.seconds === null ? (result.runs ? "depends on tps" : "—") : `≈ ${formatSeconds(result.seconds)}`;
}

if (form) {
  form.addEventListener("input", show);
  form.addEventListener("change", show);
  show();
}
