"""The agent's Celery worker: one job at a time from its own queue `agent.<name>`.

It needs only a Redis URL and never sets Django up: the app has no fix-ups,
so Celery ignores DJANGO_SETTINGS_MODULE. (Where Django happens to be
installed, kombu's JSON module imports django.utils.functional; nothing more.)

Delivery (docs/decisions.md): a task is acknowledged when the job starts, not
when it ends. A benchmark can run for hours, longer than Redis' visibility
timeout, and an unacknowledged task would be delivered again mid-run. A job
lost before it was claimed (Redis lost its data, the agent died holding it)
is sent once more, with a new token, by the control worker's reaper; a
claimed run fails once the agent's heartbeats stop. A second delivery anyway
(a resend, two workers of one name) finds the run already claimed and is
dropped.

Authentication (docs/decisions.md): the agent signs every event with its
own secret (agents.worker.identity) and runs only jobs signed with it.

The pool is `threads` (`AgentPool`) with one thread: the job runs in the worker process,
next to the heartbeat thread and the event sink it shares with them (nothing
to fork with threads running, no state to pass between processes), while the
main thread keeps Celery's event loop turning, so the acknowledgement really
goes out when the job starts. (With the `solo` pool the job would block that
loop and the "early" acknowledgement would wait until the job ends.) Prefetch
is disabled, so no second task waits unacknowledged in the worker while a job
runs. The job's own work happens in PostgreSQL and pgbench processes.

Fetching: with prefetch disabled the event loop asks Redis for the next job
only when it looks again after a job ends, and nothing woke it: it looked on
its ~1 s poll timeout, so each job cost about a second on top of its work, and
a backlog of 1,500 cancelled jobs took most of 25 minutes to drop. The pool
(`AgentPool`) wakes the loop as each job ends; a job whose dispatch the lab
has cancelled is dropped before anything else is done for it (no claim, no
events: the lab already settled the run).

Shutdown: SIGTERM (or a first Ctrl-C) is Celery's warm shutdown: no new job
is taken, the running job finishes (which can take hours; heartbeats go on
meanwhile), then the worker exits. To stop sooner, cancel the run from the lab
first. SIGQUIT (cold shutdown) exits at once, leaving the run to the reaper
and the job's PostgreSQL server behind.
"""

import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

import redis
from celery import Celery
from celery.concurrency.thread import ApplyResult
from celery.concurrency.thread import TaskPool as ThreadPool
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    worker_ready,
    worker_shutdown,
)
from kombu.asynchronous import get_event_loop

from agents.config import AgentConfig
from agents.contract.host_allows import HostAllows
from agents.contract.redaction import redact_celery_logs
from agents.contract.signing import unsigned, verify
from agents.contract.vocabulary import PAIR_ROLES, JobOutcome, PairRole
from agents.contract.wire import (
    EVENTS_STREAM,
    EVENTS_STREAM_ENV,
    RUN_JOB_TASK,
    agent_queue,
    client_dispatch,
    dispatch_key,
)
from agents.duet import DuetSide, duet_sides, is_duet, run_duet
from agents.events import EventEmitter, Sink
from agents.job import run_job
from agents.job_cgroup import host_isolation, start_of_agent
from agents.observe.facts import collect_facts
from agents.observe.storage import target_space
from agents.pair.client_half import client_scratch, run_client_half
from agents.pair.link import PairLink, discard_left_spools
from agents.pgbench.latency_log import remove_dead_job_logs
from agents.postgres.cluster.leftovers import remove_leftover_clusters
from agents.postgres.installs.build_steps import git_build_lacks
from agents.postgres.installs.inventory import find_cached_installs, find_system_installs
from agents.postgres.osuser import check_sandbox, ensure_os_user
from agents.postgres.settings import catalogue_path, read_cached_catalogue
from agents.transport import (
    LIVE_HOLD_S,
    AgentEventEmitter,
    CancelWatcher,
    Heartbeat,
    RedisStreamSink,
    claim_run,
    redis_client,
    signing_sink,
)
from agents.worker.broker import broker_transport
from agents.worker.exactly_once import (
    answer_from_ledger,
    job_id_of_spec,
    ledger_sink,
    report_interrupted,
    unconfirmed_job_ids,
)
from agents.worker.exclusive import ExclusiveClaim, claim_agent
from agents.worker.identity import Identity, load_or_create_identity
from agents.worker.ledger import Ledger

