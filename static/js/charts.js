// Draws the plotly charts whose data the page embeds with json_script. A chart is an element with
// data-chart-source (the id of its json_script) and data-chart-series ([[key, name, colour], ...]):
// no inline script calls this, so the Content-Security-Policy can forbid inline scripts.
function karpwebChart(elementId, dataId, series) {
  const data = JSON.parse(document.getElementById(dataId).textContent);
  const traces = series.map(([key, name, color]) => ({
    // Parts of a whole stack (used + idle = total); levels of one quantity (data.stacked false) do not.
    x: data.x, y: data[key], name: name, type: "scatter", mode: "lines", stackgroup: data.stacked === false ? undefined : "one",
    line: { color: color, width: 1 },
  }));
  Plotly.newPlot(elementId, traces, {
    margin: { t: 10, r: 10, b: 40, l: 40 }, legend: { orientation: "h" }, yaxis: { rangemode: "tozero" },
    // Times as every page writes them (the data are UTC): "2026-11-26 08:00".
    xaxis: { tickformat: "%Y-%m-%d %H:%M", hoverformat: "%Y-%m-%d %H:%M UTC" },
  }, { displayModeBar: false, responsive: true });
}

document.addEventListener("DOMContentLoaded", () => {
  for (const element of document.querySelectorAll("[data-chart-source]")) {
    karpwebChart(element.id, element.dataset.chartSource, JSON.parse(element.dataset.chartSeries));
  }
});
