// The operators' dashboard's charts at the top of the admin's index, drawn by Chart.js (vendored,
// static/vendor/chartjs) from /admin/dashboard.json. A file of its own, not an inline script: the
// Content-Security-Policy allows only our own script files. The tables beside the charts carry the
// same numbers, rendered by the server, for people who read them and for when this does not run.
"use strict";

(function () {
  const BLUE = "#2b59c3";
  const RED = "#c0392b";
  const GREEN = "#1e8449";
  const GREY = "#8a94a6";

  function draw(id, config) {
    const canvas = document.getElementById(id);
    if (!canvas) {
      return null;
    }
    config.options = Object.assign(
      { responsive: true, maintainAspectRatio: false, animation: false },
      config.options || {}
    );
    return new window.Chart(canvas, config);
  }

  function label(day) {
    // "2025-11-29" as "11-29": thirty of them fit under a phone's chart.
    return day.slice(5);
  }

  function counts(items, name) {
    return {
      type: "bar",
      data: {
        labels: items.map(name),
        datasets: [
          { label: "Calls", data: items.map((i) => i.calls), backgroundColor: BLUE },
          { label: "Errors", data: items.map((i) => i.errors), backgroundColor: RED },
        ],
      },
      options: { indexAxis: "y", scales: { x: { beginAtZero: true, ticks: { precision: 0 } } } },
    };
  }

  function render(data) {
    const days = data.days.map((d) => label(d.day));
    draw("chart-calls", {
      type: "bar",
      data: {
        labels: days,
        datasets: [
          { label: "Calls", data: data.days.map((d) => d.calls), backgroundColor: BLUE },
          { label: "Errors", data: data.days.map((d) => d.errors), backgroundColor: RED },
        ],
      },
      options: { scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
    });
    draw("chart-latency", {
      type: "line",
      data: {
        labels: days,
        datasets: [
          { label: "p50 ms", data: data.days.map((d) => d.p50Ms), borderColor: BLUE, spanGaps: true },
          { label: "p95 ms", data: data.days.map((d) => d.p95Ms), borderColor: GREY, spanGaps: true },
        ],
      },
      options: { scales: { y: { beginAtZero: true, title: { display: true, text: "ms" } } } },
    });
    draw("chart-tools", counts(data.tools, (t) => t.name));
    draw("chart-tenants", counts(data.tenants, (t) => t.slug));
    draw("chart-models", {
      type: "bar",
      data: {
        labels: days,
        datasets: [
          { label: "Tokens", data: data.days.map((d) => d.tokens), backgroundColor: GREEN, yAxisID: "y" },
          {
            label: "Cost (USD)",
            type: "line",
            data: data.days.map((d) => d.cost),
            borderColor: GREY,
            yAxisID: "cost",
          },
        ],
      },
      options: {
        scales: {
          y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "tokens" } },
          cost: { beginAtZero: true, position: "right", grid: { drawOnChartArea: false }, title: { display: true, text: "USD" } },
        },
      },
    });
  }

  function start() {
    const root = document.getElementById("operator-dashboard");
    if (!root || !window.Chart) {
      return;
    }
    fetch(root.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((response) => {
        if (!response.ok) {
          throw new Error("dashboard.json answered " + response.status);
        }
        return response.json();
      })
      .then(render)
      .catch((error) => {
        // The tables still say everything; say why the charts are missing.
        root.dataset.failed = String(error);
      });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