logger = logging.getLogger(__name__)

# What the lab keeps of each storage target when an agent registers.
STORAGE_KEYS: tuple[Literal["path", "device", "filesystem"], ...] = ("path", "device", "filesystem")


class AgentPool(ThreadPool):
    """Celery's `threads` pool, waking the worker's event loop as each job ends, so the
    next job is fetched at once rather than on the loop's next poll timeout (~1 s)."""

    def on_apply(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        callback: Callable[..., Any] | None = None,
        accept_callback: Callable[..., Any] | None = None,
        **options: Any,
    ) -> ApplyResult:
        return super().on_apply(
            target, args, kwargs, _then_wake_loop(callback), accept_callback, **options
        )


def _then_wake_loop(callback: Callable[..., Any] | None) -> Callable[..., None]:
    """`callback` (Celery marks the job done, which lets the loop fetch), then a wake-up."""

    def done(*result: Any) -> None:
        try:
            if callback is not None:
                callback(*result)
        finally:
            loop = get_event_loop()
            if loop is not None:
                loop.call_soon(_look_again)

    return done


def _look_again() -> None:
    """Nothing: running on the event loop is the point (its next turn fetches a job)."""


app = Celery("benchlab_agent", fixups=[])
app.conf.update(
    # No --pool on the command line: the CLI takes only pool names, and without one
    # Celery uses this.
    worker_pool=f"{__name__}:AgentPool",
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_acks_late=False,
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    worker_concurrency=1,
    worker_disable_prefetch=True,
    broker_connection_retry_on_startup=True,
    # Wait out a Redis outage of any length (kombu backs off up to 30 s between
    # attempts) instead of ending the worker after 100 attempts.
    broker_connection_max_retries=None,
    # Cancels only late-acknowledged tasks, which the agent has none of: a broker
    # outage never stops a benchmark. Set to Celery 6's default to say so.
    worker_cancel_long_running_tasks_on_connection_loss=True,
    # The consumer's BRPOP waits 5 s for a job instead of 1 (a job still arrives at once):
    # each empty answer costs the agent CPU, also inside a measured window.
    broker_transport_options={"polling_interval": 5},
)


@dataclass
class Agent:
    """What the worker process keeps for its jobs: config, identity, Redis, the event
    sink (`signed` signs each event before `sink` sends it), the heartbeat, the ledger
    of the jobs it started and finished (agents.worker.ledger), and the claim that makes it
    the only worker of its name (agents.worker.exclusive)."""

    config: AgentConfig
    identity: Identity
    redis: redis.Redis
    sink: RedisStreamSink
    signed: Sink
    heartbeat: Heartbeat
    ledger: Ledger
    claim: ExclusiveClaim

    @classmethod
    def create(cls, config: AgentConfig, stream: str, claim: ExclusiveClaim) -> "Agent":
        identity = load_or_create_identity(config.state_dir, config.name)
        sink = RedisStreamSink(
            config.redis_url, config.spool_dir, stream=stream, hold_s=LIVE_HOLD_S
        )
        signed = signing_sink(sink, identity.secret)
        client = redis_client(config.redis_url)
        ledger = Ledger(config.state_dir, config.name)
        emitter = AgentEventEmitter([signed], config.name)
        targets = config.storage_targets()
        heartbeat = Heartbeat(
            emitter,
            finished=unconfirmed_job_ids(ledger, client),
            space=lambda: target_space(targets),
            instance=claim.token,
        )
        return cls(config, identity, client, sink, signed, heartbeat, ledger, claim)

    def start(self) -> None:
        """Send what the spool holds, register with the lab, start beating."""
        name, queue = self.config.name, agent_queue(self.config.name)
        logger.info("agent %s: serving queue %s, events to %s", name, queue, self.sink.stream)
        logger.warning(
            "agent %s: identity fingerprint %s (the hosts page shows it before approval)",
            name,
            self.identity.fingerprint,
        )
        self.sink.start()
        os_user = ensure_os_user(self.config.os_user, self.config.sandbox)
        check_sandbox(os_user)
        start_of_agent(self.config)
        lacks = git_build_lacks() if self.config.allow_source_builds else []
        if lacks:
            logger.warning(
                "agent %s: builds from a git clone need %s (apt-get install %s); release "
                "tarballs build without them",
                name, ", ".join(lacks), " ".join(lacks),
            )  # fmt: skip
        places = {**self.config.storage_targets(), "client halves": client_scratch(self.config)}
        removed = remove_leftover_clusters(places, os_user)
        if removed:
            logger.warning("agent %s: removed clusters left behind: %s", name, removed)
        unsent = discard_left_spools(self.config.spool_dir)
        if unsent:
            logger.warning("agent %s: dropped %d messages of runs it left", name, unsent)
        report_interrupted(self.ledger, [self.signed], name)
        remove_dead_job_logs(self.config.state_dir)
        try:
            register_agent(self.heartbeat.emitter, self.config, self.identity, self.claim.token)
        except Exception:
            # Heartbeats still tell the lab the agent is alive; a silent agent
            # would get its runs failed by the reaper.
            logger.exception("agent %s: registration failed; serving jobs anyway", name)
        self.heartbeat.start()

    def stop(self) -> None:
        self.heartbeat.stop()
        self.sink.close()
        self.redis.close()


