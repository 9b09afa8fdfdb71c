// A capacity search's panel while the search runs: reload the page every
// data-reload-s seconds, so each probe appears (with the curve) as it ends.
const panel = document.querySelector("#capacity[data-reload-s]");
if (panel) {
  const seconds = Number(panel.dataset.reloadS) || 10;
  window.setTimeout(() => window.location.reload(), seconds * 1000);
}
