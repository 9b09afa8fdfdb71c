"""Renderers for answers that are text: a report as plain text or Markdown.

Chosen by `?format=text|markdown|json` (DRF's format override) or the Accept header. An
error answer (a dict) is written as JSON whatever the format.
"""

import json
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer


class _TextRenderer(BaseRenderer):
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        text = data if isinstance(data, str) else json.dumps(data, indent=2)
        return text.encode(self.charset)


class PlainTextRenderer(_TextRenderer):
    media_type = "text/plain"
    format = "text"


class MarkdownRenderer(_TextRenderer):
    media_type = "text/markdown"
    format = "markdown"
