"""Errors with stable codes and categories (docs/contracts.md, section 3).

A user error names what to fix (a setting, a script, a spec field); an
application error is ours (a failed command, a lost agent, a bug); a
cancellation is neither. The code decides the category.
"""

from typing import Literal, TypedDict, get_args

Category = Literal["user", "application", "cancelled"]
USER: Category = "user"
APPLICATION: Category = "application"
CANCELLED: Category = "cancelled"

UserErrorCode = Literal[
    "invalid_spec",
    "unknown_setting",
    "invalid_setting_value",
    "refused_setting",
    "refused_script",
    # Workload SQL that needs superuser rights the workload role does not have.
    "refused_sql",
    "version_unavailable",
    "storage_unknown",
    # A storage target filled up during the job (field: storage.data or storage.wal); the
    # message names the target and what filled it.
    "disk_full",
    # Raised by the lab only: a dataset the target's last reported free space cannot hold.
    "insufficient_space",
    "setup_sql_failed",
    # Raised by the lab only: a comparison that cannot be saved as asked.
    "invalid_comparison",
    # Raised by the lab only: an experiment with no host, build, config or workload to run.
    "empty_matrix",
    # Raised by the lab only: jobs for a host whose agent an administrator has not approved.
    "host_not_approved",
    # Raised by the lab only: over a fair-use limit (queued runs per user, repeats).
    "limit_reached",
    # Source builds: a source the agent's local config does not allow, a missing
    # compiler or library (the message names the Debian packages), a failed step.
    "build_refused",
    "build_prerequisites",
    "build_failed",
    # A duet (two jobs at once on one host) the host cannot share fairly (fewer than two
    # CPUs), or whose sides would not measure the same windows (sweeps that differ).
    "duet_refused",
]
ApplicationErrorCode = Literal[
    "initdb_failed",
    "server_start_failed",
    "pgbench_init_failed",
    "pgbench_failed",
    "server_died",
    "agent_lost",
    # The agent stopped mid-job (killed, host rebooted) and came back: its ledger shows
    # the job started and not finished, or its heartbeats name another job.
    "agent_restarted",
    # A source build the host stopped, not the source: not fetched, a step killed or over
    # its time, out of disk or memory. A later job builds it again (a build_failed is not).
    "build_interrupted",
    # Raised by the lab only: a job Redis no longer holds, sent again and lost again.
    "job_lost",
    "internal_error",
    # A run with a client host: the other half stopped answering or ended with an error,
    # or never started within the spec's network.join_timeout_s.
    "peer_lost",
    "peer_absent",
    # A run with a client host whose agent could not reach Redis (the halves' only channel)
    # for longer than its grace (the agent's redis_grace_s); the message names how long.
    "redis_lost",
    # The host cannot build the sandbox job programs run in (bubblewrap missing, or no
    # user namespaces); the message names the fix for its operator.
    "sandbox_unavailable",
]
ErrorCode = Literal[UserErrorCode, ApplicationErrorCode, "cancelled"]

USER_CODES: frozenset[str] = frozenset(get_args(UserErrorCode))
APPLICATION_CODES: frozenset[str] = frozenset(get_args(ApplicationErrorCode))


class ErrorDocument(TypedDict):
    """How an error travels: in the result document, on a Run, in API answers."""

    code: ErrorCode
    category: Category
    field: str | None
    message: str


def category_of(code: ErrorCode) -> Category:
    """The category a code belongs to."""
    if code in USER_CODES:
        return USER
    if code in APPLICATION_CODES:
        return APPLICATION
    return CANCELLED


class JobError(Exception):
    """A failure with a stable code; `field` names the spec field to fix, where there is one."""

    def __init__(self, code: ErrorCode, message: str, field: str | None = None):
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.field = field
        self.category: Category = category_of(code)

    def as_dict(self) -> ErrorDocument:
        return {
            "code": self.code,
            "category": self.category,
            "field": self.field,
            "message": self.message,
        }

    def __str__(self) -> str:
        where = f"{self.field}: " if self.field else ""
        return f"{where}{self.message}"


class Cancelled(JobError):
    """The job was cancelled by the user; finished points are kept."""

    def __init__(self, message: str = "cancelled by the user"):
        super().__init__("cancelled", message)
