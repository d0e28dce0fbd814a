"""The list-page pattern both apps use: a FilterSet, a django-tables2 table, htmx partial rendering."""

from django.conf import settings
from django.http import HttpResponseBadRequest
from django.utils import timezone
from django.views.generic import TemplateView
from django_tables2 import RequestConfig

from karpweb.csvexport import CsvExport, streamed_csv
from karpweb.roles import ViewerRequiredMixin

PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000  # the API's limit too (scheduling/api/pagination.py)


def page_size_problem(value: str | None) -> str | None:
    """What is wrong with `?per_page=`: django-tables2 takes any integer (a negative one is a 500, a
    huge one renders the whole table)."""
    if value is None or value == "":
        return None
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_PAGE_SIZE:
        return f"per_page: a whole number from 1 to {MAX_PAGE_SIZE}, not {value[:40]!r}"
    return None


def all_clusters_shown(request) -> bool:
    """Whether the page shows the rows of several clusters at once (the picker's "all clusters")."""
    fleet = getattr(request, "fleet", None)
    return fleet is not None and fleet.shown is None and fleet.several


class ObjectListView(ViewerRequiredMixin, TemplateView):
    """Subclasses set queryset, filterset_class, table_class and title."""

    template_name = "generic/object_list.html"
    table_template = "htmx/table.html"  # what htmx swaps in when a filter changes
    queryset = None
    filterset_class = None
    table_class = None
    title = ""
    fleet_wide = False  # the same rows whichever cluster is shown (the EC2 catalogue): no "in <cluster>" heading
    # `?export=<name>` downloads (karpweb.csvexport): "csv" is the list itself; a list may offer more
    # (the reservations' hourly use).
    csv_exports: dict[str, CsvExport] = {}
    refreshes = False  # the table refreshes itself every KARPWEB_PAGE_REFRESH_SECONDS, keeping the filters

    def get(self, request, *args, **kwargs):
        if problem := page_size_problem(request.GET.get("per_page")):
            return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
        if "export" in request.GET:
            return self.export(request.GET["export"])
        return super().get(request, *args, **kwargs)

    def export(self, name: str):
        """The list as CSV: the rows its filters keep, in the requester's scope, streamed."""
        if name not in self.csv_exports:
            offered = ", ".join(sorted(self.csv_exports)) or "none on this list"
            return HttpResponseBadRequest(f"export: one of {offered}, not {name[:40]!r}", content_type="text/plain; charset=utf-8")
        filterset = self.filterset_class(self.request.GET, queryset=self.get_queryset(), request=self.request)
        if not filterset.is_valid():
            problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in filterset.errors.items())
            return HttpResponseBadRequest(problems, content_type="text/plain; charset=utf-8")
        export = self.csv_exports[name]
        rows = export.rows(self, filterset.qs)
        if isinstance(rows, HttpResponseBadRequest):
            return rows
        return streamed_csv(f"{export.stem}-{timezone.now():%Y%m%dT%H%MZ}.csv", export.columns, rows)

    def export_links(self) -> list[dict]:
        """The downloads with the filters the page was asked with (static/js/exports.js keeps them
        in step with the form as filters change without a reload)."""
        links = []
        for name, export in self.csv_exports.items():
            params = self.request.GET.copy()
            params.pop("page", None)
            params["export"] = name
            links.append({"name": name, "label": export.label, "url": f"?{params.urlencode()}"})
        return links

    def get_queryset(self):
        return self.queryset.all()

    def get_template_names(self):
        # htmx asks for the table alone when a filter changes or a page is turned.
        if self.request.htmx:
            return [self.table_template]
        return [self.template_name]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        filterset = self.filterset_class(self.request.GET or None, queryset=self.get_queryset(), request=self.request)
        table = self.table_class(filterset.qs if filterset.is_bound and filterset.is_valid() else self.get_queryset())
        if "cluster" in table.columns and all_clusters_shown(self.request):
            table.columns.show("cluster")  # the same names run in several clusters: say whose each row is
        RequestConfig(self.request, paginate={"per_page": PAGE_SIZE}).configure(table)
        context.update(filterset=filterset, table=table, title=self.title, table_template=self.table_template,
                       fleet_wide=self.fleet_wide, export_links=self.export_links(),
                       refresh_seconds=settings.KARPWEB_PAGE_REFRESH_SECONDS if self.refreshes else None)
        return context
