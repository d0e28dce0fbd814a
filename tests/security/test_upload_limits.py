"""Request bodies are refused while they stream (karpweb/uploads.py): a declared length over the limit
is never read, and an uploaded file stops at its limit, so no temporary file grows past it."""

import json

import pytest
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

from tests.support.api_clients import token_client

pytestmark = pytest.mark.django_db
LIMIT = 64 * 1024


class RecordingTemporaryFileHandler(TemporaryFileUploadHandler):
    """Django's temporary-file handler, noting how many bytes each file it wrote to disk held."""

    written: list[int] = []  # bytes per file, reset by the fixture (one test process at a time)

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        type(self).written.append(0)

    def receive_data_chunk(self, raw_data, start):
        type(self).written[-1] += len(raw_data)
        return super().receive_data_chunk(raw_data, start)


@pytest.fixture
def small_limits(settings, tmp_path):
    settings.KARPWEB_UPLOAD_MAX_BYTES = LIMIT
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # every file to disk, where the harm was
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    settings.FILE_UPLOAD_HANDLERS = ["karpweb.uploads.SizeLimitedUploadHandler",
                                     f"{__name__}.RecordingTemporaryFileHandler"]
    RecordingTemporaryFileHandler.written = []
    return settings


def test_an_upload_over_the_limit_stops_before_the_temporary_file_passes_it(small_limits, viewer_client, tmp_path):
    data = encode_multipart(BOUNDARY, {"world_file": SimpleUploadedFile("WORLD.json", b"{" + b" " * (LIMIT * 20) + b"}")})
    assert len(data) < small_limits.DATA_UPLOAD_MAX_MEMORY_SIZE  # the body limit lets it in: the file limit acts
    response = viewer_client.generic("POST", "/what-if/", data, content_type=MULTIPART_CONTENT)
    assert response.status_code == 200
    assert "world_file: larger than" in response.content.decode()
    assert RecordingTemporaryFileHandler.written and max(RecordingTemporaryFileHandler.written) <= LIMIT
    assert list(tmp_path.iterdir()) == []  # and what was written is gone


def test_an_upload_within_the_limit_still_runs(small_limits, viewer_client):
    world = json.dumps({"now": "2026-11-21T12:00:00Z"}).encode()
    response = viewer_client.post("/what-if/", {"world_file": SimpleUploadedFile("WORLD.json", world)})
    assert response.status_code == 200 and "larger than" not in response.content.decode()
    assert RecordingTemporaryFileHandler.written == [len(world)]


def test_a_body_declared_too_large_is_refused_unread(viewer_client, settings):
    # The declared length alone decides: the body sent is tiny, so reading it would fail loudly.
    response = viewer_client.generic("POST", "/what-if/", b"world=x", content_type="application/x-www-form-urlencoded",
                                     CONTENT_LENGTH=str(2 * 2**30))
    assert response.status_code == 413
    assert b"too large" in response.content


def test_the_api_answers_a_declared_too_large_body_with_json(viewer):
    response = token_client(viewer).generic("POST", "/api/v1/simulate/", b"{}", content_type="application/json",
                                            CONTENT_LENGTH=str(2 * 2**30))
    assert response.status_code == 413
    assert response.json()["detail"].startswith("The request body is too large")
