"""Flowport settings: one module, driven by environment variables.

Every variable is listed in README.md and `.env.example`. Defaults give the
embedded mode (SQLite, a serverless Celery broker, Spark `local[*]`), so a
fresh clone runs with no configuration at all.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from pathlib import Path
from typing import NoReturn

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from portal.crypto.secret_file import SecretFileError, read_secret_file

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true/false)")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


def stop(message: str) -> NoReturn:
    """Stop this process at start with one line (no traceback), exit status 3: gunicorn's
    arbiter takes a worker that exits 3 while booting as "failed to boot" and halts, where any
    other status makes it boot a new worker every second for ever, listening meanwhile."""
    print(f"Flowport cannot start: {message}", file=sys.stderr)
    sys.exit(3)


def env_secret(name: str) -> str:
    """A secret from `NAME` or from the file named by `NAME_FILE` (Docker/K8s style). A file
    that is not there stops the process with one line saying so (and, for SECRET_KEY_FILE,
    the command that makes it): every process would fail on it, and a traceback hides why."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return read_secret_file(name, path)
        except SecretFileError as error:
            stop(str(error))
    return os.environ.get(name, "")


VAR_DIR = Path(env("FLOWPORT_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _generated_secret_key() -> str:
    """Made once into var/ so sessions survive restarts; never a literal in code."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = env_secret("SECRET_KEY") or _generated_secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")


def site_url_from_bind(bind: str) -> str:
    """Where links in e-mails and webhooks point when SITE_URL is not set: the
    address `make run BIND=host:port` serves (FLOWPORT_BIND, which every
    process of `make run` sees). A wildcard address (0.0.0.0, ::) is nowhere
    to send anyone, so it stands for this machine's name."""
    host, _, port = bind.strip().rpartition(":")
    if not host or not port.isdigit():
        return "http://127.0.0.1:8000"  # a unix socket or no bind: the default address
    host = host.strip("[]")
    if host in ("0.0.0.0", "::", "*"):  # noqa: S104 - recognising a wildcard bind, not binding
        host = socket.gethostname() or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


SITE_URL = env("SITE_URL") or site_url_from_bind(env("FLOWPORT_BIND", "127.0.0.1:8000"))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # intcomma: record counts with thousands separators
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served by the portal itself: no CDN, works offline
    "django_htmx",
    "portal.accounts",
    "portal.events",
    "portal.templatepacks",
    "portal.topology",
    "portal.quotas",
    "portal.flows",
    "portal.orchestration",
    "portal.keys",
    "portal.monitoring",
    "portal.restli",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.middleware.RequestSizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Innermost: an empty 405 from a view becomes a page (or JSON) before the rest see it.
    "portal.middleware.MethodNotAllowedMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.events.context_processors.unread_notifications",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'flowport.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if not DATABASES["default"]["ENGINE"].endswith(("postgresql", "sqlite3")):
    # The portal's own tables are built and tested on these two; MySQL/MariaDB
    # stops half-way through the migrations (MariaDB 10.11: 65 of 77 applied, then
    # orchestration.0017's index is longer than InnoDB allows), and past that it has
    # none of the conditional unique constraints the exactly-once rules rest on
    # (Django's models.W036 on 8 of them: event dedupe, customer keys, actions,
    # executions), so say so before anything is written. A MySQL/MariaDB server is
    # a data node, not the portal's database.
    stop(
        f"DATABASE_URL names a {DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]} database: the portal's "
        "own database must be PostgreSQL (postgres://…) or SQLite (sqlite:///…): its exactly-once rules "
        "rest on partial unique indexes, which MySQL and MariaDB do not have. MySQL and MariaDB "
        "servers are welcome as data nodes."
    )
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several processes (web, worker, scheduler) share the file: wait for locks
    # instead of failing, and take the write lock at BEGIN so a read never has
    # to be upgraded mid-transaction (the usual "database is locked" cause).
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# LDAP is put in front of this in the Identity section below when configured.
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "frontend"]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY") else None

# A request body over this is answered 413 before any view parses it.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BYTES", 1024 * 1024)
# Multipart bodies (template pack archives) to these paths have their own, larger limit;
# every other body under them (ACL and template edit forms) keeps the one above.
LARGE_UPLOAD_PATHS = ("/api/templatepacks", "/packs/")
MAX_UPLOAD_BYTES = env_int("MAX_UPLOAD_BYTES", 20 * 1024 * 1024)

REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header turns anonymous calls into 401s.
    # Each class also honours X-Flowport-Proxy-User (portal.accounts.authentication).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.accounts.authentication.TokenAuthentication",
        "portal.accounts.authentication.SessionAuthentication",
        "portal.accounts.authentication.BasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["portal.api_parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": env_int("API_PAGE_SIZE", 50),
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "portal.api_errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Flowport API",
    "DESCRIPTION": "Self-service data integration: flows, template packs, topology, executions.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Closed by default; portal/urls.py lets anyone in when API_SCHEMA_PUBLIC is set.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Three models name a field "role" with different choices; each gets its own enum name.
    "ENUM_NAME_OVERRIDES": {
        "DataNodeGrantRoleEnum": "portal.topology.models.DataNodeGrant.Role",
        "DataNodeAccessRoleEnum": "portal.topology.models.DataNodeAccessRequest.Role",
        "PackGrantRoleEnum": "portal.templatepacks.models.PackAcl.Role",
    },
}
# /api/schema/ and /api/docs/ for anonymous visitors too (default: signed-in users only).
API_SCHEMA_PUBLIC = env_bool("API_SCHEMA_PUBLIC", False)

