"""The OpenAPI schema: served at /api/schema/, valid, warning-free, and documenting every
endpoint with its error responses. Swagger UI only from local static files."""

import io
import re

import pytest
import yaml
from django.apps import apps
from django.core.management import call_command
from django.urls import get_resolver, resolve

pytestmark = pytest.mark.django_db

METHODS = {"get", "put", "patch", "post", "delete"}


@pytest.fixture
def schema(anon):
    response = anon.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def operations(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def test_schema_is_served_as_yaml_and_json(anon, schema):
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "karpweb API"
    response = anon.get("/api/schema/")
    assert response.status_code == 200
    assert yaml.safe_load(response.content)["paths"] == schema["paths"]


def test_schema_validates_without_warnings():
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=io.StringIO(), stderr=io.StringIO())


def test_every_api_route_is_documented(schema):
    documented = {path for path in schema["paths"]}
    routes = set()

    def walk(patterns, prefix):
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if hasattr(pattern, "url_patterns"):
                walk(pattern.url_patterns, route)
            elif route.startswith("api/v1/") and getattr(pattern, "name", "") != "not-found":
                routes.add(route)

    walk(get_resolver().url_patterns, "")
    assert len(routes) >= 24
    for route in routes:
        # Router regexes (^nodes/(?P<name>[^/]+)/$) and converters (<str:name>) as OpenAPI's {name};
        # drf-spectacular calls a pk "id".
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)|<str:(\w+)>", lambda m: "{" + (m[1] or m[2]) + "}", route)
        path = "/" + path.replace("^", "").replace("$", "").replace("{pk}", "{id}")
        assert path in documented, f"{route} is not in the schema"


def test_every_operation_documents_its_errors(schema):
    for path, method, operation in operations(schema):
        codes = set(operation["responses"])
        # A create answers 201 (the fleet's accounts and clusters); everything else 200.
        assert {"401", "403"} <= codes and ("200" in codes or (method == "post" and "201" in codes)), (method, path, codes)
        assert operation.get("summary"), (method, path)
        if "{" in path:
            assert "404" in codes, (method, path)
        if method == "get" and not path.endswith("}/") and path not in ("/api/v1/", "/api/v1/world/", "/api/v1/controller/"):
            assert "400" in codes, f"list {path} documents its filter errors"
        for code, response in operation["responses"].items():
            if code != "200":
                assert "application/json" in response["content"], (method, path, code)


def test_writes_document_conflicts_and_validation(schema):
    node_class = schema["paths"]["/api/v1/ec2nodeclasses/{name}/"]
    for method in ("put", "patch"):
        assert {"400", "404", "409", "412", "428"} <= set(node_class[method]["responses"])
        headers = [p["name"] for p in node_class[method]["parameters"] if p["in"] == "header"]
        assert headers == ["If-Match"]
        assert "ETag" in node_class[method]["responses"]["200"]["headers"]
    assert "ETag" in node_class["get"]["responses"]["200"]["headers"]
    simulate = schema["paths"]["/api/v1/simulate/"]["post"]
    assert {"400", "413", "415"} <= set(simulate["responses"])
    assert schema["paths"]["/api/v1/nodepools/{name}/"]["patch"]["responses"].keys() >= {"400", "404", "409"}
    assert "409" in schema["paths"]["/api/v1/controller/allow-control/"]["post"]["responses"]
    writable = {
        (path, method) for path, method, _ in operations(schema) if method != "get"
    }
    assert writable == {
        ("/api/v1/ec2nodeclasses/{name}/", "put"), ("/api/v1/ec2nodeclasses/{name}/", "patch"),
        ("/api/v1/ec2nodeclasses/{name}/preview/", "post"), ("/api/v1/nodepools/{name}/", "patch"),
        ("/api/v1/simulate/", "post"), ("/api/v1/controller/allow-control/", "post"),
        ("/api/v1/recommendations/{id}/apply/", "post"), ("/api/v1/open-reservation-traps/fix/", "post"),
        ("/api/v1/capacity-block-advice/{id}/approve/", "post"), ("/api/v1/capacity-block-advice/{id}/purchase/", "post"),
        ("/api/v1/accounts/", "post"), ("/api/v1/accounts/{account_id}/", "patch"),
        ("/api/v1/accounts/{account_id}/external-id/", "post"),
        ("/api/v1/clusters/", "post"), ("/api/v1/clusters/{name}/", "patch"), ("/api/v1/clusters/{name}/", "delete"),
    }, "everything else is read-only"
    assert "409" in schema["paths"]["/api/v1/clusters/{name}/"]["patch"]["responses"]
    for path in ("/api/v1/accounts/", "/api/v1/clusters/"):
        assert {"201", "400"} <= set(schema["paths"][path]["post"]["responses"])
    assert {"400", "404", "409"} <= set(schema["paths"]["/api/v1/recommendations/{id}/apply/"]["post"]["responses"])


def test_the_details_found_by_name_document_the_cluster(schema):
    """Two clusters may both have a NodePool "default": a detail that finds a Kubernetes-side object by
    its name filters as its list does, `?cluster=` included (ClusterFilters), and answers 400 without it
    when several clusters have the name (tests/fleet/test_object_urls.py). Every such operation, read,
    write or action, documents the parameter; no other detail does."""
    accepting, documenting = set(), set()
    for path, method, operation in operations(schema):
        if "{" not in path:
            continue  # the lists document `cluster` with their other filters
        view = getattr(resolve(re.sub(r"\{\w+\}", "1", path)).func, "cls", None)
        filterset = getattr(view, "filterset_class", None)
        cluster_filter = filterset.base_filters.get("cluster") if filterset else None
        if getattr(cluster_filter, "field_name", None) == "cluster__name" and view.lookup_field != "pk":
            accepting.add((path, method))
        cluster = [p for p in operation.get("parameters", []) if p["name"] == "cluster" and p["in"] == "query"]
        if cluster:
            documenting.add((path, method))
            assert not cluster[0].get("required") and cluster[0]["schema"] == {"type": "string"}, (method, path)
            assert "several clusters" in cluster[0]["description"] and "400" in cluster[0]["description"], (method, path)
            assert "400" in operation["responses"], (method, path)
    assert accepting >= {
        ("/api/v1/nodepools/{name}/", "get"), ("/api/v1/nodepools/{name}/", "patch"), ("/api/v1/nodes/{name}/", "get"),
        ("/api/v1/nodeclaims/{name}/", "get"), ("/api/v1/pods/{namespace}/{name}/", "get"),
        ("/api/v1/ec2nodeclasses/{name}/", "get"), ("/api/v1/ec2nodeclasses/{name}/", "put"),
        ("/api/v1/ec2nodeclasses/{name}/", "patch"), ("/api/v1/ec2nodeclasses/{name}/preview/", "post"),
    }
    assert documenting == accepting


def test_token_and_session_auth_are_declared(schema):
    assert set(schema["components"]["securitySchemes"]) == {"tokenAuth", "cookieAuth"}


def test_swagger_ui_is_served_only_from_local_static_files(anon):
    response = anon.get("/api/docs/")
    if apps.is_installed("drf_spectacular_sidecar"):
        page = response.content.decode()
        assert response.status_code == 200
        assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
        # Every script and stylesheet is local: no address with a host of its own.
        assert not re.findall(r'(?:src|href)=["\'](?:https?:)?//', page), page
    else:
        # Not installed: no docs page at all (rather than one that loads Swagger UI from a CDN).
        assert response.status_code == 404