_agent: Agent | None = None


def events_stream() -> str:
    """The stream events go to: `BENCHLAB_EVENTS_STREAM` (as on the web tier), else the default."""
    return os.environ.get(EVENTS_STREAM_ENV, EVENTS_STREAM)


def worker_argv(name: str, loglevel: str) -> list[str]:
    return [
        "worker",
        f"--queues={agent_queue(name)}",
        "--concurrency=1",
        "--prefetch-multiplier=1",
        f"--hostname=agent-{name}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        f"--loglevel={loglevel}",
    ]


def start_worker(config: AgentConfig, loglevel: str = "info") -> None:
    """Serve jobs from queue `agent.<config.name>` in this process until the worker is shut down.

    Events go to the stream `events_stream()` names. Raises WorkerConflict before anything
    else (the ledger, a registration, the queue) when another worker serves the same name or
    state directory (agents.worker.exclusive).
    """
    global _agent
    # Until Celery installs its own handler, SIGTERM ends the worker through `finally`
    # (Python's default would end it at once, leaving the name's lease to expire).
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    claim = claim_agent(redis_client(config.redis_url), config.state_dir, config.name)
    try:
        _agent = Agent.create(config, events_stream(), claim)
        app.conf.broker_url = config.redis_url
        app.conf.broker_transport = broker_transport(config.redis_url)
        worker_ready.connect(_start_agent, weak=False)
        worker_shutdown.connect(_stop_agent, weak=False)
        after_setup_logger.connect(redact_celery_logs, weak=False)
        after_setup_task_logger.connect(redact_celery_logs, weak=False)
        app.worker_main(argv=worker_argv(config.name, loglevel))
    finally:
        # However the worker ends short of a kill (a stop before it was ready too), the
        # name is free at once for the next worker.
        claim.release()


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _current_agent() -> Agent:
    if _agent is None:
        raise RuntimeError("the agent worker has not been started (start_worker)")
    return _agent


def _start_agent(**_signal: object) -> None:
    _current_agent().start()


class TaskSummary(TypedDict):
    """What the task returns, for the worker log (the lab reads events, not this)."""

    run_id: str | None
    status: JobOutcome | Literal["dropped", "refused", "duplicate", "answered"]
    error: NotRequired[str | None]


def _stop_agent(**_signal: object) -> None:
    _current_agent().stop()


@app.task(name=RUN_JOB_TASK)
def run_job_task(spec: object) -> TaskSummary:
    """Claim the run, execute it and stream its events; a job the ledger knows is answered
    from it, a second delivery of a claimed one dropped."""
    return execute(_current_agent(), spec)


