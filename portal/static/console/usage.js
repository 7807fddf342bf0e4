// The usage section's chart of rows per day, drawn by Chart.js (vendored, static/vendor/chartjs) from
// the page's own table of the same numbers. A file of its own, not an inline script: the
// Content-Security-Policy allows only our own script files.
"use strict";

(function () {
  const BLUE = "#2b59c3";
  const RED = "#c0392b";

  function start() {
    const canvas = document.getElementById("chart-days");
    const rows = document.querySelectorAll("#table-days tbody tr");
    if (!canvas || !window.Chart) {
      return;
    }
    const days = Array.from(rows, (row) => row.dataset);
    new window.Chart(canvas, {
      type: "bar",
      data: {
        // "2025-11-29" as "11-29": a long range still fits under a phone's chart.
        labels: days.map((d) => d.day.slice(5)),
        datasets: [
          { label: "Rows", data: days.map((d) => Number(d.events)), backgroundColor: BLUE },
          { label: "Failed or refused", data: days.map((d) => Number(d.failed)), backgroundColor: RED },
        ],
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        scales: { y: { beginAtZero: true, ticks: { precision: 0 } } },
      },
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
