"""Page-number pagination that refuses a `page` that is not a page number."""

import re
from collections.abc import Sequence
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.views import APIView

MAX_PAGE = 10**18 - 1


PagedModel = TypeVar("PagedModel", bound=Model)
Row = TypeVar("Row")


class StrictPageNumberPagination(PageNumberPagination):
    """DRF's pagination, but `?page=abc` (or `page` given twice) answers 400 naming `page`.

    DRF alone reads an empty or repeated `page` as the first page; a number
    that is no page (0, past the end) still answers 404.
    """

    def paginate_queryset(
        self,
        queryset: QuerySet[PagedModel, Row] | Sequence[Row],
        request: Request,
        view: APIView | None = None,
    ) -> list[Row] | None:
        pages = request.query_params.getlist(self.page_query_param)
        if len(pages) > 1 or (pages and not _is_page_number(pages[0])):
            raise ValidationError({self.page_query_param: ["a page is one number from 1 up"]})
        return super().paginate_queryset(queryset, request, view)

    # OpenAPI parameter objects, typed as DRF's stubs type the method it overrides.
    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        """The schema says what a page number is: a whole number from 1 up (18 digits at most)."""
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {**parameter["schema"], "minimum": 1, "maximum": MAX_PAGE}
        return parameters


def _is_page_number(text: str) -> bool:
    """An integer or `last`; a number out of range is DRF's 404, not a 400."""
    return text == "last" or re.fullmatch(r"-?[0-9]+", text) is not None
