"""Errors services raise besides `JobError` (agents.contract.errors: input the agent refuses)."""

from agents.contract.errors import JobError


class Conflict(Exception):
    """The object is in a state that does not allow the action (e.g. cancel a finished run)."""

    code = "conflict"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InUse(Conflict):
    """The object cannot be deleted: `used_by` names what uses it ({"runs": [ids], ...})."""

    code = "in_use"

    def __init__(self, message: str, used_by: dict[str, list[int]]):
        super().__init__(message)
        self.used_by = used_by


class LimitReached(JobError):
    """Over a fair-use limit: `limit` is the setting's value, `current` what the user has or
    asked for, `setting` the setting's name. A user error (400), like any JobError."""

    def __init__(
        self, message: str, limit: int, current: int, setting: str, field: str | None = None
    ):
        super().__init__("limit_reached", message, field=field)
        self.limit = limit
        self.current = current
        self.setting = setting
