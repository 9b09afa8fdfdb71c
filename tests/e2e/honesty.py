"""What every page a browser walk visits must hold, read from what Chromium drew: no
interval below zero (error bars and the tables' `low – high`), no bar on a log axis nor
one not starting at zero, distinct legend entries and no label on another (nor outside
its chart) on every chart, and no request to another host."""

from urllib.parse import urlsplit

# Pairs of a chart's annotations (and its title) whose boxes overlap on screen, and
# annotations drawn outside the chart.
OVERLAPS_JS = """(el) => {
  const chart = el.getBoundingClientRect();
  const boxes = [...el.querySelectorAll('.g-gtitle, .annotation .annotation-text-g')]
    .map(n => [n.textContent, n.getBoundingClientRect()]);
  const hit = (a, b) => a.left < b.right && b.left < a.right
    && a.top < b.bottom && b.top < a.bottom;
  const inside = (a) => a.left >= chart.left && a.right <= chart.right
    && a.top >= chart.top && a.bottom <= chart.bottom;
  const pairs = boxes.filter(([_t, a]) => !inside(a)).map(([t]) => [t, "outside"]);
  boxes.forEach(([t, a], i) => boxes.slice(i + 1).forEach(([u, b]) => {
    if (hit(a, b)) pairs.push([t, u]);
  }));
  return pairs;
}"""

# Per chart on the page: its error bars reaching below zero, bars on a log axis or on an
# axis not starting at zero, legend entries drawn twice, and overlapping labels.
CHART_PROBLEMS_JS = (
    """() => {
  const overlaps = """
    + OVERLAPS_JS
    + """;
  const problems = [];
  document.querySelectorAll('[data-figure]').forEach((el) => {
    if (!el._fullData) return;
    const name = el.dataset.figure;
    el._fullData.forEach((t) => {
      const e = t.error_y;
      if (e && e.visible && Array.isArray(t.y)) {
        const minus = e.symmetric === false ? e.arrayminus : e.array;
        t.y.forEach((y, i) => {
          if (typeof y === 'number' && minus && y - (minus[i] || 0) < -1e-9) {
            problems.push(`${name}: ${t.name} interval below zero (${y} - ${minus[i]})`);
          }
        });
      }
      if (t.type === 'bar') {
        const letter = t.orientation === 'h' ? 'x' : 'y';
        const axis = el._fullLayout[`${letter}axis${(t[`${letter}axis`] || letter).slice(1)}`];
        if (axis.type === 'log') problems.push(`${name}: bar ${t.name} on a log axis`);
        else if (axis.range[0] > 1e-9) problems.push(`${name}: bar ${t.name} not from zero`);
      }
    });
    const legend = [...el.querySelectorAll('.legend .traces .legendtext')]
      .map((n) => n.textContent);
    if (new Set(legend).size !== legend.length) problems.push(`${name}: legend ${legend}`);
    overlaps(el).forEach(([a, b]) => problems.push(`${name}: label ${a} on ${b}`));
  });
  return problems;
}"""
)

# A table's interval whose low end is negative: `-480.8 – 3,279.4`.
NEGATIVE_INTERVALS_JS = """() => [...document.querySelectorAll('td, th')]
  .map((cell) => cell.textContent.replace(/\\s+/g, ' ').trim())
  .filter((text) => /(^|[^\\d.,])[-\u2212][\\d.,]+ \u2013 /.test(text))"""


def chart_problems(page) -> list[str]:
    """What a chart of this page draws that exaggerates or misleads (none: [])."""
    return page.evaluate(CHART_PROBLEMS_JS)


def overlapping_labels(page, figure_id: str) -> list[list[str]]:
    """Pairs of one chart's labels that overlap, and labels drawn outside it."""
    return page.evaluate(
        f'(id) => ({OVERLAPS_JS})(document.querySelector(`[data-figure="${{id}}"]`))',
        figure_id,
    )


def negative_intervals(page) -> list[str]:
    """Table cells showing an interval that goes below zero."""
    return page.evaluate(NEGATIVE_INTERVALS_JS)


def assert_honest(page) -> None:
    """No chart nor table of this page shows an interval below zero or a misleading bar."""
    assert chart_problems(page) == []
    assert negative_intervals(page) == []


def watch_other_hosts(page, lab_url: str) -> list[str]:
    """A list that collects every http(s) request the page makes to a host not the lab's."""
    lab_host = urlsplit(lab_url).netloc
    elsewhere: list[str] = []

    def seen(request) -> None:
        url = urlsplit(request.url)
        if url.scheme in ("http", "https") and url.netloc != lab_host:
            elsewhere.append(request.url)

    page.on("request", seen)
    return elsewhere
