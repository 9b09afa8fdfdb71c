"""Events: the agent's running commentary on a job (docs/contracts.md, section 2).

Each event is an envelope (`version`, `run_id`, `token`, `agent`, `seq`,
`ts`) around a `type` tag and its `data`. Run events carry the run's id and
token; agent events (registration, heartbeats) carry the agent's name.
`validate_event` checks a document received from elsewhere once (the
envelope, and the data fields the lab relies on) and returns it as the typed
union `Event`, under today's names when an older agent sent a former one.
"""

from typing import Any, Literal, NotRequired, TypedDict, cast, get_args

from agents.contract.host_allows import HostAllows
from agents.contract.reports.cpu_profiles import CpuProfileResult
from agents.contract.reports.facts import Facts, Space
from agents.contract.reports.installs import InstallRecord
from agents.contract.reports.results import PointResult, ProgressLine, ResultDocument, Sample
from agents.contract.vocabulary import JobState, LogLevel

EVENT_VERSION = 1

RunEventType = Literal[
    "status", "step", "progress", "sample", "point", "cpu_profile", "log", "result"
]
AgentEventType = Literal["agent_register", "heartbeat"]
EventType = Literal[RunEventType, AgentEventType]
RUN_EVENT_TYPES: frozenset[str] = frozenset(get_args(RunEventType))
AGENT_EVENT_TYPES: frozenset[str] = frozenset(get_args(AgentEventType))
EVENT_TYPES: frozenset[str] = frozenset(get_args(EventType))
# A point's live events: the lab stores them in bulk, an agent worker sends them in bursts.
LIVE_EVENT_TYPES: frozenset[str] = frozenset({"progress", "sample"})
# Names an older agent sends for what is named otherwise now: event types, and the
# result document's keys.
FORMER_EVENT_TYPES: dict[str, str] = {"profile": "cpu_profile"}
FORMER_RESULT_KEYS: dict[str, str] = {"profiles": "cpu_profiles"}


class InvalidEvent(ValueError):
    """An event document that does not follow the contract."""


class StatusData(TypedDict):
    state: JobState
    message: str


class StepData(TypedDict):
    name: str
    percent: float | None
    message: str


class PointPosition(TypedDict):
    """Which point a live sample belongs to."""

    point: int
    clients: int
    repeat: int


class ProgressData(PointPosition, ProgressLine):
    """One `pgbench -P` line of the point being measured."""


class SampleData(PointPosition, total=False):
    """Samples of the point being measured: the host's and the server's of one tick
    together, or a client host's alone (`client_host`: the client host of a run with one)."""

    host: Sample
    server: Sample
    client_host: Sample


class LogData(TypedDict):
    level: LogLevel
    message: str


class RegistrationData(TypedDict):
    """What an agent reports on start: facts, installs, storage targets, catalogues,
    and its secret (agents.contract.signing) until a job signed with it arrived."""

    facts: Facts
    installs: list[InstallRecord]
    storage: dict[str, dict[str, Any]]
    catalogues: dict[str, dict[str, Any]]
    secret: NotRequired[str]
    # The worker process's token (agents/worker/exclusive.py): two tokens under one name
    # are two workers answering to it.
    instance: NotRequired[str]
    # Whether the host gives its jobs cgroups (agents/job_cgroup.py).
    isolation: NotRequired["JobIsolation"]
    # What the agent's local config lets jobs do (agents/contract/host_allows.py).
    allows: NotRequired[HostAllows]


class JobIsolation(TypedDict):
    """How the agent's jobs are bounded: `cgroups` "v1" or "v2", or None with the `problem`
    that keeps the host from giving them (it then refuses jobs running lab code)."""

    cgroups: str | None
    problem: str | None


class HeartbeatData(TypedDict):
    """What the agent runs now (`running`: run id, `job`: job id) and the jobs its ledger
    finished that the lab has not confirmed yet (`finished`: job ids). An agent without a
    ledger sends `running` only, and the lab then compares nothing."""

    running: str | None
    job: NotRequired[str | None]
    # A duet runs two jobs at once (agents/duet.py): `job` is its first side's, this
    # the second's.
    duet_job: NotRequired[str]
    finished: NotRequired[list[str]]
    # Total and free bytes per storage target, at most once a minute and when a job
    # starts or ends (the lab refuses a dataset that cannot fit).
    space: NotRequired[dict[str, Space]]
    # As in RegistrationData: the token of the worker process that sends it.
    instance: NotRequired[str]


