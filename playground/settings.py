"""Django settings for the playground, read from the environment (django-environ).

The defaults are a safe, non-debug single-host run that needs nothing set and nothing running:
SQLite file in ``var/``, the in-memory channel layer, and the secret key, the encryption key and
the simulator key generated on first start into ``var/`` (files of mode 0600; a file that others
may read is refused). ``DJANGO_DEBUG`` is false unless set. Key material never derives from
``SECRET_KEY``. ``PLAYGROUND_GENERATE_SECRETS=false`` (production with several hosts) refuses to
start without ``DJANGO_SECRET_KEY`` and ``PLAYGROUND_ENCRYPTION_KEYS``. ``DJANGO_ALLOWED_HOSTS=*``
is refused outside DEBUG. Every variable is documented in ``.env.example``; the production
values are in the README ("Production set-up").
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# Read after .env; an empty value (as in .env.example) means the default.
VAR_DIR = Path(os.environ.get("PLAYGROUND_VAR_DIR") or BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# Generate missing secrets into var/ (one host). false: refuse to start without them (several
# hosts must share one secret key and one encryption key).
PLAYGROUND_GENERATE_SECRETS = env.bool("PLAYGROUND_GENERATE_SECRETS", default=True)


def _var_secret(name: str, variable: str, make: Callable[[], str]) -> str:
    """The secret kept in ``VAR_DIR/name`` (mode 0600), made by ``make()`` on first start.

    Concurrent first starts agree: the file is written under a temporary name and linked into
    place, and a process that loses the race reads the winner's. Raises ImproperlyConfigured when
    generation is off or the file is readable by group or others.
    """
    path = VAR_DIR / name
    if not path.exists():
        if not PLAYGROUND_GENERATE_SECRETS:
            raise ImproperlyConfigured(
                f"{variable} must be set when PLAYGROUND_GENERATE_SECRETS is false."
            )
        tmp = VAR_DIR / f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(make() + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ImproperlyConfigured(
            f"{path} is readable by others (mode {mode:o}): run 'chmod 600 {path}', or set {variable}."
        )
    value = path.read_text().strip()
    if not value:
        raise ImproperlyConfigured(f"{path} is empty: delete it to make a new one, or set {variable}.")
    return value


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or _var_secret(
    "secret_key", "DJANGO_SECRET_KEY", lambda: secrets.token_urlsafe(50)
)

ALLOWED_HOSTS = [
    h.strip()
    for h in env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
    if h.strip()
]
if not DEBUG and "*" in ALLOWED_HOSTS:
    raise ImproperlyConfigured(
        "DJANGO_ALLOWED_HOSTS=* is refused outside DEBUG: list the host names you serve."
    )
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# Fernet keys (urlsafe base64, 32 bytes), comma-separated; the first encrypts, all decrypt.
# Rotate by prepending a new key. Without the variable: one key generated into var/.
PLAYGROUND_ENCRYPTION_KEYS = env.list("PLAYGROUND_ENCRYPTION_KEYS", default=[]) or [
    _var_secret("encryption_key", "PLAYGROUND_ENCRYPTION_KEYS", _fernet_key)
]
# The key the playground sends to its own in-process simulator (sim:// endpoints); the
# simulator answers other callers only with a logged-in session.
PLAYGROUND_SIMULATOR_KEY = env.str("PLAYGROUND_SIMULATOR_KEY", default="") or _var_secret(
    "simulator_key", "PLAYGROUND_SIMULATOR_KEY", lambda: "sim-" + secrets.token_urlsafe(32)
)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "template_partials",
    "axes",
    "chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "chat.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "chat.middleware.FirstRunMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out login before checking it
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "playground.urls"

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

WSGI_APPLICATION = None
ASGI_APPLICATION = "playground.asgi.application"

DATABASES = {
    # An empty DATABASE_URL (as in .env.example) means the SQLite default.
    "default": env.db_url_config(
        env.str("DATABASE_URL", default="") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
    ),
}
_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the page read while a turn writes; a busy timeout instead of "database is locked".
    _db.setdefault("OPTIONS", {}).update(
        {"transaction_mode": "IMMEDIATE", "timeout": 20, "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}
    )
    # Persistent connections (one per thread: the sync-view thread, the readers, the writer):
    # opening a SQLite connection per call cost a third of the database thread's CPU.
    if "CONN_MAX_AGE" not in _db or _db["CONN_MAX_AGE"] == 0:
        _db["CONN_MAX_AGE"] = None
    _db["CONN_HEALTH_CHECKS"] = True
elif _db["ENGINE"] == "django.db.backends.postgresql":
    # psycopg's pool, not CONN_MAX_AGE (persistent connections leak under ASGI).
    _db["CONN_MAX_AGE"] = 0
    _db.setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": env.int("PLAYGROUND_DB_POOL_MAX", default=8),
        "timeout": 20,
    }

REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1500, "expiry": 30},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# English only: no translation machinery (its per-lookup context-local cost showed in every
# rendered frame).
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"  # collectstatic's target (optional: see WHITENOISE_USE_FINDERS)
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
# WhiteNoise serves the static files from the app folders in every mode (no collectstatic
# needed, also with DEBUG false); names are not hashed, so they are cached for 60 s only.
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
# HTTPS: production sets these (README, "Production set-up"); the default run is plain HTTP on
# loopback. Redirect HTTP to HTTPS, and HSTS (seconds; 31536000 = one year).
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and strips it from clients).
if env.bool("DJANGO_SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Secure cookies (sent over HTTPS only): on by default when HTTP is redirected to HTTPS.
SESSION_COOKIE_SECURE = (
    env.bool("DJANGO_SECURE_COOKIES") if os.environ.get("DJANGO_SECURE_COOKIES") else SECURE_SSL_REDIRECT
)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# Content-Security-Policy of every response (django-csp): no inline script or style, no
# plugins, no <base>, never framed; images from this site and data: URLs; connections to this
# site (chat.middleware adds ws:// and wss:// of the request's host for the websocket).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}

# Login throttling (django-axes), on /accounts/login/ and /admin/login/: after
# PLAYGROUND_LOGIN_FAILURE_LIMIT failures for one username from one address, that pair is
# locked out for PLAYGROUND_LOGIN_COOLOFF_MINUTES (reset early: manage.py axes_reset).
AXES_FAILURE_LIMIT = env.int("PLAYGROUND_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("PLAYGROUND_LOGIN_COOLOFF_MINUTES", default=15.0) / 60.0  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
AXES_DISABLE_ACCESS_LOG = True  # failures are kept (they make the lockout), successes are not
AXES_IPWARE_META_PRECEDENCE_ORDER = ["REMOTE_ADDR"]  # never trust client-set forwarding headers

# --- the playground's own settings ------------------------------------------------------
# Refuse loopback and private upstream addresses (link-local/metadata are always refused).
PLAYGROUND_REFUSE_PRIVATE_URLS = env.bool("PLAYGROUND_REFUSE_PRIVATE_URLS", default=False)
# Serve the built-in simulator under /simulator/v1 and offer it as the default endpoint.
PLAYGROUND_SIMULATOR = env.bool("PLAYGROUND_SIMULATOR", default=True)
# Tests and benchmarks only: the in-process simulator keeps the requests it received (prompts
# included) and serves them at /simulator/_simulator/requests (to a session or the simulator
# key). Off: it keeps no request bodies and has no control routes.
PLAYGROUND_SIMULATOR_CONTROL = env.bool("PLAYGROUND_SIMULATOR_CONTROL", default=False)
# Largest request body the in-process simulator reads (bytes; more gets 413), and the largest
# structured answer it builds from a JSON schema (characters; minLength/minItems are capped).
PLAYGROUND_SIMULATOR_MAX_BODY_BYTES = env.int("PLAYGROUND_SIMULATOR_MAX_BODY_BYTES", default=32 * 1024 * 1024)
PLAYGROUND_SIMULATOR_MAX_ANSWER_CHARS = env.int("PLAYGROUND_SIMULATOR_MAX_ANSWER_CHARS", default=200_000)
# Partial-save (heartbeat) period of a running turn, seconds.
PLAYGROUND_PARTIAL_SAVE_S = env.float("PLAYGROUND_PARTIAL_SAVE_S", default=2.0)
# Minimum gap between two delta frames of one message, seconds (the first token goes at once).
PLAYGROUND_FRAME_INTERVAL_S = env.float("PLAYGROUND_FRAME_INTERVAL_S", default=0.05)
# Largest image or audio attachment, bytes.
PLAYGROUND_MAX_ATTACHMENT_BYTES = env.int("PLAYGROUND_MAX_ATTACHMENT_BYTES", default=10 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = PLAYGROUND_MAX_ATTACHMENT_BYTES + 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = PLAYGROUND_MAX_ATTACHMENT_BYTES + 1024 * 1024
# At most this many attachments, and this many bytes of them, on one message. Uploads not yet
# sent count against both (a message can carry only those), so remove a chip to upload more.
PLAYGROUND_MAX_ATTACHMENTS_PER_MESSAGE = env.int("PLAYGROUND_MAX_ATTACHMENTS_PER_MESSAGE", default=10)
PLAYGROUND_MAX_ATTACHMENT_BYTES_PER_MESSAGE = env.int(
    "PLAYGROUND_MAX_ATTACHMENT_BYTES_PER_MESSAGE", default=20 * 1024 * 1024
)
# All attachments of one user, sent or not, bytes.
PLAYGROUND_ATTACHMENT_QUOTA_BYTES = env.int("PLAYGROUND_ATTACHMENT_QUOTA_BYTES", default=200 * 1024 * 1024)
# Uploads never sent with a message are deleted after this many hours (manage.py
# attachments_cleanup; the server also runs it on upload, at most every 10 minutes).
PLAYGROUND_ORPHAN_ATTACHMENT_HOURS = env.float("PLAYGROUND_ORPHAN_ATTACHMENT_HOURS", default=24.0)
# Largest websocket message, bytes: the browser checks before sending, and daphne's
# --websocket_max_message_size in `make run` must be the same (Makefile WS_MAX_MESSAGE_BYTES).
PLAYGROUND_WS_MAX_MESSAGE_BYTES = env.int("PLAYGROUND_WS_MAX_MESSAGE_BYTES", default=1024 * 1024)
# Admission control (chat/turns.py Admission): running turns per process and per user; turns
# over a bound wait in a FIFO queue (position shown) of at most PLAYGROUND_MAX_QUEUED_TURNS,
# beyond which an action is refused with a clear message. The process default sits below the
# relay's measured knee (README, "Relay benchmark").
PLAYGROUND_MAX_TURNS = env.int("PLAYGROUND_MAX_TURNS", default=100)
PLAYGROUND_MAX_TURNS_PER_USER = env.int("PLAYGROUND_MAX_TURNS_PER_USER", default=20)
PLAYGROUND_MAX_QUEUED_TURNS = env.int("PLAYGROUND_MAX_QUEUED_TURNS", default=500)
# Share links: "anyone with the link" allowed (off: only signed-in users may open shared pages).
PLAYGROUND_PUBLIC_SHARE_LINKS = env.bool("PLAYGROUND_PUBLIC_SHARE_LINKS", default=True)
# Limits of one turn: its duration, the longest silence of its upstream, and its answer size
# (text + reasoning, characters); past one the turn ends with a clear error, its text kept.
PLAYGROUND_MAX_TURN_S = env.float("PLAYGROUND_MAX_TURN_S", default=1800.0)
PLAYGROUND_IDLE_TIMEOUT_S = env.float("PLAYGROUND_IDLE_TIMEOUT_S", default=600.0)
PLAYGROUND_MAX_ANSWER_CHARS = env.int("PLAYGROUND_MAX_ANSWER_CHARS", default=2_000_000)
# Reader threads for turn plans (chat/db.py); writes go through one writer thread.
PLAYGROUND_DB_READERS = env.int("PLAYGROUND_DB_READERS", default=4)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("DJANGO_LOG_LEVEL", default="INFO")},
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}
