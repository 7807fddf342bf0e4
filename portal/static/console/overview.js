// The console overview's charts, drawn by Chart.js (vendored, static/vendor/chartjs) from the page's
// overview.json. A file of its own, not an inline script: the Content-Security-Policy allows only
// our own script files. The tables in the page carry the same numbers for people who read them.
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
    draw("chart-tools", {
      type: "bar",
      data: {
        labels: data.tools.map((t) => t.name),
        datasets: [
          { label: "Calls", data: data.tools.map((t) => t.calls), backgroundColor: BLUE },
          { label: "Errors", data: data.tools.map((t) => t.errors), backgroundColor: RED },
        ],
      },
      options: { indexAxis: "y", scales: { x: { beginAtZero: true, ticks: { precision: 0 } } } },
    });
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
    const root = document.getElementById("overview-charts");
    if (!root || !window.Chart) {
      return;
    }
    fetch(root.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((response) => {
        if (!response.ok) {
          // Refusals are JSON too ({"error": ...}); anything else says its status.
          return response
            .json()
            .catch(() => ({}))
            .then((body) => {
              throw new Error(body.error || "overview.json answered " + response.status);
            });
        }
        return response.json();
      })
      .then(render)
      .catch((error) => {
        // The tables still say everything; say why the charts are missing.
        root.dataset.failed = String(error);
        const note = document.createElement("p");
        note.className = "muted";
        note.setAttribute("role", "status");
        note.textContent = "The charts could not be drawn (" + error.message + "); the tables below hold every number.";
        root.prepend(note);
      });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
