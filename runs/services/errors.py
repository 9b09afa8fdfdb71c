"""Errors services raise besides `agents.errors.JobError` (a spec the agent would refuse)."""


class Conflict(Exception):
    """The object is in a state that does not allow the action (e.g. cancel a finished run)."""

    code = "conflict"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
