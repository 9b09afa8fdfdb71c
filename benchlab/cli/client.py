"""The lab's HTTP API over urllib: JSON in and out, text for reports; a failed request
is a CliError saying what the lab answered."""

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 60


class CliError(Exception):
    """Something `benchlab` cannot do; its message is shown, the exit code is 1."""


@dataclass(frozen=True)
class TextAnswer:
    """A text answer and the headers that came with it."""

    text: str
    headers: dict[str, str]


class Api:
    """Requests to `<url>/api/<path>` with `Authorization: Token <token>`."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token

    def get(self, path: str, query: dict[str, object] | None = None) -> Any:
        return json.loads(self._send("GET", path, query).text)

    def post(self, path: str, body: object = None) -> Any:
        answer = self._send("POST", path, None, body)
        return json.loads(answer.text) if answer.text else None

    def text(self, path: str, query: dict[str, object]) -> TextAnswer:
        return self._send("GET", path, query)

    def _send(
        self, method: str, path: str, query: dict[str, object] | None, body: object = None
    ) -> TextAnswer:
        address = f"{self.url}/api/{path.lstrip('/')}"
        given = {k: str(v) for k, v in (query or {}).items() if v is not None}
        if given:
            address += "?" + urllib.parse.urlencode(given)
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(address, data=data, method=method)
        request.add_header("Authorization", f"Token {self.token}")
        request.add_header("Accept", "application/json, text/plain, text/markdown")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
                headers = {k.lower(): v for k, v in answer.headers.items()}
                return TextAnswer(answer.read().decode(), headers)
        except urllib.error.HTTPError as error:
            raise CliError(f"{method} {address}: {error.code} {_said(error)}") from error
        except (urllib.error.URLError, OSError) as error:
            raise CliError(f"cannot reach the lab at {self.url}: {error}") from error


def _said(error: urllib.error.HTTPError) -> str:
    """What the lab said in an error answer: its `detail`/`error`, else the body."""
    body = error.read().decode(errors="replace")
    try:
        found = json.loads(body)
    except ValueError:
        return body[:500]
    said = found.get("error", found.get("detail")) if isinstance(found, dict) else None
    if isinstance(said, dict) and "message" in said:
        fields = said.get("fields") or {}
        return str(said["message"]) + "".join(f"; {k}: {v}" for k, v in fields.items())
    return str(said) if said is not None else json.dumps(found)[:1000]
