"""Request bodies refused while they stream, before they reach memory or disk.

Django reads a multipart upload whole (into memory, then a temporary file under /tmp) before a view
can look at its size, and DATA_UPLOAD_MAX_MEMORY_SIZE does not count files: a 2 GB upload filled
/tmp before the what-if page said "larger than 5 MiB". Two guards:

- RequestBodyLimit (middleware, early): a body declared larger than DATA_UPLOAD_MAX_MEMORY_SIZE is
  answered 413 without reading it. Under WSGI the declared length is all Django ever reads.
- SizeLimitedUploadHandler (first of FILE_UPLOAD_HANDLERS): counts each file's bytes as they arrive
  and stops the upload once one is over KARPWEB_UPLOAD_MAX_BYTES, so the handlers after it (the
  temporary file) never see more than the limit. The view learns which field it was from
  `request.upload_too_large`.
"""

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpResponse, JsonResponse


class RequestBodyLimit:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0  # Django reads nothing of a body whose length it cannot read
        if limit is not None and declared > limit:
            return too_large(request, limit)
        return self.get_response(request)


def too_large(request, limit: int) -> HttpResponse:
    detail = f"The request body is too large (at most {limit // 2**20} MiB)."
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": detail}, status=413)
    return HttpResponse(detail, status=413, content_type="text/plain; charset=utf-8")


class SizeLimitedUploadHandler(FileUploadHandler):
    def new_file(self, field_name, *args, **kwargs):
        super().new_file(field_name, *args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > settings.KARPWEB_UPLOAD_MAX_BYTES:
            self.request.upload_too_large = self.field_name
            # connection_reset: stop reading too (the declared length is at most the body limit).
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size):
        return None  # the next handler (memory or temporary file) makes the file
