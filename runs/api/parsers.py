"""The API's JSON parser: DRF's, with a bound on how deeply a body may nest.

Python's JSON decoder recurses once per level and raises RecursionError
(a 500) on a body of ten thousand nested arrays; nothing the API takes nests
deeper than a few levels (a workload's scripts, a storage layout), so a body
nested deeper than MAX_JSON_DEPTH is refused with a parse error (400) before
any serializer walks it, recursively too.
"""

from collections.abc import Mapping
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_JSON_DEPTH = 32
TOO_DEEP = (
    f"JSON parse error - the body nests arrays and objects more than {MAX_JSON_DEPTH} "
    "levels deep; no field of this API nests that deep"
)


class JSONParser(parsers.JSONParser):
    """Parses a JSON body nested at most MAX_JSON_DEPTH levels deep; ParseError otherwise."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, object] | None = None,
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as error:
            raise ParseError(TOO_DEEP) from error
        if json_depth(data) > MAX_JSON_DEPTH:
            raise ParseError(TOO_DEEP)
        return data


def json_depth(value: object) -> int:
    """How deeply arrays and objects nest in a decoded JSON value (a scalar: 0), without
    recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_JSON_DEPTH:
            pending.extend((child, depth + 1) for child in item)
    return deepest
