"""Errors with stable codes and categories, as described in docs/contracts.md."""

USER = "user"
APPLICATION = "application"
CANCELLED = "cancelled"

USER_CODES = {
    "invalid_spec",
    "unknown_setting",
    "invalid_setting_value",
    "refused_setting",
    "refused_script",
    "version_unavailable",
    "storage_unknown",
    "setup_sql_failed",
}


class JobError(Exception):
    """A failure with a stable code; `field` names the spec field to fix, where there is one."""

    def __init__(
        self, code: str, message: str, field: str | None = None, category: str | None = None
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        if category is None:
            category = USER if code in USER_CODES else APPLICATION
        self.category = category

    def as_dict(self) -> dict:
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
        super().__init__("cancelled", message, category=CANCELLED)
