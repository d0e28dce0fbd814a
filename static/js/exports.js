// The list's CSV links follow the filter form as it changes (htmx swaps the table, not the links).
document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-export]");
  if (!link) return;
  const form = document.querySelector("form.filters");
  const params = form ? new URLSearchParams(new FormData(form)) : new URLSearchParams(window.location.search);
  for (const [key, value] of [...params]) if (value === "") params.delete(key, value);
  params.delete("page");
  params.set("export", link.dataset.export);
  link.href = window.location.pathname + "?" + params.toString();
});