# --- Celery -------------------------------------------------------------------
CELERY_BROKER_URL = env("CELERY_BROKER_URL", f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite3'}")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
# A job is acknowledged only when it finished; a worker killed mid-job gives
# the message back to the broker, and the consumer's dedup makes that safe.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 6 * 3600)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 6 * 3600 + 300)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker rides out a broker outage of any length: it retries for ever (at
# most every 30 s) instead of giving up after Celery's default 100 attempts.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A job running when the broker goes away runs on; it reports through the
# database, and its acknowledgement reaches the broker once it is back.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
if CELERY_BROKER_URL.split("://", 1)[0] in ("redis", "rediss"):
    # kombu's Redis transport with the fix for a worker that died after a
    # broker outage (see the module's docstring).
    CELERY_BROKER_TRANSPORT = "portal.redis_transport:Transport"
    # A worker notices a broker that went away (or a half-open connection)
    # within ~10 s, not kombu's default 25-51 s, so its executors turn
    # DEGRADED while the outage lasts. The cost is one PING per idle 10 s.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"health_check_interval": 10}
    if CELERY_BROKER_URL.startswith("rediss://") and "ssl_cert_reqs=" not in CELERY_BROKER_URL:
        # Naming the transport skips kombu's fallback for a bare rediss://
        # URL (TLS without checking the certificate); check it instead.
        import ssl

        CELERY_BROKER_USE_SSL = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_DEFAULT_QUEUE", "flowport")
CELERY_TIMEZONE = TIME_ZONE

# --- Spark --------------------------------------------------------------------
SPARK_MASTER = env("SPARK_MASTER", "local[*]")
POSTGRES_JDBC_JAR = env("POSTGRES_JDBC_JAR", "/usr/share/java/postgresql.jar")
FLOWPORT_DATA_DIR = Path(env("FLOWPORT_DATA_DIR", str(VAR_DIR / "data")))
# A data node with no grant: "closed" (staff only until an administrator grants it) or "open"
# (everyone, until its first grant restricts it). docs/security.md.
DATA_NODE_DEFAULT_ACCESS = env("DATA_NODE_DEFAULT_ACCESS", "closed")
if DATA_NODE_DEFAULT_ACCESS not in ("closed", "open"):
    raise ImproperlyConfigured("DATA_NODE_DEFAULT_ACCESS must be 'closed' or 'open'.")
# What the data nodes users make for themselves may reach (portal/topology/policy.py): their kinds,
# the database servers (host:port patterns, as written in the URL), their folders (under
# FLOWPORT_DATA_DIR unless absolute; {user} and {group} are names) and how many one user may make.
USER_NODE_KINDS = env_list("USER_NODE_KINDS", "jdbc,files,iceberg")
USER_NODE_DATABASE_HOSTS = env_list(
    "USER_NODE_DATABASE_HOSTS", "127.0.0.1:5432,localhost:5432,127.0.0.1:3306,localhost:3306"
)
# The databases their JDBC nodes and Iceberg catalogs may land in (patterns matched on the database
# the server says the connection landed in; {user} and {group} are names), logged in with the
# password the user gave as a role with no server-wide privilege (docs/security.md); a replication
# role only for a change-data-capture source, and only when allowed here.
USER_NODE_DATABASES = env_list("USER_NODE_DATABASES", "{user},{user}_*,{group}_*")
USER_NODE_ALLOW_REPLICATION = env_bool("USER_NODE_ALLOW_REPLICATION", False)
USER_NODE_FILES_AREAS = env_list("USER_NODE_FILES_AREAS", "users/{user},groups/{group}")
USER_NODE_MAX_PER_USER = env_int("USER_NODE_MAX_PER_USER", 20)

LOG_LEVEL = env("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"refusals_in_one_line": {"()": "portal.logfilters.RefusalsInOneLine"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "django.request": {"filters": ["refusals_in_one_line"]},
    },
}

