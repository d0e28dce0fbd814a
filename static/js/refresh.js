// A page that refreshes itself (an element with data-refresh="<seconds>"): every so often, and on
// "refresh now", its target is loaded again through htmx with the page's own query (the filters,
// the page, the sort: the address htmx keeps as filters change), the window's and the table box's
// scroll are put back, and "last refreshed" says when. A hidden tab is not refreshed.
(() => {
  const control = document.querySelector("[data-refresh]");
  if (!control || !window.htmx) return;
  const target = document.querySelector(control.dataset.refreshTarget);
  const stamp = control.querySelector("time");
  const pad = (n) => String(n).padStart(2, "0");
  // As every page writes a time (2026-11-26 08:49 UTC); the seconds are in the title and `datetime`.
  const minute = (d) => `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
  let busy = false;

  function scrolled() {
    return [...target.querySelectorAll("*")].map((el, index) => [index, el.scrollLeft, el.scrollTop])
      .filter(([, left, top]) => left || top);
  }

  function refresh() {
    if (busy || document.hidden || !target) return;
    busy = true;
    const page = [window.scrollX, window.scrollY];
    const inside = scrolled();
    htmx.ajax("GET", control.dataset.refreshUrl + window.location.search, {target, swap: "innerHTML"})
      .then(() => {
        const elements = target.querySelectorAll("*");
        for (const [index, left, top] of inside) {
          if (elements[index]) { elements[index].scrollLeft = left; elements[index].scrollTop = top; }
        }
        window.scrollTo(page[0], page[1]);
        const now = new Date();
        stamp.textContent = `${minute(now)} UTC`;
        stamp.title = `${minute(now)}:${pad(now.getUTCSeconds())} UTC`;
        stamp.dateTime = now.toISOString();
      })
      .finally(() => { busy = false; });
  }

  setInterval(refresh, Number(control.dataset.refresh) * 1000);
  const now = control.querySelector("[data-refresh-now]");
  if (now) now.addEventListener("click", refresh);
})();
