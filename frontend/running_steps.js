// What an experiment's running runs are doing, live: a source build's progress (configure,
// make's files compiled), pgbench -i's, the point measured. Each [data-running-steps] list
// asks its experiment's progress/ API every 2 s and shows the steps its agents last
// reported; once nothing is queued or running it reloads the page, which then shows how
// the runs (or the bisection's step) ended.
const POLL_MS = 2000;
const RETRY_MS = 10000;

function item(run) {
  const li = document.createElement("li");
  const round = run.round ? ` (round ${run.round})` : "";
  li.textContent = `run #${run.id}${round}, ${run.build}: ${run.step || "starting"}`;
  return li;
}

async function poll(list) {
  let progress;
  try {
    const answer = await fetch(list.dataset.runningSteps, { headers: { Accept: "application/json" } });
    if (!answer.ok) throw new Error(`progress answered ${answer.status}`);
    progress = await answer.json();
  } catch {
    window.setTimeout(() => poll(list), RETRY_MS);
    return;
  }
  list.replaceChildren(...progress.running.map(item));
  if (progress.runs.queued + progress.runs.running === 0) {
    window.setTimeout(() => window.location.reload(), POLL_MS);
    return;
  }
  window.setTimeout(() => poll(list), POLL_MS);
}

document.querySelectorAll("[data-running-steps]").forEach((list) => poll(list));
