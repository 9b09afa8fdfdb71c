"""The names both halves of the lab use on Redis and Celery (docs/contracts.md).

Jobs: the Celery task `RUN_JOB_TASK` with the job spec as its only argument,
sent to the agent's own queue `agent_queue(name)`. Claims and cancels: plain
keys named by one dispatch of a run. Events: appended to a Redis Stream; those
the control worker cannot store are kept in its dead-letter stream.
"""

RUN_JOB_TASK = "benchlab.agent.run_job"
AGENT_QUEUE_PREFIX = "agent."

EVENTS_STREAM = "benchlab:events"
EVENTS_STREAM_ENV = "BENCHLAB_EVENTS_STREAM"
EVENT_FIELD = "event"

# Every stream is capped (XADD MAXLEN ~): the events stream holds only what the
# control worker has not stored yet (it deletes each entry once stored), so its
# cap is a backlog of many hours of many runs, reached only when the control
# worker is down that long; it keeps Redis from filling up meanwhile.
EVENTS_STREAM_MAXLEN = 1_000_000
EVENTS_STREAM_MAXLEN_ENV = "BENCHLAB_EVENTS_MAXLEN"

# Claims and cancel flags outlive any benchmark, then expire on their own.
DISPATCH_KEY_TTL_S = 7 * 24 * 3600


def agent_queue(agent: str) -> str:
    """The Celery queue the agent named `agent` listens on."""
    return f"{AGENT_QUEUE_PREFIX}{agent}"


def dispatch_key(run_id: str, token: str | None) -> str:
    """One dispatch of a run: its id and its random token.

    Run ids alone repeat (a new lab database numbers from 1 again); with the token
    a claim or cancel flag left by an earlier lab can never match a new run.
    """
    return f"{run_id}:{token or ''}"


def claim_key(dispatch: str) -> str:
    """The key an agent sets (NX) to take a dispatch; a second delivery finds it taken."""
    return f"benchlab:claim:{dispatch}"


def cancel_key(dispatch: str) -> str:
    """The flag the lab sets to cancel a dispatch; the agent polls it."""
    return f"benchlab:cancel:{dispatch}"


def job_id_of(run_id: str, nonce: str) -> str:
    """A job's id: its run and an id drawn at the run's first dispatch (kept by later ones)."""
    return f"{run_id}:{nonce}"


def settled_key(job_id: str) -> str:
    """The key the lab sets once it stored a job's result: the agent's ledger confirms it."""
    return f"benchlab:settled:{job_id}"


def pair_key(dispatch: str, part: str) -> str:
    """A key the two halves of a run with a client host talk through (agents/pair/link.py):
    `to-server`, `to-client` (message lists) and `alive:server`, `alive:client`."""
    return f"benchlab:pair:{dispatch}:{part}"


def client_dispatch(dispatch: str) -> str:
    """The client half's own dispatch name for its claim (the cancel flag is the run's)."""
    return f"{dispatch}:client"


def dead_letter_stream(stream: str) -> str:
    """Where events of `stream` that cannot be stored are kept, with the reason."""
    return f"{stream}:dead"


# Source tarballs uploaded to the lab for source builds, by sha256: the lab copies one here
# (with an expiry) when it sends a job that builds it; the agent reads it.
SOURCE_UPLOAD_PREFIX = "benchlab:source-upload:"


def source_upload_key(sha256: str) -> str:
    """The Redis key holding the bytes of an uploaded source tarball."""
    return f"{SOURCE_UPLOAD_PREFIX}{sha256}"


# One worker per agent name (agents/worker/exclusive.py): the running worker holds this key,
# renewed while it lives; a worker killed leaves it to expire after AGENT_LEASE_S.
AGENT_LEASE_S = 30
AGENT_LEASE_ENV = "BENCHLAB_AGENT_LEASE_S"


def agent_lease_key(agent: str) -> str:
    """The key the worker serving `agent` holds (SET NX with a TTL) while it runs."""
    return f"benchlab:agent-lease:{agent}"
