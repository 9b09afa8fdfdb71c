// Zoom at full resolution: the server sends timelines reduced to what a chart
// shows (runs/timelines/downsample.py). When the user zooms into a chart whose element
// has data-zoom="URL", each timeline trace (its meta names the run and the
// stored trace) is fetched again for the visible range at full resolution; zooming
// back out (double-click: autorange) restores the reduced lines.

const RANGE_START = /^xaxis\d*\.range\[0\]$/;
const RANGE = /^xaxis\d*\.range$/;

// The x range a relayout event sets: a drag sends range[0] and range[1], code the pair.
function visibleRange(event) {
  const pair = Object.keys(event).find((key) => RANGE.test(key));
  if (pair) return event[pair];
  const start = Object.keys(event).find((key) => RANGE_START.test(key));
  if (!start) return null;
  return [event[start], event[start.replace("[0]", "[1]")]];
}

function isAutorange(event) {
  return Object.keys(event).some((key) => /^xaxis\d*\.autorange$/.test(key));
}

async function fetchWindow(url, meta, x0, x1) {
  const query = new URLSearchParams({ run: meta.run, trace: meta.trace, x0, x1 });
  const response = await fetch(`${url}?${query}`, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`zoom: ${response.status} for ${meta.trace}`);
  return response.json();
}

export function followZoom(element, figure) {
  const url = element.dataset.zoom;
  const zoomable = figure.data
    .map((trace, index) => ({ meta: trace.meta || {}, index }))
    .filter(({ meta }) => meta.trace && meta.run !== undefined);
  if (!url || !zoomable.length) return;
  // Copies: plotly keeps the figure's trace objects and restyle replaces their arrays.
  const original = zoomable.map(({ index }) => ({
    x: figure.data[index].x.slice(),
    y: figure.data[index].y.slice(),
    // What each sample rests on (logged transactions), where the hover shows it.
    customdata: figure.data[index].customdata?.slice() ?? null,
  }));
  let asked = 0;
  element.on("plotly_relayout", async (event) => {
    const indices = zoomable.map(({ index }) => index);
    if (isAutorange(event)) {
      asked += 1;
      const restored = { x: original.map((t) => t.x), y: original.map((t) => t.y) };
      window.Plotly.restyle(element, { ...restored, customdata: original.map((t) => t.customdata) }, indices);
      return;
    }
    const range = visibleRange(event);
    if (!range) return;
    const mine = ++asked;
    const windows = await Promise.all(zoomable.map(({ meta }) => fetchWindow(url, meta, ...range)));
    if (mine !== asked) return; // a newer zoom is under way
    const zoomed = { x: windows.map((w) => w.x), y: windows.map((w) => w.y) };
    window.Plotly.restyle(element, { ...zoomed, customdata: windows.map((w) => w.counts ?? null) }, indices);
    element.dataset.zoomed = windows.map((w) => w.samples).join(",");
  });
}