def execute(agent: Agent, spec: object) -> TaskSummary:
    """The task's body; returns a short summary for the worker log.

    A job whose signature does not match this agent's secret is refused before
    anything else: it did not come from a lab that enrolled this agent. A second
    delivery of a claimed dispatch is dropped; a job the ledger holds under
    another dispatch (sent again by the reaper) or whose claim Redis lost is
    never run twice: `answer_from_ledger` sends its result again.
    """
    if not isinstance(spec, dict) or not isinstance(spec.get("run_id"), str) or not spec["run_id"]:
        logger.error("dropping a job spec without a run_id")
        return {"run_id": None, "status": "dropped"}
    run_id: str = spec["run_id"]
    if not verify("job", spec, agent.identity.secret):
        logger.error("run %s: refused: the job is not signed with this agent's secret", run_id)
        return {"run_id": run_id, "status": "refused"}
    agent.identity.confirm()
    spec = unsigned(spec)
    if is_duet(spec):
        return execute_duet(agent, spec, run_id)
    dispatch = dispatch_key(run_id, spec.get("token"))
    cancelled = CancelWatcher(agent.redis, dispatch)
    if cancelled():
        # The lab settled the run when it cancelled it queued: nothing to claim or report.
        logger.info("run %s: cancelled before it started, dropping the job", run_id)
        return {"run_id": run_id, "status": "cancelled"}
    role, peer = pair_of(spec)
    claimed = client_dispatch(dispatch) if role == "client" else dispatch
    if not claim_run(agent.redis, claimed, agent.config.name):
        logger.warning("run %s: already claimed, dropping this delivery", run_id)
        return {"run_id": run_id, "status": "duplicate"}
    job_id = job_id_of_spec(spec, run_id)
    if role != "client" and answered_from_ledger(agent, job_id, spec.get("token")):
        return {"run_id": run_id, "status": "answered"}
    link = PairLink.open(agent.config, dispatch, role, peer) if role != "local" and peer else None
    agent.heartbeat.set_running(run_id, job_id)
    try:
        if link is not None and role == "client":
            return serve_client_half(agent, spec, run_id, link, cancelled)
        entry = agent.ledger.start(job_id, run_id, spec.get("token"))
        emitter = EventEmitter(
            [ledger_sink(agent.ledger, entry), agent.signed],
            run_id=run_id,
            token=spec.get("token"),
            agent=agent.config.name,
        )
        result = run_job(spec, agent.config, emitter, cancelled, link=link)
    finally:
        agent.heartbeat.set_running(None)
    error, status = result["error"], result["status"]
    if status == "running":
        raise RuntimeError(f"run {run_id}: the job returned without an outcome")
    code = error["code"] if error else None
    logger.info("run %s: %s%s", run_id, status, f" ({code})" if code else "")
    return {"run_id": run_id, "status": status, "error": code}


def execute_duet(agent: Agent, document: dict[str, Any], run_id: str) -> TaskSummary:
    """Both sides of a duet (agents/duet.py) at once, each claimed, cancelled, kept in the
    ledger and reported under its own run. A second delivery finds the sides claimed and
    is dropped; a duet the ledger knows a side of is answered from there, not run again
    (a side it does not know is then settled by the lab as a lost job)."""
    specs = duet_sides(document)
    if not specs or not all(isinstance(spec.get("run_id"), str) for spec in specs):
        logger.error("run %s: dropping a duet without two job specs with run ids", run_id)
        return {"run_id": run_id, "status": "dropped"}
    dispatches = [dispatch_key(spec["run_id"], spec.get("token")) for spec in specs]
    if not all(claim_run(agent.redis, dispatch, agent.config.name) for dispatch in dispatches):
        logger.warning("run %s: a side of the duet is already claimed, dropping it", run_id)
        return {"run_id": run_id, "status": "duplicate"}
    job_ids = [job_id_of_spec(spec, spec["run_id"]) for spec in specs]
    known = [job_id for job_id in job_ids if agent.ledger.entry(job_id) is not None]
    if known:
        for job_id, spec in zip(job_ids, specs, strict=True):
            if job_id in known:
                answered_from_ledger(agent, job_id, spec.get("token"))
        return {"run_id": run_id, "status": "answered"}
    sides = []
    for job_id, spec, dispatch in zip(job_ids, specs, dispatches, strict=True):
        entry = agent.ledger.start(job_id, spec["run_id"], spec.get("token"))
        emitter = EventEmitter(
            [ledger_sink(agent.ledger, entry), agent.signed],
            run_id=spec["run_id"],
            token=spec.get("token"),
            agent=agent.config.name,
        )
        sides.append(DuetSide(spec, emitter, CancelWatcher(agent.redis, dispatch)))
    agent.heartbeat.set_running(specs[0]["run_id"], job_ids[0], job_ids[1])
    try:
        results = run_duet(document, agent.config, sides)
    finally:
        agent.heartbeat.set_running(None)
    outcomes = ", ".join(f"{result['run_id']} {result['status']}" for result in results)
    logger.info("duet %s: %s", document.get("key"), outcomes)
    failed = next((result for result in results if result["status"] != "succeeded"), None)
    status = failed["status"] if failed is not None else "succeeded"
    if status == "running":
        raise RuntimeError(f"duet {document.get('key')}: a side returned without an outcome")
    error = failed["error"] if failed is not None else None
    return {"run_id": run_id, "status": status, "error": error["code"] if error else None}


