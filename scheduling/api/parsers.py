"""The API's JSON parser (REST_FRAMEWORK names it as the default): DRF's, except that a body nested
deeper than Python's recursion limit is a 400 like any other JSON error, not a server error."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from karpweb.jsonsafe import json_problems


class JSONBodyParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        surrogates = [problem for problem in json_problems(data) if "lone surrogate" in problem]
        if surrogates:  # no field of any serializer can store one: refused here, named by its place
            raise ParseError("JSON parse error - " + "; ".join(surrogates[:5]))
        return data
