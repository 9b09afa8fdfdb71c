// Draws every server-built plotly figure on the page: an element with
// data-figure="ID" is drawn from the JSON in <script id="ID">.
// Tables carry the numbers; charts add to them.

import { followZoom } from "./zoom.js";

export function figureData(id) {
  const script = document.getElementById(id);
  return script ? JSON.parse(script.textContent) : null;
}

function overlaps(a, b) {
  return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}

function moved(box, dy) {
  return { left: box.left, right: box.right, top: box.top + dy, bottom: box.bottom + dy };
}

// A label's vertical shift that clears every box it overlaps, going up (or down).
function clearOf(box, taken, up) {
  let dy = 0;
  for (let tries = 0; tries <= taken.length; tries += 1) {
    const hit = taken.filter((other) => overlaps(moved(box, dy), other));
    if (!hit.length) return dy;
    dy = up
      ? Math.min(...hit.map((other) => other.top)) - box.bottom - 2
      : Math.max(...hit.map((other) => other.bottom)) - box.top + 2;
  }
  return dy;
}

// Peak labels (annotations with an arrow) sit above their points, and two points close
// together drew their labels on each other. Each label that overlaps the title, a
// panel title or a label placed before it moves up past them; when that would take it
// above the plot, it goes below its point instead.
export function keepLabelsApart(element) {
  const annotations = element.layout.annotations || [];
  const taken = [];
  const title = element.querySelector(".g-gtitle");
  if (title) taken.push(title.getBoundingClientRect());
  const labels = [];
  annotations.forEach((annotation, index) => {
    const text = element.querySelector(`.annotation[data-index="${index}"] .annotation-text-g`);
    if (!text) return;
    const box = text.getBoundingClientRect();
    if (annotation.showarrow) labels.push({ index, box, ay: annotation.ay ?? -30 });
    else taken.push(box);
  });
  const plotTop = element.getBoundingClientRect().top + element._fullLayout._size.t;
  const update = {};
  for (const label of labels) {
    let dy = clearOf(label.box, taken, true);
    if (label.box.top + dy < plotTop) {
      const flip = -2 * label.ay;
      dy = flip + clearOf(moved(label.box, flip), taken, false);
    }
    taken.push(moved(label.box, dy));
    if (dy) update[`annotations[${label.index}].ay`] = label.ay + dy;
  }
  return Object.keys(update).length ? window.Plotly.relayout(element, update) : null;
}

async function draw(element, figure) {
  await window.Plotly.newPlot(element, figure.data, figure.layout, figure.config);
  followZoom(element, figure);
  await keepLabelsApart(element);
}

// Draws every chart; resolves once each is drawn (a chart that failed is reported).
export async function drawAll(root = document) {
  if (!window.Plotly) return [];
  const drawing = [];
  for (const element of root.querySelectorAll("[data-figure]")) {
    const figure = figureData(element.dataset.figure);
    if (figure) drawing.push(draw(element, figure).then(() => element));
  }
  const settled = await Promise.allSettled(drawing);
  for (const failed of settled.filter((outcome) => outcome.status === "rejected")) {
    console.error("chart not drawn", failed.reason);
  }
  return settled.filter((outcome) => outcome.status === "fulfilled").map((outcome) => outcome.value);
}

async function ready() {
  const drawn = await drawAll();
  document.dispatchEvent(new CustomEvent("benchlab:charts-ready", { detail: drawn }));
  document.documentElement.dataset.chartsReady = "1";
}

// plotly.js is a classic deferred script; modules run after it.
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", ready);
} else {
  ready();
}
