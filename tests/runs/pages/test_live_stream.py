"""The run page's Server-Sent Events: stored rows in order, resumable, ending when final."""

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, transaction
from django.test import AsyncClient
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.events import EventEmitter
from runs import selectors, services
from runs.models import ProgressSample, Run, ServerSample
from runs.sse import parse_cursor
from runs.timelines import store
from runs.timelines.live import LiveCheckpoints
from tests.runs import events as agent_events
from tests.runs.factories import RunFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db(transaction=True)

STREAM_TIMEOUT_S = 30


def events_of(body: str) -> list[dict]:
    events = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append(fields)
    return events


async def read_stream(client: AsyncClient, url: str, **headers) -> list[dict]:
    response = await client.get(url, headers=headers)
    assert response["Content-Type"] == "text/event-stream"
    async with asyncio.timeout(STREAM_TIMEOUT_S):
        chunks = [chunk async for chunk in response.streaming_content]
    return events_of(b"".join(chunks).decode())


@pytest.fixture
def client(user):
    client = AsyncClient()
    client.force_login(user)
    return client


def read(client: AsyncClient, url: str, **headers) -> list[dict]:
    return async_to_sync(read_stream)(client, url, **headers)


def test_finished_run_streams_its_rows_then_ends(client):
    run = finished_run([(1, 1, 500.0, 2.0), (2, 1, 900.0, 2.2)])
    events = read(client, reverse("run-events", args=[run.pk]))
    kinds = [e["event"] for e in events]
    assert kinds.count("progress") == 4 and kinds.count("result") == 2
    assert kinds.count("host") == 2
    assert kinds[-2:] == ["status", "end"]
    assert '"final":true' in events[-2]["data"]
    ids = [parse_cursor(e["id"]) for e in events if e["event"] == "progress"]
    assert [c["p"] for c in ids] == sorted(c["p"] for c in ids)


def test_reconnect_with_last_event_id_resumes_after_it(client):
    run = finished_run([(1, 1, 500.0, 2.0), (2, 1, 900.0, 2.2)])
    url = reverse("run-events", args=[run.pk])
    first = read(client, url)
    second_progress = [e for e in first if e["event"] == "progress"][1]
    resumed = read(client, url, **{"Last-Event-ID": second_progress["id"]})
    progress = [e for e in resumed if e["event"] == "progress"]
    assert len(progress) == 2
    assert all(
        parse_cursor(e["id"])["p"] > parse_cursor(second_progress["id"])["p"] for e in progress
    )


def test_result_event_carries_the_formatted_table_row(client):
    run = finished_run([(8, 1, 12345.678, 0.6481)])
    events = read(client, reverse("run-events", args=[run.pk]))
    (result,) = [e for e in events if e["event"] == "result"]
    assert "12,345.7" in result["data"] and "0.648" in result["data"]


def test_running_run_streams_new_samples_as_they_are_stored(client):
    run = finished_run([(1, 1, 500.0, 2.0)])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    async_to_sync(follow_while_samples_arrive)(client, run)


async def follow_while_samples_arrive(client: AsyncClient, run: Run) -> None:
    response = await client.get(reverse("run-events", args=[run.pk]))
    stream = aiter(response.streaming_content)
    seen = b""
    async with asyncio.timeout(STREAM_TIMEOUT_S):
        while b"event: status" not in seen:
            seen += await anext(stream)
        await ProgressSample.objects.acreate(run=run, point=1, t=1.0, tps=777.0, latency_ms=1.0)
        while b"777.0" not in seen:
            seen += await anext(stream)
        await Run.objects.filter(pk=run.pk).aupdate(status=Run.Status.SUCCEEDED)
        async for chunk in stream:
            seen += chunk
    assert seen.decode().rstrip().splitlines()[0].startswith("retry:")
    assert "event: end" in seen.decode()


def test_a_run_streamed_through_progress_point_and_result_sends_each_sample_once(client):
    run = RunFactory(status=Run.Status.RUNNING)
    emitter = AgentEvents(run)

    seen = async_to_sync(stream_while_the_run_reports)(client, run, emitter)

    progress = [(e["point"], e["t"]) for e in seen if e["event"] == "progress"]
    host = [(e["point"], e["t"]) for e in seen if e["event"] == "host"]
    assert progress == [(0, 1.0), (0, 2.0), (1, 1.0), (1, 2.0)]
    assert host == [(0, 1.0), (1, 1.0)]
    assert [e["index"] for e in seen if e["event"] == "result"] == [0, 1]
    assert seen[-1]["event"] == "end"


