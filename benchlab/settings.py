"""BenchLab settings, driven by the environment.

With no environment at all a local start works: DEBUG off, a secret key
generated into var/secret-key, SQLite at var/benchlab.sqlite3 (var/ 0700, the
file 0600), Redis on 127.0.0.1. DEBUG=true (scripts/lab --dev) is for
development on loopback only. Production sets at least SECRET_KEY (or
SECRET_KEY_FILE), DATABASE_URL, REDIS_URL and ALLOWED_HOSTS.
"""

import ipaddress
import os
import secrets
from pathlib import Path
from typing import overload

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from agents.contract.wire import (
    EVENTS_STREAM,
    EVENTS_STREAM_ENV,
    EVENTS_STREAM_MAXLEN,
    EVENTS_STREAM_MAXLEN_ENV,
)

# Django's generic classes (ModelForm[Workload], ModelAdmin[Run]) subscriptable at run time,
# as django-stubs has them for the type checker.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    """A string from `NAME`, or from the file named by `NAME_FILE` (for secrets)."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {file_name}: {exc}") from exc
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    """A boolean from `NAME`: 1/true/yes/on or 0/false/no/off."""
    value = os.environ.get(name)
    if value is None:
        return default
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), not {value!r}")


def env_int(name: str, default: int) -> int:
    """An integer from `NAME`."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list from `NAME`."""
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def is_loopback(address: str) -> bool:
    """`127.0.0.1`, `::1`, `[::1]` and `localhost` are loopback; `0.0.0.0` is not."""
    host = address.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def private_dir(path: Path) -> Path:
    """`path` as a directory only its owner can enter (0700), created if missing."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def private_file(path: Path) -> Path:
    """`path` as a file only its owner can read (0600), created empty if missing."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    path.chmod(0o600)
    return path


def generated_secret_key(path: Path) -> str:
    """The secret key kept in `path` (0600), generated on first use.

    Written to a temporary file and linked into place, so processes starting
    together all read the one key that won.
    """
    if not path.exists():
        private_dir(path.parent)
        temporary = private_file(path.with_name(f".{path.name}.{os.getpid()}"))
        temporary.write_text(secrets.token_urlsafe(48) + "\n")
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process generated it first: use that one
        finally:
            temporary.unlink()
    return path.read_text().strip()


# The address the web server listens on; scripts/lab and the container pass
# the same value to uvicorn. DEBUG (tracebacks, settings and SQL on error
# pages) is off unless DEBUG=true (scripts/lab --dev), and refused off loopback.
BENCHLAB_BIND = env_str("BENCHLAB_BIND", "127.0.0.1") or "127.0.0.1"
DEBUG = env_bool("DEBUG", False)
if DEBUG and not is_loopback(BENCHLAB_BIND):
    raise ImproperlyConfigured(
        f"DEBUG=true would show tracebacks to anyone who can reach {BENCHLAB_BIND}: "
        "set DEBUG=false, or bind the web server to 127.0.0.1 (BENCHLAB_BIND)"
    )

# The lab's private files (SQLite database, secret key, admin password, logs).
VAR_DIR = BASE_DIR / "var"
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not is_loopback(BENCHLAB_BIND):
        raise ImproperlyConfigured(
            f"SECRET_KEY (or SECRET_KEY_FILE) is required when the lab serves {BENCHLAB_BIND}"
        )
    SECRET_KEY = generated_secret_key(VAR_DIR / "secret-key")

LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"]
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", LOOPBACK_HOSTS if is_loopback(BENCHLAB_BIND) else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "runs",
]

MIDDLEWARE = [
    *(["benchlab.debug_guard.LoopbackOnlyWhileDebug"] if DEBUG else []),
    "django.middleware.security.SecurityMiddleware",
    "benchlab.security.ContentSecurityPolicy",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "benchlab.throttle.SignInThrottle",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "benchlab.view_errors.ViewFailureLog",
]

ROOT_URLCONF = "benchlab.urls"
WSGI_APPLICATION = "benchlab.wsgi.application"
ASGI_APPLICATION = "benchlab.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# SQLite serves several writers (web, control worker): WAL journal, a generous
# busy timeout and IMMEDIATE transactions so writers queue instead of failing.
SQLITE_PATH = Path(env_str("SQLITE_PATH", str(BASE_DIR / "var" / "benchlab.sqlite3")))
SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        DATABASES["default"]["OPTIONS"] = dict(SQLITE_OPTIONS)
        _sqlite_file = Path(str(DATABASES["default"]["NAME"]))
        if _sqlite_file.parent.is_dir() and str(_sqlite_file) not in ("", ":memory:"):
            private_file(_sqlite_file)  # SQLite gives its -wal and -shm files the same mode
