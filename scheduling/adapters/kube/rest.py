"""Plain-JSON requests through the official client's ApiClient (its configuration, TLS, auth and
connection pool), for core and custom resources alike.

The typed API classes deserialize into generated models; karpweb works on the API's own JSON
(plain dicts, camelCase, exactly what ``kubectl get -o json`` shows), which is what the sync and
the simulated world exchange, so every call goes through :meth:`KubeRest.request`.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from .errors import ResourceVersionExpired, describe_api_error
from .resources import Resource

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

DEFAULT_TIMEOUT = 30.0  # seconds, for every request but watches


class KubeRest:
    def __init__(self, api_client: ApiClient, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.api_client = api_client
        self.timeout = timeout
        self._streams: set = set()  # open watch responses, so close_watches can end them
        self._streams_lock = threading.Lock()

    @property
    def host(self) -> str:
        return self.api_client.configuration.host

    def _send(self, method: str, path: str, *, query: dict | None = None, body: Any = None,
              content_type: str | None = None, timeout: float | tuple | None = None):
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        query_params = [(key, value) for key, value in (query or {}).items() if value is not None]
        method, url, header_params, serialized, _ = self.api_client.param_serialize(
            method=method, resource_path=path, query_params=query_params, header_params=headers,
            body=body, auth_settings=["BearerToken"],
        )
        return self.api_client.call_api(
            method, url, header_params=header_params, body=serialized,
            _request_timeout=timeout if timeout is not None else self.timeout,
        )

    def request(self, method: str, path: str, **kwargs) -> dict:
        """Send one request; returns the decoded JSON body. Raises ApiException on HTTP errors and
        urllib3 errors when the server cannot be reached."""
        response = self._send(method, path, **kwargs)
        data = response.read()
        if not 200 <= response.status <= 299:
            text = data.decode("utf-8", "replace") if data else ""
            raise ApiException.from_response(http_resp=response, body=text, data=None)
        return json.loads(data) if data else {}

    # --- verbs on a Resource ------------------------------------------------------------------
    def get(self, resource: Resource, name: str, namespace: str | None = None, subresource: str | None = None) -> dict:
        return self.request("GET", resource.path(name, namespace, subresource))

    def list(self, resource: Resource, *, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None, page_size: int = 500) -> dict:
        """All pages of a list; returns ``{"items": [...], "metadata": {"resourceVersion": ...}}``."""
        items: list[dict] = []
        token = None
        while True:
            page = self.request("GET", resource.path(namespace=namespace), query={
                "labelSelector": label_selector, "fieldSelector": field_selector,
                "limit": page_size, "continue": token,
            })
            items.extend(page.get("items") or [])
            metadata = page.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                return {"items": items, "metadata": {"resourceVersion": metadata.get("resourceVersion", "")}}

    def create(self, resource: Resource, body: dict, namespace: str | None = None, subresource: str | None = None,
               name: str | None = None) -> dict:
        path = resource.path(name, namespace, subresource) if subresource else resource.path(namespace=namespace)
        return self.request("POST", path, body=body)

    def replace(self, resource: Resource, name: str, body: dict, namespace: str | None = None,
                subresource: str | None = None) -> dict:
        return self.request("PUT", resource.path(name, namespace, subresource), body=body)

    def patch(self, resource: Resource, name: str, body: Any, *, namespace: str | None = None,
              subresource: str | None = None, content_type: str = MERGE_PATCH) -> dict:
        return self.request("PATCH", resource.path(name, namespace, subresource), body=body, content_type=content_type)

    def delete(self, resource: Resource, name: str, namespace: str | None = None, body: dict | None = None) -> dict:
        return self.request("DELETE", resource.path(name, namespace), body=body)

    def watch(self, resource: Resource, resource_version: str, *, timeout_seconds: int = 60,
              field_selector: str | None = None, label_selector: str | None = None) -> Iterator[dict]:
        """Stream watch events (``{"type": ..., "object": {...}}``) from ``resource_version``, ending
        when the server closes the watch after ``timeout_seconds``. BOOKMARK events are passed on
        (their object carries only the new resourceVersion). A 410 Gone, in the response or as an
        ERROR event, raises :class:`ResourceVersionExpired`."""
        query = {
            "watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds, "fieldSelector": field_selector, "labelSelector": label_selector,
        }
        # Connect quickly; allow the read to last the whole watch plus slack.
        response = self._send("GET", resource.path(), query=query, timeout=(10, timeout_seconds + 15))
        with self._streams_lock:
            self._streams.add(response.response)
        try:
            if response.status == 410:
                raise ResourceVersionExpired(resource.kind, resource_version)
            if not 200 <= response.status <= 299:
                data = response.read()
                raise ApiException.from_response(
                    http_resp=response, body=data.decode("utf-8", "replace") if data else "", data=None
                )
            buffer = b""
            for chunk in response.response.stream(64 * 1024, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        if status.get("code") == 410:
                            raise ResourceVersionExpired(resource.kind, resource_version, status.get("message", ""))
                        raise ApiException(status=status.get("code") or 500,
                                           reason=f"{status.get('reason', '')}: {status.get('message', '')}")
                    yield event
        finally:
            with self._streams_lock:
                self._streams.discard(response.response)
            response.response.release_conn()
            response.response.close()

    def close_watches(self) -> None:
        """End every open watch now (from any thread): their readers see the stream end."""
        with self._streams_lock:
            streams = list(self._streams)
        for stream in streams:
            sock = getattr(getattr(stream, "connection", None), "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def error_for(rest: KubeRest, exc: BaseException, verb: str, resource: Resource, name: str | None = None,
              namespace: str | None = None):
    return describe_api_error(exc, verb=verb, resource=resource, name=name, namespace=namespace, host=rest.host)