def answered_from_ledger(agent: Agent, job_id: str, token: str | None) -> bool:
    """Whether the ledger knows the job: then it is answered from there, not run.

    An entry still `started` belongs to an earlier agent process (this one runs
    one job at a time, and not this one): it is reported failed first.
    """
    entry = agent.ledger.entry(job_id)
    if entry is None:
        return False
    if entry.state == "started":
        report_interrupted(agent.ledger, [agent.signed], agent.config.name, [entry])
    logger.warning("run %s: job %s delivered again; answered from the ledger", entry.run_id, job_id)
    answer_from_ledger([agent.signed], entry, token, agent.config.name)
    return True


def pair_of(spec: dict[str, Any]) -> tuple[PairRole, str | None]:
    """The job's half of its run and the other half's agent, read before validation
    (the job validates the spec itself; a bad `network` section fails it there)."""
    network = spec.get("network")
    if not isinstance(network, dict):
        return "local", None
    role, peer = network.get("role"), network.get("peer")
    if role not in PAIR_ROLES or role == "local":
        return "local", None
    return role, peer if isinstance(peer, str) else None


def serve_client_half(
    agent: Agent, spec: dict[str, Any], run_id: str, link: PairLink, cancelled: CancelWatcher
) -> TaskSummary:
    """The client half: pgbench for the server half; it emits no run events (the server does).

    `cancelled` watches the run's cancel flag, which both halves share."""
    status = run_client_half(spec, agent.config, link, lambda: cancelled() or link.peer_gone())
    logger.info("run %s: client half %s", run_id, status)
    return {"run_id": run_id, "status": status}


def register_agent(
    emitter: EventEmitter, config: AgentConfig, identity: Identity, instance: str
) -> dict[str, Any]:
    """Emit `agent_register`: this host's facts, installs, storage targets and catalogues,
    the worker's instance token, whether its jobs get cgroups, what its config allows, and
    the agent's secret until a job signed with it showed the lab has it."""
    facts = collect_facts(config.storage_targets())
    installs = find_system_installs() + find_cached_installs(config.cache_dir)
    storage = {
        name: {key: target[key] for key in STORAGE_KEYS}
        for name, target in facts["storage"].items()
    }
    return emitter.emit(
        "agent_register",
        {
            "facts": facts,
            "installs": [install.as_dict() for install in installs],
            "storage": storage,
            "catalogues": cached_catalogues(config.cache_dir),
            "instance": instance,
            "isolation": host_isolation(),
            "allows": host_allows(config),
            **({} if identity.confirmed else {"secret": identity.secret}),
        },
    )


def host_allows(config: AgentConfig) -> HostAllows:
    """What this agent's local config lets jobs do, so the lab refuses the rest at review."""
    return {
        "allow_source_builds": config.allow_source_builds,
        "build_sources": list(config.build_sources),
        "allow_user_patches": config.allow_user_patches,
        "allow_shell_scripts": config.allow_shell_scripts,
        "allow_superuser_sql": config.allow_superuser_sql,
        "sandbox": config.sandbox,
    }


def cached_catalogues(cache_dir: Path) -> dict[str, dict[str, Any]]:
    """The pg_settings catalogues this agent has cached, by exact PostgreSQL version."""
    catalogues = {}
    for path in sorted(cache_dir.glob(catalogue_path(cache_dir, "*").name)):
        catalogue = read_cached_catalogue(path)
        if catalogue is not None:
            catalogues[catalogue.version] = catalogue.as_dict()
    return catalogues
