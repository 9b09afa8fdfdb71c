// A <select data-autosubmit> submits its form when changed (filters, metric).
// Kept out of the pages' markup: the Content-Security-Policy allows no inline script.

for (const select of document.querySelectorAll("select[data-autosubmit]")) {
  select.addEventListener("change", () => select.form.submit());
}
