// The schedule form's "Rounds an effect needs": for each chosen host, the rounds the
// effect asks for in each design, as the lab computes them from the host's measured
// spread (GET /hosts/<id>/rounds-needed?effect_pct=).

const panel = document.getElementById("rounds-needed");
const form = document.getElementById("schedule-form");
const DESIGNS = ["unpaired", "paired", "duet"];

function duration(seconds) {
  const minutes = Math.round(seconds / 60);
  if (minutes >= 60) return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
  return minutes ? `${minutes} min` : `${Math.round(seconds)} s`;
}

function cell(text, title) {
  const td = document.createElement("td");
  td.textContent = text;
  if (title) td.title = title;
  return td;
}

function designText(design, answer) {
  if (!design.measured) return "—";
  if (design.rounds === null) return `more than ${answer.max_rounds}`;
  const time = design.seconds === null ? "" : ` ≈ ${duration(design.seconds)}`;
  return `${design.rounds}${time}`;
}

function row(name, answer) {
  const tr = document.createElement("tr");
  tr.dataset.roundsHost = name;
  tr.append(cell(name));
  if (!answer.spread && !answer.duet_spread) {
    const none = cell("no experiment in rounds on this host yet: nothing measured to size from");
    none.colSpan = 4;
    none.className = "muted";
    tr.append(none);
    return tr;
  }
  for (const name of DESIGNS) {
    const design = answer.designs.find((found) => found.design === name);
    const td = cell(designText(design, answer), design.note || "");
    td.className = "num";
    td.dataset.design = name;
    tr.append(td);
  }
  const spreads = [];
  if (answer.spread) {
    const spread = answer.spread;
    spreads.push(`${spread.paired_sd_pct} % paired, ${spread.unpaired_sd_pct} % unpaired ${rounds(spread)}`);
  }
  if (answer.duet_spread) spreads.push(`${answer.duet_spread.paired_sd_pct} % duet ${rounds(answer.duet_spread)}`);
  tr.append(cell(spreads.join("; ")));
  return tr;
}

function rounds(spread) {
  return `(${spread.pairs} rounds of ${spread.experiments} experiment${spread.experiments === 1 ? "" : "s"})`;
}

let asked = 0;

async function show() {
  const rows = panel.querySelector("[data-rounds=rows]");
  const hosts = [...form.querySelectorAll("input[name=hosts]:checked")];
  const effect = panel.querySelector("#rounds-effect").value;
  const ask = (asked += 1);
  if (!hosts.length) {
    const none = cell("Choose a host.");
    none.colSpan = 5;
    none.className = "muted";
    const tr = document.createElement("tr");
    tr.append(none);
    rows.replaceChildren(tr);
    return;
  }
  const answers = await Promise.all(
    hosts.map(async (host) => {
      const url = panel.dataset.url.replace("/0/", `/${host.value}/`);
      const response = await fetch(`${url}?effect_pct=${encodeURIComponent(effect)}`);
      return [host.dataset.host, response.ok ? await response.json() : { spread: null }];
    }),
  );
  if (ask === asked) rows.replaceChildren(...answers.map(([name, answer]) => row(name, answer)));
}

if (panel && form) {
  form.addEventListener("change", (event) => {
    if (event.target.name === "hosts") show();
  });
  panel.querySelector("#rounds-effect").addEventListener("input", show);
  show();
}