# --- Identity: LDAP, API tokens, proxy users -----------------------------------
# No LDAP_SERVER_URI = Django's own users only (the embedded default).
LDAP_SERVER_URI = env("LDAP_SERVER_URI")
LDAP_DIRECTORY_NAME = env("LDAP_DIRECTORY_NAME")  # shown on the login page, e.g. "ACME corporate LDAP"
if LDAP_SERVER_URI:
    from portal.accounts.ldap_config import auth_ldap_settings

    globals().update(
        auth_ldap_settings(
            server_uri=LDAP_SERVER_URI,
            bind_dn=env("LDAP_BIND_DN"),
            bind_password=env_secret("LDAP_BIND_PASSWORD"),
            user_search_base=env("LDAP_USER_SEARCH_BASE"),
            user_filter=env("LDAP_USER_FILTER", "(uid=%(user)s)"),
            group_search_base=env("LDAP_GROUP_SEARCH_BASE"),
            group_type=env("LDAP_GROUP_TYPE", "groupOfNames"),
            require_group=env("LDAP_REQUIRE_GROUP"),
            staff_group=env("LDAP_STAFF_GROUP"),
            superuser_group=env("LDAP_SUPERUSER_GROUP"),
            start_tls=env_bool("LDAP_START_TLS", False),
            timeout=env_int("LDAP_TIMEOUT", 5),
        )
    )
    AUTHENTICATION_BACKENDS = [
        "portal.accounts.backends.DirectoryBackend",
        *(AUTHENTICATION_BACKENDS if env_bool("LDAP_ALLOW_LOCAL_USERS", True) else []),
    ]
# Members of this Django group (mirrored from LDAP, or local) may send
# X-Flowport-Proxy-User on API calls to act as another user; empty = nobody.
FLOWPORT_PROXY_GROUP = env("FLOWPORT_PROXY_GROUP")
# Template pack archives: refused beyond these, whatever their headers claim.
TEMPLATEPACK_MAX_FILES = env_int("TEMPLATEPACK_MAX_FILES", 500)
TEMPLATEPACK_MAX_UNCOMPRESSED_BYTES = env_int("TEMPLATEPACK_MAX_UNCOMPRESSED_BYTES", 16 * 1024 * 1024)

# --- Scheduler ------------------------------------------------------------------
SCHEDULER_POLL_SECONDS = env_int("SCHEDULER_POLL_SECONDS", 5)
SCHEDULER_DEFAULT_CATCH_UP = env("SCHEDULER_CATCH_UP", "skip")
if SCHEDULER_DEFAULT_CATCH_UP not in ("skip", "latest", "all"):
    raise ImproperlyConfigured("SCHEDULER_CATCH_UP must be skip, latest or all")
# With catch-up "all", at most this many missed ticks per flow are run.
SCHEDULER_MAX_CATCH_UP = env_int("SCHEDULER_MAX_CATCH_UP", 100)
# Ticks due within this many seconds are written ahead (the execution and its LAUNCH,
# due at the tick), so a top of the hour's burst is done before it comes
# (orchestration.control.scheduler). 0: each tick is written when it comes due.
SCHEDULER_LOOKAHEAD_SECONDS = env_int("SCHEDULER_LOOKAHEAD_SECONDS", 60)
# A flow triggered by files arriving in its source folder: how often the folder is looked at.
TRIGGER_FILES_POLL_SECONDS = env_int("TRIGGER_FILES_POLL_SECONDS", 10)
# History retention (portal/orchestration/state/retention.py): finished executions,
# job logs, events, done actions and sent outbox rows older than this are
# pruned by the scheduler every HISTORY_PRUNE_SECONDS, in small batches.
HISTORY_RETENTION_DAYS = env_int("HISTORY_RETENTION_DAYS", 90)
HISTORY_PRUNE_SECONDS = env_int("HISTORY_PRUNE_SECONDS", 60)
# /metrics figures over the whole history are recomputed this often, by the scheduler.
METRICS_HISTORY_SECONDS = env_int("METRICS_HISTORY_SECONDS", 60)

