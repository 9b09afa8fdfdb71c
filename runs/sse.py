"""Server-Sent Events for the live run page.

An async view polls the lab database about once a second for rows stored
since the last event (progress samples, host samples, finished points) and
the run's status, and sends them as events. A server sample's event carries the
values its traces draw and the checkpoints it starts or ends. Every event's `id` is the cursor
`p<progress id>.h<host sample id>.r<result id>` (and `.c<client host sample id>`
for a run with a client host, `.s<server sample id>`), so a browser that reconnects
with `Last-Event-ID` resumes where it left off. Those rows are only ever
added, never rewritten (runs/services/jobs/events.py), so each is sent once. The
stream ends with an `end` event once the run is final and everything stored
has been sent. A shared stream re-checks its link every SHARE_RECHECK_S and
ends with `end` (status `revoked`) once the link is revoked.
"""

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.template.loader import render_to_string

from runs import selectors, services
from runs.models import Run, ShareLink
from runs.selectors import LiveCursor, LiveRows
from runs.timelines.live import LiveCheckpoints
from runs.timelines.samples import host_sample_values, server_sample_values

logger = logging.getLogger(__name__)

POLL_S = 0.7
SHARE_RECHECK_S = 2.0
KEEPALIVE_S = 15.0
CURSOR = re.compile(r"^p(\d+)\.h(\d+)\.r(\d+)(?:\.c(\d+))?(?:\.s(\d+))?$")


def parse_cursor(text: str | None) -> LiveCursor:
    """`p12.h3.r1` -> {"p": 12, "h": 3, "r": 1}; anything else starts from the beginning."""
    match = CURSOR.match(text or "")
    if not match:
        return {"p": 0, "h": 0, "r": 0}
    cursor: LiveCursor = {"p": int(match[1]), "h": int(match[2]), "r": int(match[3])}
    if match[4] is not None:
        cursor["c"] = int(match[4])
    if match[5] is not None:
        cursor["s"] = int(match[5])
    return cursor


def format_cursor(cursor: LiveCursor) -> str:
    client = f".c{cursor['c']}" if "c" in cursor else ""
    server = f".s{cursor['s']}" if "s" in cursor else ""
    return f"p{cursor['p']}.h{cursor['h']}.r{cursor['r']}{client}{server}"


def sse_message(event: str, data: Mapping[str, object], cursor: LiveCursor | None = None) -> str:
    """One SSE message; `id` only when there is a cursor to resume from."""
    lines = [f"event: {event}"]
    if cursor is not None:
        lines.append(f"id: {format_cursor(cursor)}")
    lines.append(f"data: {json.dumps(data, separators=(',', ':'))}")
    return "\n".join(lines) + "\n\n"


def _messages(batch: LiveRows, cursor: LiveCursor, checkpoints: LiveCheckpoints) -> list[str]:
    """The batch's rows as messages, advancing `cursor` row by row."""
    out = []
    for progress in batch["progress"]:
        cursor["p"] = progress.pk
        data = {
            "point": progress.point,
            "t": progress.t,
            "tps": progress.tps,
            "latency_ms": progress.latency_ms,
            "sampled": progress.sampled,
            "p50_ms": progress.p50_ms,
            "p95_ms": progress.p95_ms,
            "p99_ms": progress.p99_ms,
        }
        out.append(sse_message("progress", data, cursor))
    for host in batch["host"]:
        cursor["h"] = host.pk
        values = {"point": host.point, "t": host.t or 0.0, **host_sample_values(host.data)}
        out.append(sse_message("host", values, cursor))
    for sample in batch["client_host"]:
        cursor["c"] = sample.pk
        values = {"point": sample.point, "t": sample.t or 0.0, **host_sample_values(sample.data)}
        out.append(sse_message("client_host", values, cursor))
    for server in batch["server"]:
        cursor["s"] = server.pk
        drawn: dict[str, object] = {
            "point": server.point,
            "t": server.t or 0.0,
            "values": server_sample_values(server.data),
            "checkpoints": checkpoints.add(server),
        }
        out.append(sse_message("server", drawn, cursor))
    for result in batch["results"]:
        cursor["r"] = result.pk
        row = render_to_string("runs/_result_row.html", {"result": result, "fresh": True})
        out.append(sse_message("result", {"index": result.index, "html": row}, cursor))
    return out


class Recheck:
    """Asks `still_open` again every SHARE_RECHECK_S (a shared stream's link may be revoked)."""

    def __init__(self, still_open: Callable[[], Awaitable[bool]] | None):
        self.still_open = still_open
        self.next_at = 0.0

    async def closed(self) -> bool:
        if self.still_open is None or time.monotonic() < self.next_at:
            return False
        self.next_at = time.monotonic() + SHARE_RECHECK_S
        return not await self.still_open()


async def run_stream(
    run_id: int,
    cursor: LiveCursor,
    still_open: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncIterator[str]:
    """Messages for one run until it is final and drained (or deleted).

    With `still_open` (a shared stream: is its link still active?) the stream
    also ends, with `end` status `revoked`, within SHARE_RECHECK_S of it
    turning false.
    """
    fetch = sync_to_async(selectors.rows_after)
    last_state, idle = None, 0.0
    recheck = Recheck(still_open)
    yield "retry: 2000\n\n"
    try:
        drawn = sync_to_async(selectors.last_point_server_samples)
        checkpoints = LiveCheckpoints(await drawn(run_id, cursor["s"]) if "s" in cursor else [])
        while True:
            if await recheck.closed():
                yield sse_message("end", {"status": "revoked"})
                return
            batch = await fetch(run_id, cursor.copy())
            if batch["run"] is None:
                yield sse_message("end", {"status": "gone"})
                return
            messages = _messages(batch, cursor, checkpoints)
            state = batch["run"]
            if state != last_state:
                final = state["status"] in Run.FINAL_STATES
                messages.append(sse_message("status", {**state, "final": final}, cursor))
                last_state = state
            for message in messages:
                yield message
            if not messages and state["status"] in Run.FINAL_STATES:
                yield sse_message("end", {"status": state["status"]}, cursor)
                return
            idle = 0.0 if messages else idle + POLL_S
            if idle >= KEEPALIVE_S:
                idle = 0.0
                yield ": keepalive\n\n"
            await asyncio.sleep(POLL_S)
    finally:
        await sync_to_async(close_old_connections)()


def _stream_response(
    request: HttpRequest,
    run_id: int,
    still_open: Callable[[], Awaitable[bool]] | None = None,
) -> StreamingHttpResponse:
    cursor = parse_cursor(request.headers.get("Last-Event-ID") or request.GET.get("after"))
    stream = run_stream(run_id, cursor, still_open)
    response = StreamingHttpResponse(stream, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


async def run_events(request: HttpRequest, pk: int) -> HttpResponse | StreamingHttpResponse:
    """The live stream of a run, for signed-in users."""
    user = await request.auser()
    if not user.is_authenticated:
        return HttpResponse("Sign in to follow this run.", status=403, content_type="text/plain")
    if not await Run.objects.filter(pk=pk).aexists():
        raise Http404(f"There is no run {pk}.")
    return _stream_response(request, pk)


async def shared_run_events(request: HttpRequest, token: str) -> StreamingHttpResponse:
    """The live stream of a run shared by an active link; it ends soon after a revoke."""
    link = await sync_to_async(services.share_link_resolve)(token)
    if link is None or link.run_id is None:
        raise Http404("This share link does not exist or was revoked.")

    async def still_open() -> bool:
        return await ShareLink.objects.filter(pk=link.pk, revoked_at__isnull=True).aexists()

    return _stream_response(request, link.run_id, still_open)
