"""The API's JSON parser (REST_FRAMEWORK names it as the default): DRF's, except that a body nested
deeper than Python's recursion limit is a 400 like any other JSON error, not a server error."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class JSONBodyParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