class _Envelope(TypedDict):
    version: Literal[1]
    run_id: str | None
    token: str | None
    agent: str | None
    seq: int
    ts: str


class StatusEvent(_Envelope):
    type: Literal["status"]
    data: StatusData


class StepEvent(_Envelope):
    type: Literal["step"]
    data: StepData


class ProgressEvent(_Envelope):
    type: Literal["progress"]
    data: ProgressData


class SampleEvent(_Envelope):
    type: Literal["sample"]
    data: SampleData


class PointEvent(_Envelope):
    type: Literal["point"]
    data: PointResult


class CpuProfileEvent(_Envelope):
    """A point of the CPU-profile pass: never a measured point (agents/contract/reports/
    cpu_profiles.py)."""

    type: Literal["cpu_profile"]
    data: CpuProfileResult


class LogEvent(_Envelope):
    type: Literal["log"]
    data: LogData


class ResultEvent(_Envelope):
    type: Literal["result"]
    data: ResultDocument


class AgentRegisterEvent(_Envelope):
    type: Literal["agent_register"]
    data: RegistrationData


class HeartbeatEvent(_Envelope):
    type: Literal["heartbeat"]
    data: HeartbeatData


RunEvent = (
    StatusEvent
    | StepEvent
    | ProgressEvent
    | SampleEvent
    | PointEvent
    | CpuProfileEvent
    | LogEvent
    | ResultEvent
)
AgentEvent = AgentRegisterEvent | HeartbeatEvent
Event = RunEvent | AgentEvent


def validate_event(event: object) -> Event:
    """Check the envelope of an event received from elsewhere; return it typed, with
    today's names for any former ones (FORMER_EVENT_TYPES, FORMER_RESULT_KEYS)."""
    if not isinstance(event, dict):
        raise InvalidEvent("an event must be a JSON object")
    event = _current_names(event)
    if event.get("version") != EVENT_VERSION:
        raise InvalidEvent(f"unsupported event version {event.get('version')!r}")
    event_type = event.get("type")
    if event_type not in EVENT_TYPES:
        raise InvalidEvent(f"unknown event type {event_type!r}")
    if not isinstance(event.get("seq"), int) or event["seq"] < 1:
        raise InvalidEvent("seq must be a positive integer")
    if event_type in RUN_EVENT_TYPES and not event.get("run_id"):
        raise InvalidEvent(f"a {event_type} event needs a run_id")
    if event_type in AGENT_EVENT_TYPES and not event.get("agent"):
        raise InvalidEvent(f"a {event_type} event needs an agent name")
    if not isinstance(event.get("data"), dict):
        raise InvalidEvent("data must be a JSON object")
    _check_data(event_type, event["data"])
    return cast(Event, event)


def _current_names(event: dict[str, Any]) -> dict[str, Any]:
    """The event with a former type name or result key replaced by today's."""
    sent_type, data = event.get("type"), event.get("data")
    event_type = (
        FORMER_EVENT_TYPES.get(sent_type, sent_type) if isinstance(sent_type, str) else None
    )
    if event_type == "result" and isinstance(data, dict):
        data = {FORMER_RESULT_KEYS.get(key, key): value for key, value in data.items()}
    if event_type == sent_type and data is event.get("data"):
        return event
    return {**event, "type": event_type, "data": data}


# The data fields the lab relies on, by event type; the rest is read with defaults.
REQUIRED_DATA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "status": {"state": str},
    "progress": {"point": int, "t": (int, float)},
    "sample": {"point": int},
    "point": {"index": int},
    "cpu_profile": {"index": int, "folded": str},
    "result": {"status": str, "points": list},
}


def _check_data(event_type: str, data: dict[str, Any]) -> None:
    for name, kind in REQUIRED_DATA.get(event_type, {}).items():
        value = data.get(name)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise InvalidEvent(f"a {event_type} event needs data.{name} ({_kind_name(kind)})")
    if event_type == "result":
        for index, point in enumerate(data["points"]):
            if not isinstance(point, dict) or not isinstance(point.get("index"), int):
                raise InvalidEvent(f"data.points[{index}] must be a point with an index")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def is_agent_event(event: Event) -> bool:
    """Whether `event` is about the agent itself (run_id null) rather than a run."""
    return event["type"] in AGENT_EVENT_TYPES