else:
    # Readable by the lab's user only: it holds the agents' secrets and the lab's data.
    if SQLITE_PATH.parent == VAR_DIR:
        private_dir(VAR_DIR)
    SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)
    private_file(SQLITE_PATH)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(SQLITE_PATH),
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = env_str("LOGIN_URL", "/accounts/login/")
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
# Only for an optional `collectstatic` (e.g. behind a CDN); unset, nothing is collected.
_STATIC_ROOT = env_str("STATIC_ROOT")
STATIC_ROOT = Path(_STATIC_ROOT) if _STATIC_ROOT else None
STATICFILES_DIRS = [BASE_DIR / "frontend"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "runs.staticfiles.PlotlyFinder",
]
# whitenoise serves frontend/, the admin's files and plotly.js straight from
# the finders (indexed once at start), so no collectstatic step is needed;
# files collected into STATIC_ROOT (when set) are served too.
WHITENOISE_USE_FINDERS = True
WHITENOISE_MAX_AGE = env_int("STATIC_MAX_AGE_S", 3600)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an unauthenticated request then gets 401 with
        # `WWW-Authenticate: Token`, not a bare 403.
        "runs.api.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "runs.api.pagination.StrictPageNumberPagination",
    # The API speaks JSON only: forms cannot say null or nest objects.
    "DEFAULT_PARSER_CLASSES": ["runs.api.parsers.JSONParser"],
    "PAGE_SIZE": env_int("API_PAGE_SIZE", 50),
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "runs.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "runs.api.errors.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "BenchLab API",
    "DESCRIPTION": "Describe pgbench experiments, run them on agents, read the results.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from the pinned drf-spectacular-sidecar package, served as the lab's own
    # static files: the docs page works without internet and loads nothing from elsewhere.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Redis: the Celery broker and the event stream agents append to.
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# Regression mode (runs.services.history.series): series schedules live in the lab database
# (django-celery-beat); the control worker runs the beat scheduler (scripts/lab), one
# per lab database: it holds a Redis lock, refreshed while it lives (runs.control.beat).
CELERY_BEAT_SCHEDULER = "runs.control.beat:LockedDatabaseScheduler"
BENCHLAB_BEAT_LOCK_TTL_S = env_int("BENCHLAB_BEAT_LOCK_TTL_S", 30)
# Alert mail (optional, per series): Django's SMTP mail.
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "benchlab@localhost")

# Event ingestion and liveness (docs/contracts.md, section 4).
BENCHLAB_EVENTS_STREAM = env_str(EVENTS_STREAM_ENV, EVENTS_STREAM)
BENCHLAB_EVENTS_GROUP = env_str("BENCHLAB_EVENTS_GROUP", "control")
HEARTBEAT_OFFLINE_AFTER_S = env_int("HEARTBEAT_OFFLINE_AFTER_S", 30)
AGENT_LOST_GRACE_S = env_int("AGENT_LOST_GRACE_S", 90)
REAPER_INTERVAL_S = env_int("REAPER_INTERVAL_S", 10)
# A queued run whose job is neither in its agent's queue nor claimed this long
# after it was sent is sent again, then failed (runs.services.hosts.liveness).
JOB_LOST_AFTER_S = env_int("JOB_LOST_AFTER_S", 60)
BENCHLAB_INGEST_IN_WORKER = env_bool("BENCHLAB_INGEST_IN_WORKER", True)
# Event rows that only keep an event from being stored twice (progress, sample,
# point, result) are deleted this many days after their run finished; 0 keeps them.
BENCHLAB_EVENT_RETENTION_DAYS = env_int("BENCHLAB_EVENT_RETENTION_DAYS", 30)
# Source tarballs uploaded for source builds (runs.services.uploads): files in
# SOURCE_UPLOAD_DIR, at most SOURCE_UPLOAD_MAX_MB each and SOURCE_UPLOAD_QUOTA_MB per
# user, deleted with their build; copied into Redis for the jobs that build them, where
# the copy expires SOURCE_UPLOAD_READY_HOURS after the last job that needed it was sent.
SOURCE_UPLOAD_DIR = Path(env_str("SOURCE_UPLOAD_DIR", str(BASE_DIR / "var" / "source-uploads")))
SOURCE_UPLOAD_MAX_MB = env_int("SOURCE_UPLOAD_MAX_MB", 256)
SOURCE_UPLOAD_QUOTA_MB = env_int("SOURCE_UPLOAD_QUOTA_MB", 1024)
SOURCE_UPLOAD_READY_HOURS = env_int("SOURCE_UPLOAD_READY_HOURS", 48)


# Fair use (one user's share of the queue) and outbound requests (where webhooks go) -------
# One user's runs that are not final yet (queued or running), across experiments, re-runs
# and series; staff are exempt (docs/decisions.md). The repeats of one experiment apply to
# everyone: in rounds each repeat is a run of every cell (runs.services.limits).
BENCHLAB_MAX_QUEUED_RUNS_PER_USER = env_int("BENCHLAB_MAX_QUEUED_RUNS_PER_USER", 200)
BENCHLAB_MAX_REPEATS = env_int("BENCHLAB_MAX_REPEATS", 50)
for _name in ("BENCHLAB_MAX_QUEUED_RUNS_PER_USER", "BENCHLAB_MAX_REPEATS"):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name} must be at least 1, not {globals()[_name]}")


