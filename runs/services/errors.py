"""Errors services raise besides `JobError` (agents.contract.errors: input the agent refuses)."""


class Conflict(Exception):
    """The object is in a state that does not allow the action (e.g. cancel a finished run)."""

    code = "conflict"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InUse(Conflict):
    """The object cannot be deleted: `used_by` names what uses it ({"runs": [ids], ...})."""

    code = "in_use"

    def __init__(self, message: str, used_by: dict[str, list]):
        super().__init__(message)
        self.used_by = used_by