# --- Topology -----------------------------------------------------------------
# YAML or HOCON topology file synced at start-up (`manage.py load_topology`);
# empty = topology managed only through the pages and API.
TOPOLOGY_FILE = env("TOPOLOGY_FILE", "")

# --- Orchestration ----------------------------------------------------------------
# How often a portal process looks for action rows and unsent outbox messages.
ORCHESTRATOR_POLL_MILLIS = env_int("ORCHESTRATOR_POLL_MILLIS", 250)
# A claimed action not finished within this is retaken by another process.
ORCHESTRATOR_ACTION_LEASE_SECONDS = env_int("ORCHESTRATOR_ACTION_LEASE_SECONDS", 60)
# flow.allowConcurrentExecution when a flow does not say.
FLOW_ALLOW_CONCURRENT_EXECUTION = env_bool("FLOW_ALLOW_CONCURRENT_EXECUTION", False)
# Each job attempt's log file lives under <FLOWPORT_LOG_DIR>/jobs/.
FLOWPORT_LOG_DIR = env("FLOWPORT_LOG_DIR", str(VAR_DIR / "logs"))
# A worker's Spark driver: what its stderr shows, and what each job's driver
# log (jobs/<executionId>/<job>.<attempt>.driver.log) keeps.
SPARK_LOG_LEVEL = env("SPARK_LOG_LEVEL", "WARN")
SPARK_DRIVER_LOG_LEVEL = env("SPARK_DRIVER_LOG_LEVEL", "INFO")
for _name in ("SPARK_LOG_LEVEL", "SPARK_DRIVER_LOG_LEVEL"):
    if globals()[_name].upper() not in {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"}:
        raise ImproperlyConfigured(
            f"{_name}={globals()[_name]!r} is not a log4j2 level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF)"
        )
# Task-staging / task-output / extract folders of running jobs (path or Hadoop URI).
FLOWPORT_WORK_DIR = env("FLOWPORT_WORK_DIR", str(VAR_DIR / "work"))
# Workers beat this often; a running job whose worker missed
# WORKER_LEASE_SECONDS of beats is given to another worker.
WORKER_HEARTBEAT_SECONDS = env_int("WORKER_HEARTBEAT_SECONDS", 5)
WORKER_LEASE_SECONDS = env_int("WORKER_LEASE_SECONDS", 30)
# A job a quota holds back is looked at again at least this often (a freed slot
# wakes the next waiters at once; this catches a quota raised by staff).
QUOTA_RECHECK_SECONDS = env_int("QUOTA_RECHECK_SECONDS", 60)
# The quota of a flow owner with none of their own when staff set no default quota (portal/quotas):
# Spark cores and MiB per job (flow.spark.* and flow.spark.conf.* alike) and the priority range.
QUOTA_DEFAULT_MAX_CORES_PER_JOB = env_int("QUOTA_DEFAULT_MAX_CORES_PER_JOB", 2)
QUOTA_DEFAULT_MAX_MEMORY_MB_PER_JOB = env_int("QUOTA_DEFAULT_MAX_MEMORY_MB_PER_JOB", 2048)
QUOTA_DEFAULT_MAX_PRIORITY = env_int("QUOTA_DEFAULT_MAX_PRIORITY", 0)
QUOTA_DEFAULT_MIN_PRIORITY = env_int("QUOTA_DEFAULT_MIN_PRIORITY", 0)
# A job thread still inside a job this long after the job finished, moved on
# or was cancelled is reported wedged (the worker page, executor health).
WORKER_WEDGED_SECONDS = env_int("WORKER_WEDGED_SECONDS", 60)
# A worker told to stop (SIGTERM) lets its running jobs finish this long, then
# exits whatever Spark is doing; their leases lapse and they run again elsewhere.
WORKER_STOP_SECONDS = env_int("WORKER_STOP_SECONDS", 30)
# A job whose Spark application holds no executor (a standalone master with no free cores, its
# Spark workers gone) waits this long, then is given up: FAILED, saying what an operator can do
# (orchestration.worker.heartbeat); it raises a job.waiting_for_spark_executors event when it
# begins to wait. 0: it waits as long as it takes.
SPARK_EXECUTOR_WAIT_LIMIT_SECONDS = env_int("SPARK_EXECUTOR_WAIT_LIMIT_SECONDS", 1800)
# A job whose worker stopped heartbeating without reporting is started again
# at most this many times; once more and it fails as a poison job (its code
# kills or wedges every worker that runs it).
JOB_MAX_REDELIVERIES = env_int("JOB_MAX_REDELIVERIES", 3)
# Default SLAs (Gobblin's gobblin.flow.sla.* and gobblin.job.start.sla.* win).
FLOW_SLA_SECONDS = env_int("FLOW_SLA_SECONDS", 24 * 3600)
JOB_START_SLA_SECONDS = env_int("JOB_START_SLA_SECONDS", 600)
# Seconds to wait for the broker when relaying one message (the outbox keeps it on failure).
CELERY_BROKER_CONNECTION_TIMEOUT = env_int("CELERY_BROKER_CONNECTION_TIMEOUT", 2)

# --- Keys -----------------------------------------------------------------------
# The master key ring that wraps customer keys (docs/keys.md): a file readable
# by its owner only (0600; wider is refused), or, for development only, the
# same text in FLOWPORT_MASTER_KEY. Neither set = embedded mode:
# $FLOWPORT_VAR_DIR/master-key, created on first use or by `manage.py ensure_master_key`.
FLOWPORT_MASTER_KEY_FILE = env("FLOWPORT_MASTER_KEY_FILE")
FLOWPORT_MASTER_KEY = env("FLOWPORT_MASTER_KEY")

# --- Monitoring -----------------------------------------------------------------
# Dashboards, SLA and health monitors, event sinks, /metrics (docs/monitoring.md).
MONITORING_DASHBOARD_REFRESH_SECONDS = env_int("MONITORING_DASHBOARD_REFRESH_SECONDS", 5)
MONITORING_CHART_REFRESH_SECONDS = env_int("MONITORING_CHART_REFRESH_SECONDS", 10)
# Executions per flow chart (and 4x this many rows on a dataset page).
MONITORING_CHART_RUNS = env_int("MONITORING_CHART_RUNS", 50)
# The scheduler runs the monitors this often; probes of the broker and Spark
# masters at most every MONITORING_PROBE_INTERVAL_SECONDS across all schedulers.
MONITORING_INTERVAL_SECONDS = env_int("MONITORING_INTERVAL_SECONDS", 15)
MONITORING_PROBE_INTERVAL_SECONDS = env_int("MONITORING_PROBE_INTERVAL_SECONDS", 30)
MONITORING_PROBE_TIMEOUT_SECONDS = env_int("MONITORING_PROBE_TIMEOUT_SECONDS", 2)
# An execution is "at risk" once this share of its SLA has passed (or its usual
# duration would end past the deadline); "missed" this long after the deadline
# when the orchestrator has not reported it already.
try:
    MONITORING_SLA_AT_RISK_FRACTION = float(env("MONITORING_SLA_AT_RISK_FRACTION", "0.8"))
except ValueError:
    MONITORING_SLA_AT_RISK_FRACTION = -1.0
if not 0 < MONITORING_SLA_AT_RISK_FRACTION <= 1:
    raise ImproperlyConfigured("MONITORING_SLA_AT_RISK_FRACTION must be in (0, 1]")
MONITORING_SLA_GRACE_SECONDS = env_int("MONITORING_SLA_GRACE_SECONDS", 60)
# Change data capture slots (portal.monitoring.slots): alert thresholds (a flow's
# source.cdc.alert.* properties override them; 0 = off), how often the monitor reads each slot,
# how long a reading is reused by the flow page, the timeout of one reading, and how many flows and
# seconds one pass of the scheduler's monitor may spend (the next pass goes on from there).
CDC_ALERT_LAG_BYTES = env_int("CDC_ALERT_LAG_BYTES", 1024**3)
CDC_ALERT_LAG_SECONDS = env_int("CDC_ALERT_LAG_SECONDS", 0)
CDC_ALERT_INACTIVE_SECONDS = env_int("CDC_ALERT_INACTIVE_SECONDS", 86400)
CDC_SLOT_INTERVAL_SECONDS = env_int("CDC_SLOT_INTERVAL_SECONDS", 60)
CDC_SLOT_CACHE_SECONDS = env_int("CDC_SLOT_CACHE_SECONDS", 15)
CDC_SLOT_TIMEOUT_SECONDS = env_int("CDC_SLOT_TIMEOUT_SECONDS", 3)
CDC_SLOT_MAX_FLOWS = env_int("CDC_SLOT_MAX_FLOWS", 500)
CDC_SLOT_BUDGET_SECONDS = env_int("CDC_SLOT_BUDGET_SECONDS", 10)
# Event sinks: email through Django's mail settings below, and/or a webhook
# that receives each event as a JSON POST. Empty = the dashboard only.
MONITORING_EMAIL_TO = env_list("MONITORING_EMAIL_TO")
MONITORING_WEBHOOK_URL = env_secret("MONITORING_WEBHOOK_URL")
# Test connection and discovery of a data node (topology/connections.py) give up after this.
TOPOLOGY_CONNECTION_TIMEOUT_SECONDS = env_int("TOPOLOGY_CONNECTION_TIMEOUT_SECONDS", 5)
# Webhooks of users' subscriptions may go to these hosts only (exact names or
# ".example.org" for a domain and its subdomains); empty: any host.
MONITORING_WEBHOOK_ALLOWED_HOSTS = env_list("MONITORING_WEBHOOK_ALLOWED_HOSTS")
# They never reach loopback, private, link-local, multicast or reserved addresses nor the
# portal itself (events/outbound.py) except these hosts (names, ".example.org" for a domain)
# and networks (10.1.2.3, 10.1.0.0/16), which the operator trusts; empty: none.
MONITORING_WEBHOOK_INTERNAL_HOSTS = env_list("MONITORING_WEBHOOK_INTERNAL_HOSTS")
MONITORING_SINK_TIMEOUT_SECONDS = env_int("MONITORING_SINK_TIMEOUT_SECONDS", 5)
MONITORING_SINK_MIN_SEVERITY = env("MONITORING_SINK_MIN_SEVERITY", "INFO").upper()
if MONITORING_SINK_MIN_SEVERITY not in ("INFO", "WARNING", "ERROR"):
    raise ImproperlyConfigured("MONITORING_SINK_MIN_SEVERITY must be INFO, WARNING or ERROR")
# Events older than this are not forwarded (nor failures alerted): no flood
# when a sink is configured for the first time or comes back after a long outage.
MONITORING_SINK_MAX_AGE_SECONDS = env_int("MONITORING_SINK_MAX_AGE_SECONDS", 3600)
# OpenLineage (portal/orchestration/state/lineage.py): every job's run events (START, COMPLETE, FAIL,
# ABORT) go as JSON POSTs to OPENLINEAGE_URL (+ /api/v1/lineage, as Marquez takes them) and/or
# as JSON lines appended to OPENLINEAGE_FILE; both empty: no events are sent. A background
# sender with this timeout per request: a slow or failing endpoint never holds a job up.
OPENLINEAGE_URL = env("OPENLINEAGE_URL")
OPENLINEAGE_API_KEY = env_secret("OPENLINEAGE_API_KEY")
OPENLINEAGE_FILE = env("OPENLINEAGE_FILE")
OPENLINEAGE_NAMESPACE = env("OPENLINEAGE_NAMESPACE", "flowport")
OPENLINEAGE_TIMEOUT_SECONDS = env_int("OPENLINEAGE_TIMEOUT_SECONDS", 5)
# /metrics answers signed-in users, scrapers sending this as `Authorization: Bearer <token>`,
# and anyone only when MONITORING_METRICS_PUBLIC is set (portal.monitoring.metrics.may_scrape).
MONITORING_METRICS_TOKEN = env_secret("MONITORING_METRICS_TOKEN")
MONITORING_METRICS_PUBLIC = env_bool("MONITORING_METRICS_PUBLIC", False)
# A mail server when EMAIL_HOST names one; without it (the embedded default) mail is not sent
# but written, one file per message, to EMAIL_FILE_PATH, and the pages say so (events.sinks).
# EMAIL_BACKEND chooses another Django backend (e.g. the console's).
EMAIL_HOST = env("EMAIL_HOST")
EMAIL_BACKEND = env(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.filebased.EmailBackend",
)
EMAIL_HOST = EMAIL_HOST or "localhost"
EMAIL_FILE_PATH = env("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = MONITORING_SINK_TIMEOUT_SECONDS
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "flowport@localhost")
MONITORING_EMAIL_FROM = env("MONITORING_EMAIL_FROM", DEFAULT_FROM_EMAIL)
# Executors on YARN/K8s run each job with spark-submit in cluster deploy mode;
# their drivers decrypt ENC(...) properties with this master key ring file (a
# path on an ACL-protected filesystem the cluster shares). Empty = no secrets
# can reach such jobs.
SPARK_SUBMIT_MASTER_KEY_FILE = env("SPARK_SUBMIT_MASTER_KEY_FILE", "")
