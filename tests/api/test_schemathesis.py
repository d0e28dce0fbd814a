"""Generated requests against the project's own OpenAPI schema: no 5xx, and every response
(status, content type, headers, body) as the schema documents it.

Runs in-process through Django's WSGI handler inside the test's transaction, as an operator (so the
writes are exercised too), on the demo world. The schema is the one /api/schema/ serves, generated
here without a request so that it is ready at collection."""

import functools

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.tokens import create_token

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@functools.cache
def django_app():
    return get_wsgi_application()


def in_test_transaction(environ, start_response):
    """Django's WSGI handler, but (as Django's test client does) without letting the request
    signals close the connection the test's transaction runs on."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        response = django_app()(environ, start_response)
        try:
            return [b"".join(response)]
        finally:
            response.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
schema.app = in_test_transaction


@pytest.fixture
def demo_world(demo_world_for_module, db):
    """Every operation's test runs on the demo world: seeded once for the module (tests/conftest.py),
    each test's writes (all its examples') rolled back after it."""


@pytest.fixture
def operator_token(operator):
    return f"Token {create_token(operator)[1]}"


@pytest.fixture
def localhost_allowed(settings):
    """Set once per test, not per example: each assignment through pytest-django's `settings` nests
    another override, and every settings read walks them all (80 examples deep: 15 s of the module's
    181 s under cProfile)."""
    settings.ALLOWED_HOSTS = ["localhost"]


@schema.parametrize()
@hypothesis_settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case, demo_world, operator_token, localhost_allowed):
    case.call_and_validate(headers={"Authorization": operator_token}, checks=CHECKS)