class AgentEvents:
    """Events of one run built by the agent's own emitter, stored as the consumer stores them."""

    def __init__(self, run: Run):
        self.events: list[dict] = []
        self.emitter = EventEmitter(
            [self.events.append], run_id=str(run.pk), token=run.token, agent=run.host.name
        )
        self.run = run

    async def report(self, event_type: str, data: dict) -> None:
        event = self.emitter.emit(event_type, data)
        await sync_to_async(record_in_transaction)(event)

    async def measure_point(self, index: int) -> dict:
        """Live progress and host samples of a point, then its `point` event."""
        point = agent_events.point(index, clients=index + 1)
        for line in point["progress"]:
            await self.report("progress", {"point": index, "clients": index + 1, **line})
        for sample in point["host_samples"]:
            await self.report("sample", {"point": index, "clients": index + 1, "host": sample})
        await self.report("point", point)
        return point


def record_in_transaction(event: dict) -> None:
    with transaction.atomic():
        services.record_event(event)


async def stream_while_the_run_reports(
    client: AsyncClient, run: Run, emitter: AgentEvents
) -> list[dict]:
    """Follow the run's stream while it measures two points and finishes; every message seen."""
    response = await client.get(reverse("run-events", args=[run.pk]))
    stream = aiter(response.streaming_content)
    body = b""
    async with asyncio.timeout(STREAM_TIMEOUT_S):
        first = await emitter.measure_point(0)
        while b'"point":0,"t":2.0' not in body:
            body += await anext(stream)
        second = await emitter.measure_point(1)
        document = agent_events.result(run, points=[first, second])
        await emitter.report("result", document)
        async for chunk in stream:
            body += chunk
    return [{"event": e["event"], **json.loads(e["data"])} for e in events_of(body.decode())]


def server_sample(run: Run, t: float, timed: int, written: float, waits: dict) -> ServerSample:
    data = {
        "t": t,
        "checkpoints_timed": timed,
        "checkpoints_req": 0,
        "buffers_checkpoint_per_s": written,
        "buffers_clean_per_s": 3.0,
        "buffers_backend_per_s": 1.0,
        "buffers_alloc_per_s": 40.0 + t,
        "wait_events": waits,
    }
    return ServerSample.objects.create(run=run, point=0, t=t, data=data)


def test_server_samples_stream_their_traces_and_the_checkpoints_the_kept_page_marks(
    client, signed_in
):
    run = RunFactory(status=Run.Status.RUNNING)
    drawn = server_sample(run, 1.0, 0, 0.0, {"CPU": 2})
    page = signed_in.get(reverse("run-detail", args=[run.pk]))
    cursor = parse_cursor(page.context["cursor"])
    assert cursor["s"] == drawn.pk, "the page says which server samples it was drawn with"
    server_sample(run, 2.0, 1, 50.0, {"CPU": 1, "IO:WALSync": 2, "LWLock:WALWrite": 1})
    server_sample(run, 3.0, 1, 0.0, {"IO:DataFileRead": 1})
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)

    url = f"{reverse('run-events', args=[run.pk])}?after={page.context['cursor']}"
    server = [json.loads(e["data"]) for e in read(client, url) if e["event"] == "server"]

    assert [s["t"] for s in server] == [2.0, 3.0], "only the samples after the page's"
    assert server[0]["values"]["wait.IO"] == 2 and server[0]["values"]["wait.LWLock"] == 1
    assert server[0]["values"]["server.buffers_alloc_per_s"] == 42.0
    assert server[1]["values"]["wait.IO"] == 1 and "wait.CPU" not in server[1]["values"]
    live = [(s["t"], c["kind"], c["edge"]) for s in server for c in s["checkpoints"]]
    kept = kept_digest(run).checkpoints
    assert (
        live
        == [(e.t, e.kind, e.edge) for e in kept]
        == [
            (2.0, "timed", "start"),
            (3.0, "timed", "end"),
        ]
    )


def kept_digest(run: Run) -> store.Digest:
    return store.digests([Run.objects.get(pk=run.pk)])[run.pk]


@pytest.mark.parametrize("stored", [1, 40])
def test_a_poll_asks_one_query_per_kind_of_row_however_many_server_samples(stored):
    """The stream polls about once a second per open page: the run's state and one query
    each for progress, host, result and server rows, whatever was stored since; the
    checkpoints of the new server samples are found in memory."""
    run = RunFactory(status=Run.Status.RUNNING)
    for n in range(stored):
        server_sample(run, float(n), n // 10, 50.0 * (n % 2), {"CPU": 1})
    cursor = parse_cursor("p0.h0.r0.s0")
    with CaptureQueriesContext(connection) as captured:
        batch = selectors.rows_after(run.pk, cursor)
        checkpoints = LiveCheckpoints([])
        edges = [checkpoints.add(sample) for sample in batch["server"]]
    assert len(batch["server"]) == stored and len(edges) == stored
    assert len(captured) == 5, [q["sql"] for q in captured.captured_queries]
