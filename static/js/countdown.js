// Ticks the capacity-block countdowns every second in the browser; the server re-renders the table
// every 15 s (states, nodes). The wording matches the `countdown` template filter
// (reservations/templatetags/karpweb.py); the server's clock is the reference (data-now).
(function () {
  function span(seconds) {
    seconds = Math.floor(Math.abs(seconds));
    const days = Math.floor(seconds / 86400), hours = Math.floor((seconds % 86400) / 3600);
    const minutes = Math.floor((seconds % 3600) / 60), secs = seconds % 60;
    const two = (n) => String(n).padStart(2, "0");
    if (days) return `${days}d ${hours}h ${two(minutes)}m`;
    if (hours) return `${hours}h ${two(minutes)}m ${two(secs)}s`;
    return `${minutes}m ${two(secs)}s`;
  }

  let skew = 0; // server time minus browser time, in ms

  function tick() {
    const now = Date.now() + skew;
    document.querySelectorAll("[data-countdown-at]").forEach((el) => {
      const delta = (Date.parse(el.dataset.countdownAt) - now) / 1000;
      el.textContent = delta >= 0 ? `in ${span(delta)}` : `${span(delta)} ago`;
    });
  }

  function sync() {
    const table = document.querySelector("[data-server-now]");
    if (table) skew = Date.parse(table.dataset.serverNow) - Date.now();
  }

  document.addEventListener("DOMContentLoaded", () => { sync(); setInterval(tick, 1000); });
  document.addEventListener("htmx:afterSwap", sync);
})();
