"""Share-link tokens kept out of the web tier's logs.

A share link's token is its only secret (the lab keeps a digest of it), and it
travels in the URL path (`/s/<token>/...`), which uvicorn's access log and
Django's "Not Found"/"Gone" lines print. `ShareTokenFilter` keeps its first
characters, enough to tell links apart in a log, and masks the rest, in a
record's message and in its arguments (uvicorn's access formatter reads the
path from the arguments). settings.LOGGING puts it on the lab's own handler;
`redact_web_logs` on the handlers uvicorn configured before it loaded the app and
on Django's own (its console handler prints "Not Found: <path>" with DEBUG on).
"""

import logging
import re

# How much of a share-link token a log line keeps: enough to tell links apart.
SHARE_TOKEN_SHOWN = 6
SHARE_PATH = re.compile(rf"(/s/[A-Za-z0-9_-]{{{SHARE_TOKEN_SHOWN}}})[A-Za-z0-9_-]+")
MASK = "***"
WEB_LOGGERS = ("uvicorn.access", "uvicorn.error", "django")


def redact_share_tokens(text: str) -> str:
    """`text` with every share-link path's token cut to its first characters."""
    return SHARE_PATH.sub(rf"\1{MASK}", text)


def _redacted(value: object) -> object:
    return redact_share_tokens(value) if isinstance(value, str) else value


class ShareTokenFilter(logging.Filter):
    """Mask share-link tokens in a record's message and arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_share_tokens(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _redacted(value) for key, value in record.args.items()}
        return True


def redact_web_logs() -> None:
    """Put a ShareTokenFilter on each handler of uvicorn's and Django's loggers (once)."""
    for name in WEB_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, ShareTokenFilter) for f in handler.filters):
                handler.addFilter(ShareTokenFilter())
