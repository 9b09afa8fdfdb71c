// Draws every server-built plotly figure on the page: an element with
// data-figure="ID" is drawn from the JSON in <script id="ID">.
// Tables carry the numbers; charts add to them.

import { followZoom } from "./zoom.js";

export function figureData(id) {
  const script = document.getElementById(id);
  return script ? JSON.parse(script.textContent) : null;
}

export function drawAll(root = document) {
  if (!window.Plotly) return [];
  const drawn = [];
  for (const element of root.querySelectorAll("[data-figure]")) {
    const figure = figureData(element.dataset.figure);
    if (!figure) continue;
    window.Plotly.newPlot(element, figure.data, figure.layout, figure.config);
    followZoom(element, figure);
    drawn.push(element);
  }
  return drawn;
}

function ready() {
  const drawn = drawAll();
  document.dispatchEvent(new CustomEvent("benchlab:charts-ready", { detail: drawn }));
  document.documentElement.dataset.chartsReady = "1";
}

// plotly.js is a classic deferred script; modules run after it.
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", ready);
} else {
  ready();
}