def env_networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Comma-separated CIDRs (`10.1.2.0/24, fd00::/8`) from `NAME`."""
    try:
        return [ipaddress.ip_network(item, strict=False) for item in env_list(name, [])]
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must list CIDRs such as 10.1.2.0/24: {exc}") from exc


# Webhooks go to public addresses only; these networks (loopback, private, ...) are allowed
# too (runs.services.history.webhooks).
BENCHLAB_WEBHOOK_ALLOWED_NETWORKS = env_networks("BENCHLAB_WEBHOOK_ALLOWED_NETWORKS")
# ------------------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    # No secret in a log line (agents.contract.redaction): payloads, URLs, tracebacks.
    # Nor a share link's token (benchlab.log_redaction): request paths carry it.
    "filters": {
        "redact": {"()": "agents.contract.redaction.RedactingFilter"},
        "share_tokens": {"()": "benchlab.log_redaction.ShareTokenFilter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["share_tokens", "redact"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# --- Secrets, streams and safe defaults: nothing unbounded, nothing secret in the
# repository (docs/decisions.md). Kept in a block of their own.

# Streams: every one capped; dead letters also expire (runs.control.consumer).
BENCHLAB_EVENTS_MAXLEN = env_int(EVENTS_STREAM_MAXLEN_ENV, EVENTS_STREAM_MAXLEN)
BENCHLAB_DEAD_LETTER_MAXLEN = env_int("BENCHLAB_DEAD_LETTER_MAXLEN", 10_000)
BENCHLAB_DEAD_LETTER_MAX_AGE_S = env_int("BENCHLAB_DEAD_LETTER_MAX_AGE_S", 7 * 24 * 3600)

# Error reports and the debug page mask URL passwords too (REDIS_URL, DATABASE_URL).
DEFAULT_EXCEPTION_REPORTER_FILTER = "benchlab.security.RedactingReporterFilter"

# Failed sign-ins and API token attempts, per credential and client address
# (benchlab.throttle): past AUTH_FAILURE_LIMIT failures of one credential from one address
# its passwords wait out the window unchecked, past AUTH_ADDRESS_FAILURE_LIMIT an address's
# passwords do; a valid token always works.
AUTH_FAILURE_LIMIT = env_int("BENCHLAB_AUTH_FAILURE_LIMIT", 10)
AUTH_ADDRESS_FAILURE_LIMIT = env_int("BENCHLAB_AUTH_ADDRESS_FAILURE_LIMIT", 100)
AUTH_FAILURE_WINDOW_S = env_int("BENCHLAB_AUTH_FAILURE_WINDOW_S", 900)
# The reverse proxies whose X-Forwarded-For (and, to uvicorn in scripts/lab, -Proto) the
# lab believes, as addresses or CIDRs (`127.0.0.1, 10.0.0.0/8`); none by default: the
# client is then the peer of the connection, whatever a header says.
BENCHLAB_TRUSTED_PROXIES = env_networks("BENCHLAB_TRUSTED_PROXIES")

# TLS: whether people reach the lab over https (uvicorn's own TLS, scripts/lab's
# BENCHLAB_TLS_CERT/KEY, or a proxy in front). Assumed off loopback, where it
# brings Secure cookies, the redirect to https and HSTS. A proxy on another
# host says https with a header: SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https"
# (uvicorn in scripts/lab believes X-Forwarded-Proto from BENCHLAB_TRUSTED_PROXIES only).
BENCHLAB_TLS = env_bool("BENCHLAB_TLS", not is_loopback(BENCHLAB_BIND))
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = BENCHLAB_TLS
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = BENCHLAB_TLS
_proxy_ssl_header = env_list("SECURE_PROXY_SSL_HEADER", [])
if _proxy_ssl_header:
    if len(_proxy_ssl_header) != 2:
        raise ImproperlyConfigured(
            "SECURE_PROXY_SSL_HEADER must be a header and its value, e.g. "
            "HTTP_X_FORWARDED_PROTO,https"
        )
    SECURE_PROXY_SSL_HEADER = (_proxy_ssl_header[0], _proxy_ssl_header[1])
SECURE_HSTS_SECONDS = env_int(
    "SECURE_HSTS_SECONDS", 365 * 24 * 3600 if BENCHLAB_TLS and not is_loopback(BENCHLAB_BIND) else 0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Preloading is a request to browser vendors that only a domain's owner can make.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD or not SECURE_HSTS_SECONDS else ["security.W021"]

# Content-Security-Policy (benchlab.security): every page, the API docs included, loads
# scripts from the lab's own files only; styles may be inline (plotly.js and Swagger UI
# style their elements so).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'; "
    "script-src 'self'; style-src 'self' 'unsafe-inline'"
)
