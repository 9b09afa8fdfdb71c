// Live estimate on the schedule form: runs, points, cluster setups and a rough
// wall-clock time, asked of the server as the form changes, so there is one rule
// (runs.services.experiments.draft_estimate, the one a saved experiment's estimate
// follows). While an answer is awaited the estimate is aria-busy.

const form = document.getElementById("schedule-form");
const estimate = document.getElementById("estimate");
// After the last keystroke or tick: typing a number asks once, not once per digit.
const DEBOUNCE_MS = 250;

function formatSeconds(total) {
  const s = Math.round(total);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h) return `${h} h ${String(m).padStart(2, "0")} min`;
  if (m) return `${m} min ${String(s % 60).padStart(2, "0")} s`;
  return `${s} s`;
}

function query() {
  const values = new FormData(form);
  values.delete("csrfmiddlewaretoken");
  return new URLSearchParams(values).toString();
}

// The server's estimate, or null while the form does not make an experiment (the
// answer's `errors` say why; the form shows them when it is sent).
async function fetchEstimate() {
  try {
    const response = await fetch(`${form.dataset.estimateUrl}?${query()}`, {
      headers: { Accept: "application/json" },
    });
    return response.ok ? await response.json() : null;
  } catch (error) {
    console.error("estimate not available", error);
    return null;
  }
}

function show(result) {
  const field = (key) => estimate.querySelector(`[data-estimate="${key}"]`);
  const seconds = (value) => (value === null ? "—" : `≈ ${formatSeconds(value)}`);
  field("runs").textContent = result ? result.runs.toLocaleString() : "—";
  field("points").textContent = result ? result.points.toLocaleString() : "—";
  const builds = {
    learned: (value) => `, of which ${seconds(value)} compiling source builds`,
    guessed: (value) => `, of which ${seconds(value)} compiling source builds (guessed: no build on the host yet)`,
  };
  field("setups").textContent = result
    ? seconds(result.setup_seconds) + (builds[result.build_times]?.(result.build_seconds) || "")
    : "—";
  const learned = [];
  if (result && result.window_spread_pct !== null) {
    learned.push(`its windows at one rate spread ${Math.round(result.window_spread_pct)} %`);
  }
  if (result && result.probes_beyond_schedule) {
    const more = result.probes_beyond_schedule;
    learned.push(`a search took ${more} probe${more === 1 ? "" : "s"} more than on a steady host`);
  }
  const spread = learned.length
    ? `: in the host's latest searches with probes as long ${learned.join(" and ")}`
    : "";
  const probes = result && result.capacity_probes !== null
    ? ` (about ${result.capacity_probes} probes${spread})`
    : "";
  const most = result && result.max_seconds !== null
    ? `; in all ${seconds(result.expected_seconds)}${probes}, at most ${seconds(result.max_seconds)}`
    : "";
  const rates = {
    learned: " (learned tps)",
    borrowed: " (tps borrowed: the same scripts at another scale or client count)",
    guessed: " (tps guessed: not measured on the host yet)",
  };
  field("time").textContent = result && result.estimated_seconds !== null
    ? seconds(result.estimated_seconds) + (rates[result.transaction_rates] || "") + most
    : "—";
}

let timer = null;
// Counts the form's changes: an answer is shown (and the estimate no longer busy) only
// when no change came after the one it answers, even one whose request is not sent yet.
let latestChange = 0;

function changed() {
  const change = ++latestChange;
  estimate.setAttribute("aria-busy", "true");
  window.clearTimeout(timer);
  timer = window.setTimeout(async () => {
    const result = await fetchEstimate();
    if (change !== latestChange) return;
    show(result);
    estimate.setAttribute("aria-busy", "false");
  }, DEBOUNCE_MS);
}

if (form && estimate) {
  form.addEventListener("input", changed);
  form.addEventListener("change", changed);
  changed();
}
