"""Neta settings: read once from ``NETA_*`` environment variables (see README).

With no variable set Neta runs embedded: SQLite under ``var/``, session files under
``var/sessions``, the in-memory channel layer and the inline task backend.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from neta.env import (
    database_from_url,
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_path,
    env_str,
    installation_key,
    secret_files,
    sqlite_database,
)
from toolcatalog.environment import server_setting_reason  # plain Python: the one rule for variable names

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env_path("NETA_VAR_DIR", BASE_DIR / "var", base=BASE_DIR)
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    configured = env_str("NETA_SECRET_KEY")
    if configured:
        return configured
    # Embedded default: one random key per installation, kept under var/.
    return installation_key(VAR_DIR / "secret_key")


SECRET_KEY = _secret_key()
DEBUG = env_bool("NETA_DEBUG", False)
ALLOWED_HOSTS = env_list("NETA_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("NETA_CSRF_TRUSTED_ORIGINS", [])

# Daphne is not an app here: as one it would import Twisted into every process that sets
# Django up (workers, commands), ~0.15 s of CPU each. ``python -m neta.serve`` runs it, and
# ``manage.py runserver`` is its command (neta/management/commands/runserver.py).
INSTALLED_APPS = [
    "neta.console.apps.ConsoleAdminConfig",  # django.contrib.admin with the console site (docs/console.md)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "neta",
    "audit",
    "sessions_tree",
    "toolcatalog",
    "skills_registry",
    "runtime",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The reader's language: the language cookie (a user's setting, docs/development.md
    # "Translations"), else Accept-Language, else English.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "audit.middleware.AuditContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "neta.urls"
ASGI_APPLICATION = "neta.asgi.application"
WSGI_APPLICATION = None

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
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
_database_url = env_str("NETA_DATABASE_URL")
DATABASES = {
    "default": (
        database_from_url(_database_url, base=BASE_DIR)
        if _database_url
        else sqlite_database(VAR_DIR / "neta.sqlite3")
    )
}
# The contract suite also runs the mysql provider on a real MariaDB/MySQL server,
# reached under its own alias so one test run covers SQLite and MariaDB.
_test_mysql_url = env_str("NETA_TEST_MYSQL_URL")
if _test_mysql_url:
    DATABASES["mysql"] = database_from_url(_test_mysql_url, base=BASE_DIR)
# Persistent connections: a thread keeps its connection between its jobs (closed when
# older than this many seconds; 0: after each one) and checks it before reusing it. The
# threads a process runs its work on keep theirs whatever this says (infra/db_threads.py):
# the inline pool, the HTTP request threads, the sockets' database thread and a Celery
# worker's task thread — they are few and stay. This is for the rest.
NETA_DB_CONN_MAX_AGE = env_int("NETA_DB_CONN_MAX_AGE", 0, minimum=0)
for _database in DATABASES.values():
    _database["CONN_MAX_AGE"] = NETA_DB_CONN_MAX_AGE
    _database["CONN_HEALTH_CHECKS"] = True
# MariaDB/MySQL: a process's connections are lent from a pool (infra/mysql_backend): at
# most this many open at once per process, a thread that finds them all in use waits up to
# NETA_DB_POOL_WAIT_SECONDS. A turn gives its connection back while it waits on its model,
# so a worker running 64 turns needs a few, not 64. NETA_DB_PROCESSES: how many Neta
# processes of the deployment connect to the database (servers, runs-worker processes,
# subagent-worker children); `manage.py check` and the health page warn when
# NETA_DB_POOL_SIZE x NETA_DB_PROCESSES can exceed the server's max_connections.
NETA_DB_POOL_SIZE = env_int("NETA_DB_POOL_SIZE", 20, minimum=1)
NETA_DB_POOL_WAIT_SECONDS = env_int("NETA_DB_POOL_WAIT_SECONDS", 30, minimum=1)
NETA_DB_PROCESSES = env_int("NETA_DB_PROCESSES", 6, minimum=1)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Sessions -----------------------------------------------------------------
NETA_SESSIONS_DIR = env_path("NETA_SESSIONS_DIR", VAR_DIR / "sessions", base=BASE_DIR)
# How many tree events each session keeps for gap filling (docs/realtime.md).
NETA_EVENT_LOG_SIZE = env_int("NETA_EVENT_LOG_SIZE", 1000, minimum=10)
# Snapshots carry at most this many full entries; the rest is paged (docs/sessions.md).
NETA_SNAPSHOT_ENTRY_LIMIT = env_int("NETA_SNAPSHOT_ENTRY_LIMIT", 2000, minimum=10)
# Entries the in-process session indexes may hold in all (least recently used sessions are dropped first).
NETA_INDEX_CACHE_ENTRIES = env_int("NETA_INDEX_CACHE_ENTRIES", 300_000, minimum=1000)
# ... and at most this many sessions' indexes (small sessions cost memory the entry count does not see).
NETA_INDEX_CACHE_SESSIONS = env_int("NETA_INDEX_CACHE_SESSIONS", 2000, minimum=10)

# --- Realtime and tasks -------------------------------------------------------
NETA_REDIS_URL = env_str("NETA_REDIS_URL")
# Key prefix in Redis of the channel layer and the sign-in counts (one per deployment sharing a Redis).
NETA_CHANNELS_PREFIX = env_str("NETA_CHANNELS_PREFIX", "neta")
# Messages a socket may have waiting (each socket its own queue, both layers); a full queue
# drops its oldest message, which the event log and the heartbeat make good (docs/realtime.md).
NETA_WS_CHANNEL_CAPACITY = env_int("NETA_WS_CHANNEL_CAPACITY", 1000, minimum=1)
if NETA_REDIS_URL:
    import socket as _socket

    # Redis pub/sub, fanned out per socket inside each server (runtime/realtime/redis_layer.py;
    # why not channels_redis' list layer: docs/realtime.md, "Channel layers"). Nothing blocks in
    # Redis (the subscription is read in 0.1 s polls), so the socket timeout only bounds a
    # command's reply; keepalive and health checks find a dead connection within ~30 s, and
    # redis-py then reconnects and subscribes again. The name tells these connections apart.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "runtime.realtime.redis_layer.RedisFanoutLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": NETA_REDIS_URL,
                        "socket_timeout": 10,
                        "socket_connect_timeout": 5,
                        "socket_keepalive": True,
                        "socket_keepalive_options": {
                            getattr(_socket, name): value
                            for name, value in (("TCP_KEEPIDLE", 15), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3))
                            if hasattr(_socket, name)
                        },
                        "health_check_interval": 15,
                        "client_name": "".join(c if c.isalnum() or c in "-_." else "_" for c in NETA_CHANNELS_PREFIX) + "-channels",
                    }
                ],
                "prefix": NETA_CHANNELS_PREFIX,
                "capacity": NETA_WS_CHANNEL_CAPACITY,
            },
        }
    }
else:
    # The embedded default: in-process, made to scale with many sockets (runtime/realtime/layer.py).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "runtime.realtime.layer.InProcessChannelLayer",
            "CONFIG": {"capacity": NETA_WS_CHANNEL_CAPACITY, "expiry": 60},
        }
    }

# Where agents work when their config names no cwd.
NETA_WORKSPACE_DIR = env_path("NETA_WORKSPACE_DIR", VAR_DIR / "workspace", base=BASE_DIR)
# Inline backend: turns run on this many threads inside the web process.
# A turn mostly waits on its model (I/O), so the pool is sized for concurrent sessions,
# not for cores: 64 threads never queue 50 sessions of a 2 s model (4 threads cap that
# at 2 turns/s); `python -m bench runtime_turn concurrent` measures it.
NETA_INLINE_WORKERS = env_int("NETA_INLINE_WORKERS", 64, minimum=1)
# The web process runs requests' synchronous code (sync middleware, views) on this many
# threads, reused (infra/http_threads.py); a request waits for a free one when all are busy.
NETA_HTTP_THREADS = env_int("NETA_HTTP_THREADS", 32, minimum=1)
# A model call that fails with a failure that may pass (overloaded, 5xx, 429, a dropped
# connection) after its output began is tried again this many times, after
# base × 2, 4, 8 … ms (Pi's auto-retry: 3 retries, 2/4/8 s); then the agent's next fallback
# model takes it (runtime/runs/retries.py).
NETA_LLM_RETRIES = env_int("NETA_LLM_RETRIES", 3, minimum=0)
NETA_LLM_RETRY_BASE_MS = env_int("NETA_LLM_RETRY_BASE_MS", 2000, minimum=0)
# A running run whose heartbeat is older than this is finalized by the reaper.
NETA_RUN_STALE_SECONDS = env_int("NETA_RUN_STALE_SECONDS", 30, minimum=2)
# The reaper runs this often: a timer thread in the inline backend's web process and
# in every Celery worker, and the Celery beat schedule (runtime/runs/reaper.py).
NETA_REAPER_INTERVAL_SECONDS = env_int("NETA_REAPER_INTERVAL_SECONDS", 10, minimum=1)
# A queued run no process has claimed for this long (Celery: no worker took the task)
# is submitted again; after three such submissions it fails with the reason.
NETA_RUN_CLAIM_SECONDS = env_int("NETA_RUN_CLAIM_SECONDS", 120, minimum=2)
# An ``ask_user`` question nobody answered for this long expires (the reaper round): the
# model gets a "the user did not answer" result and the run goes on.
NETA_ASK_USER_TIMEOUT_SECONDS = env_int("NETA_ASK_USER_TIMEOUT_SECONDS", 3600, minimum=1)
# Model- and tool-call records (a run's trace) older than this many days are pruned by the
# reaper's round; 0 keeps them.
NETA_TRACE_RETENTION_DAYS = env_int("NETA_TRACE_RETENTION_DAYS", 90, minimum=0)
# OpenTelemetry: each run's trace goes to the OTLP/HTTP endpoint the standard variables name
# (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; off without them).
# Prompts and answers go along only when NETA_OTEL_CAPTURE_CONTENT is on.
NETA_OTEL_ENABLED = bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
NETA_OTEL_CAPTURE_CONTENT = env_bool("NETA_OTEL_CAPTURE_CONTENT", False)
# TEST-ONLY: the process SIGKILLs itself when a run reaches this named point
# (runtime/runs/turn.py crash_point; the crash suite). Empty (the default) in any deployment.
NETA_TEST_KILL_AT = env_str("NETA_TEST_KILL_AT", "")
# TEST-ONLY: a claim or finish fails (<point>_error) or deadlocks once on MariaDB (<point>_deadlock);
# receive_dberror: a Celery task's first reach for the database fails once.
NETA_TEST_FAULT_AT = env_str("NETA_TEST_FAULT_AT", "")
# Streaming deltas are coalesced to at most this many messages per second per stream.
NETA_STREAM_RATE = env_int("NETA_STREAM_RATE", 20, minimum=1)
# ... and at most this many a second per process in all: with more busy streams than
# budget / rate each gets its share (runtime/realtime/sinks.py StreamBudget); 0: no budget.
NETA_STREAM_BUDGET = env_int("NETA_STREAM_BUDGET", 300, minimum=0)
# The server's and workers' garbage collector: the young generation's threshold (Python's
# is 700) and a frozen startup heap (infra/gc_tuning.py); 0: Python's defaults.
NETA_GC_YOUNG = env_int("NETA_GC_YOUNG", 10_000, minimum=0)
NETA_TASK_BACKEND = env_choice("NETA_TASK_BACKEND", "inline", ("inline", "celery"))
# This host's name in the runs it owns and in its runs queue (default: the machine's hostname;
# give each host of a deployment its own if theirs are not unique).
NETA_HOST_NAME = env_str("NETA_HOST_NAME", "") or socket.gethostname()
# With Celery, a session's turns after its first go to the host that ran its last one (the
# runs worker of each host also consumes "<NETA_CELERY_QUEUE>.host.<NETA_HOST_NAME>"): its
# workspace (the files its tools wrote) is on that host's disk (docs/deploy.md, "Several hosts").
NETA_SESSION_AFFINITY = env_bool("NETA_SESSION_AFFINITY", True)
# A streaming reply's partial content is saved (its in-flight checkpoint) at most once in
# this many seconds: what a crash can lose of a reply, and a statement or two per save.
# Distributed (celery) default 5 (a node streaming hundreds of replies at once saves a fifth
# as often), embedded 1.
NETA_STREAM_SAVE_SECONDS = env_int("NETA_STREAM_SAVE_SECONDS", 5 if NETA_TASK_BACKEND == "celery" else 1, minimum=1)
# The CPU of the web process's threads (infra/cpu_pin.py): auto (the embedded server, inline
# backend, on the CPU it starts on, when it may use several), off, or a CPU number.
NETA_WEB_CPU = env_str("NETA_WEB_CPU", "auto")
CELERY_BROKER_URL = env_str("NETA_CELERY_BROKER_URL", NETA_REDIS_URL or "redis://127.0.0.1:6379/0")
# The queue runs are sent to and workers consume (one per deployment sharing a broker).
CELERY_TASK_DEFAULT_QUEUE = env_str("NETA_CELERY_QUEUE", "celery")
# Subagent children are supervised by Celery tasks on their own queue (docs/subagents.md):
# parent turns and children never wait on each other in one worker pool.
NETA_SUBAGENT_QUEUE = env_str("NETA_SUBAGENT_QUEUE", "subagents")
# A child still queued this long makes its parent ask the workers (a control broadcast)
# whether any consumes NETA_SUBAGENT_QUEUE; with none, the children fail at once ("no
# subagent worker") instead of after their whole budget. 0: never ask.
NETA_SUBAGENT_WORKER_CHECK_SECONDS = env_int("NETA_SUBAGENT_WORKER_CHECK_SECONDS", 3, minimum=0)
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes every connection before and after each task unless connections
# may be reused for this many tasks; a worker's task thread keeps its connection instead
# (neta/celery.py, infra/db_threads.py), checked at each task's start (runtime/runs/tasks.py).
CELERY_DB_REUSE_MAX = 1000
# A round no worker picked up within one interval is dropped (the next one comes anyway), so a
# beat left running while the workers are down does not pile up rounds in the broker.
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {
        "task": "runtime.reap_stale_runs",
        "schedule": float(NETA_REAPER_INTERVAL_SECONDS),
        "options": {"expires": float(NETA_REAPER_INTERVAL_SECONDS)},
    },
}

# --- Models and sandbox ---------------------------------------------------------
NETA_DEFAULT_MODEL = env_str("NETA_DEFAULT_MODEL", "auto")
# Who writes a session's title after its first answer (runtime/runs/titles.py): "" = the
# agent's model, a model name (a cheap one), or "off".
NETA_TITLE_MODEL = env_str("NETA_TITLE_MODEL", "")
# auto: bubblewrap when a probe shows it works here, else none with a warning (docs/tools.md).
NETA_SANDBOX = env_choice("NETA_SANDBOX", "auto", ("auto", "none", "bwrap"))
# The bubblewrap binary: a name looked up on PATH, or an absolute path.
NETA_SANDBOX_BWRAP = env_str("NETA_SANDBOX_BWRAP", "bwrap")
# Paths the tools never touch besides the built-in ones (secret key, admin password,
# SQLite files, sessions dir); the bwrap sandbox masks them inside a workspace root too.
NETA_TOOL_DENY_PATHS = env_list("NETA_TOOL_DENY_PATHS", [])
# The files named by NETA_*_FILE variables at start-up (secrets): protected from the tools too.
NETA_SECRET_FILES = secret_files()
# Run bash commands without cgroup containment (process group only); tests use it to exercise the fallback.
NETA_TOOLS_NO_CGROUP = env_bool("NETA_TOOLS_NO_CGROUP", False)
NETA_BASH_MAX_PROCESSES = env_int("NETA_BASH_MAX_PROCESSES", 256, minimum=8)
NETA_BASH_MAX_FILE_MB = env_int("NETA_BASH_MAX_FILE_MB", 1024, minimum=1)
NETA_BASH_MAX_OPEN_FILES = env_int("NETA_BASH_MAX_OPEN_FILES", 4096, minimum=64)
NETA_BASH_MAX_MEMORY_MB = env_int("NETA_BASH_MAX_MEMORY_MB", 4096, minimum=16)
NETA_BASH_MAX_TIMEOUT = env_int("NETA_BASH_MAX_TIMEOUT", 3600, minimum=1)
NETA_SANDBOX_RO_BINDS = env_list("NETA_SANDBOX_RO_BINDS", [])
NETA_TOOL_OUTPUT_DIR = env_path("NETA_TOOL_OUTPUT_DIR", VAR_DIR / "tool-output", base=BASE_DIR)
# Where a scripted model's rules files may come from, besides the shipped ones (runtime/llm/).
NETA_SCRIPTED_RULES_DIR = env_path("NETA_SCRIPTED_RULES_DIR", VAR_DIR / "rules", base=BASE_DIR)
# --- Web tools (docs/tools.md "Web tools") ------------------------------------------
# web_search's backend: "" (none: the tool is not offered), searxng, brave or tavily.
NETA_WEB_SEARCH_BACKEND = env_choice("NETA_WEB_SEARCH_BACKEND", "", ("", "searxng", "brave", "tavily"))
# The backend's base URL (required for searxng; overrides Brave's/Tavily's public API).
NETA_WEB_SEARCH_URL = env_str("NETA_WEB_SEARCH_URL", "")
# The *name* of the environment variable holding the backend's key ("" = BRAVE_API_KEY / TAVILY_API_KEY).
NETA_WEB_SEARCH_KEY_ENV = env_str("NETA_WEB_SEARCH_KEY_ENV", "")
if NETA_WEB_SEARCH_KEY_ENV and server_setting_reason(NETA_WEB_SEARCH_KEY_ENV):
    raise ImproperlyConfigured(f"NETA_WEB_SEARCH_KEY_ENV: {server_setting_reason(NETA_WEB_SEARCH_KEY_ENV)}")
# Hosts (or host:port) the web tools may reach although they resolve to private/loopback
# addresses — the only way there — and hosts, *.domains or CIDR ranges they never reach.
NETA_WEB_FETCH_ALLOW = env_list("NETA_WEB_FETCH_ALLOW", [])
# Hosts (or host:port) a streamable-HTTP MCP server may be at although they resolve to
# private/loopback addresses (an MCP server beside Neta); the web guard decides the rest.
NETA_MCP_HTTP_ALLOW = env_list("NETA_MCP_HTTP_ALLOW", [])
NETA_WEB_FETCH_DENY = env_list("NETA_WEB_FETCH_DENY", [])
NETA_WEB_FETCH_MAX_BYTES = env_int("NETA_WEB_FETCH_MAX_BYTES", 10 * 1024 * 1024, minimum=1024)
NETA_WEB_FETCH_TIMEOUT = env_int("NETA_WEB_FETCH_TIMEOUT", 30, minimum=1)
NETA_WEB_FETCH_MAX_REDIRECTS = env_int("NETA_WEB_FETCH_MAX_REDIRECTS", 5, minimum=0)
NETA_SKILLS_DIRS = env_list("NETA_SKILLS_DIRS", [])
NETA_SKILLS_VALIDATION = env_choice("NETA_SKILLS_VALIDATION", "strict", ("strict", "pi"))
NETA_MANAGED_SKILLS_DIR = env_path("NETA_MANAGED_SKILLS_DIR", VAR_DIR / "skills", base=BASE_DIR)
NETA_SKILLS_PROJECT_DIR = env_str("NETA_SKILLS_PROJECT_DIR") or None  # None: the process cwd
# The home folder whose ~/.neta, ~/.agents and ~/.pi skills are registered (None: the user's home).
NETA_SKILLS_HOME = env_str("NETA_SKILLS_HOME") or None
# A SKILL.md larger than this is refused (skills_registry/discovery.py).
NETA_SKILL_MAX_ENTRY_BYTES = env_int("NETA_SKILL_MAX_ENTRY_BYTES", 1 << 20, minimum=1024)
NETA_SKILL_IMPORT_MAX_FILES = env_int("NETA_SKILL_IMPORT_MAX_FILES", 1000, minimum=1)
NETA_SKILL_IMPORT_MAX_BYTES = env_int("NETA_SKILL_IMPORT_MAX_BYTES", 50 * 1024 * 1024, minimum=1024)
NETA_SKILL_FILE_MAX_BYTES = env_int("NETA_SKILL_FILE_MAX_BYTES", 256 * 1024, minimum=1024)

# --- The rest -------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# The languages pages, the console and API messages speak; the catalogs are under locale/
# (compiled .mo files committed beside their .po; docs/development.md, "Translations").
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# `collectstatic` (make run, make test) writes hashed copies, the chat bundle and the manifest
# here (neta/static_build.py); NETA_STATIC_ROOT lets several servers share one collection.
STATIC_ROOT = env_path("NETA_STATIC_ROOT", VAR_DIR / "staticfiles", base=BASE_DIR)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "neta.static_build.ChatStaticStorage"},
}
NETA_SERVE_STATIC = env_bool("NETA_SERVE_STATIC", True)

LOGIN_URL = "/login/"

NETA_LOG_LEVEL = env_choice("NETA_LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical")).upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": NETA_LOG_LEVEL},
}

# --- REST API and realtime gateway (docs/api.md, docs/realtime.md) ---------------
INSTALLED_APPS += ["drf_spectacular", "drf_spectacular_sidecar"]
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "runtime.api.authentication.ApiTokenAuthentication",  # first: 401 + WWW-Authenticate: Token
        "rest_framework.authentication.SessionAuthentication",  # browsers, with CSRF
    ],
    "DEFAULT_PERMISSION_CLASSES": ["runtime.api.permissions.ApiAccess"],
    # Renders whatever a session holds (lone surrogates, NaN, deep nesting) instead of a 500.
    "DEFAULT_RENDERER_CLASSES": ["runtime.api.renderers.SafeJSONRenderer"],
    # Bounded nesting, finite numbers, lone surrogates replaced: see runtime/api/parsers.py.
    "DEFAULT_PARSER_CLASSES": ["runtime.api.parsers.BoundedJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "runtime.api.errors.api_exception_handler",
    # Fair-use limits, not security.
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle", "rest_framework.throttling.AnonRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "user": env_str("NETA_API_RATE_USER", "20000/hour"),
        "anon": env_str("NETA_API_RATE_ANON", "2000/hour"),
    },
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
# --- Sign-in limits (runtime/pages/login_throttle.py) --------------------------------
# Failed sign-ins on /login/ and /admin/login/ per username and per client address
# within the window (from the first failure); past either, the form answers 429.
NETA_LOGIN_MAX_FAILURES = env_int("NETA_LOGIN_MAX_FAILURES", 5, minimum=1)
NETA_LOGIN_MAX_FAILURES_PER_IP = env_int("NETA_LOGIN_MAX_FAILURES_PER_IP", 20, minimum=1)
NETA_LOGIN_WINDOW_SECONDS = env_int("NETA_LOGIN_WINDOW_SECONDS", 900, minimum=1)
# Reverse proxies in front of the server whose X-Forwarded-For is trusted (0: use REMOTE_ADDR).
NETA_TRUSTED_PROXIES = env_int("NETA_TRUSTED_PROXIES", 0, minimum=0)
# The counts must be shared by every web process: Redis when configured, else this process's memory.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "neta-default"},
    "login": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": NETA_REDIS_URL, "KEY_PREFIX": NETA_CHANNELS_PREFIX}
        if NETA_REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "neta-login"}
    ),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Neta API",
    "DESCRIPTION": "Sessions (Pi-compatible trees), their commands, agents, models, tools, skills and runs. See docs/api.md.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "SessionStatusEnum": "sessions_tree.models.SessionStatus",
        "RunStatusEnum": "runtime.models.RunStatus",
        "SessionProviderEnum": "sessions_tree.models.SessionProviderKind",
    },
}
# Request bodies up to this size (a prompt's images: 8 of 10 MB base64 at most, all together within NETA_MAX_ENTRY_BYTES).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("NETA_API_MAX_BODY_BYTES", 96 * 1024 * 1024, minimum=1024 * 1024)
# Largest Pi file the import endpoint accepts.
NETA_IMPORT_MAX_BYTES = env_int("NETA_IMPORT_MAX_BYTES", 200 * 1024 * 1024, minimum=1024)
# Largest entry (its JSON text, UTF-8) any append or import stores; a prompt's text and
# images together must fit in it. The default keeps one row, even with every quote
# escaped (twice the bytes), under MariaDB's default max_allowed_packet of 16 MiB.
NETA_MAX_ENTRY_BYTES = env_int("NETA_MAX_ENTRY_BYTES", 7 * 1024 * 1024, minimum=64 * 1024)
# Websocket gateway: heartbeat interval, largest accepted client frame, and the size above
# which a tree event travels through the channel layer as a reference (read from the log).
NETA_WS_HEARTBEAT_SECONDS = env_int("NETA_WS_HEARTBEAT_SECONDS", 25, minimum=1)
NETA_WS_MAX_FRAME_BYTES = env_int("NETA_WS_MAX_FRAME_BYTES", 1024 * 1024, minimum=1024)
# What Daphne itself lets through (``python -m neta.serve``, ``manage.py runserver``): a
# bounded margin above the gateway's limit, so an oversized frame is answered with
# ``frame_too_large`` instead of Daphne dropping the connection (docs/realtime.md).
DAPHNE_WEBSOCKET_MAX_MESSAGE_SIZE = DAPHNE_WEBSOCKET_MAX_FRAME_SIZE = 4 * NETA_WS_MAX_FRAME_BYTES
NETA_REALTIME_INLINE_BYTES = env_int("NETA_REALTIME_INLINE_BYTES", 64 * 1024, minimum=1024)
# A process hands its realtime messages to Redis at most once this often: what came meanwhile
# leaves as one pipeline of PUBLISHes instead of a round trip per delta (the first message
# after a quiet spell leaves at once).
NETA_REALTIME_GATHER_MS = env_int("NETA_REALTIME_GATHER_MS", 20, minimum=0)
# Forward the producer's emit time (``emittedAt``) with every realtime frame (benchmarks).
NETA_REALTIME_TRACE = env_bool("NETA_REALTIME_TRACE", False)
