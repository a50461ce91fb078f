"""Django settings for the playground, read from the environment (django-environ).

Development defaults are safe and need nothing running: SQLite file in ``var/``, the in-memory
channel layer, a generated dev encryption key. With ``DJANGO_DEBUG=false`` (production) the
process refuses to start without ``DJANGO_SECRET_KEY`` and ``PLAYGROUND_ENCRYPTION_KEYS``, and
refuses ``DJANGO_ALLOWED_HOSTS=*``. Every variable is documented in ``.env.example``.
"""

from __future__ import annotations

import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# Read after .env; an empty value (as in .env.example) means the default.
VAR_DIR = Path(os.environ.get("PLAYGROUND_VAR_DIR") or BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env.bool("DJANGO_DEBUG", default=True)

_DEV_SECRET = "dev-insecure-secret-key-change-me-0123456789abcdefghijklmnopqrstuvwxyz"
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is false.")
    SECRET_KEY = _DEV_SECRET

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
# Rotate by prepending a new key. A dev key is derived from the secret key in DEBUG only.
PLAYGROUND_ENCRYPTION_KEYS = env.list("PLAYGROUND_ENCRYPTION_KEYS", default=[])
if not PLAYGROUND_ENCRYPTION_KEYS and not DEBUG:
    raise ImproperlyConfigured("PLAYGROUND_ENCRYPTION_KEYS must be set when DJANGO_DEBUG is false.")

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
    "chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
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
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if not DEBUG:
    SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# --- the playground's own settings ------------------------------------------------------
# Refuse loopback and private upstream addresses (link-local/metadata are always refused).
PLAYGROUND_REFUSE_PRIVATE_URLS = env.bool("PLAYGROUND_REFUSE_PRIVATE_URLS", default=False)
# Serve the built-in simulator under /simulator/v1 and offer it as the default endpoint.
PLAYGROUND_SIMULATOR = env.bool("PLAYGROUND_SIMULATOR", default=True)
# Expose the in-process simulator's request recorder (/simulator/_simulator/…, no auth, holds
# prompts): for tests and benchmarks only.
PLAYGROUND_SIMULATOR_CONTROL = env.bool("PLAYGROUND_SIMULATOR_CONTROL", default=False)
# Partial-save (heartbeat) period of a running turn, seconds.
PLAYGROUND_PARTIAL_SAVE_S = env.float("PLAYGROUND_PARTIAL_SAVE_S", default=2.0)
# Minimum gap between two delta frames of one message, seconds (the first token goes at once).
PLAYGROUND_FRAME_INTERVAL_S = env.float("PLAYGROUND_FRAME_INTERVAL_S", default=0.04)
# Largest image or audio attachment, bytes.
PLAYGROUND_MAX_ATTACHMENT_BYTES = env.int("PLAYGROUND_MAX_ATTACHMENT_BYTES", default=10 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = PLAYGROUND_MAX_ATTACHMENT_BYTES + 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = PLAYGROUND_MAX_ATTACHMENT_BYTES + 1024 * 1024
# Admission control (chat/turns.py Admission): running turns per process and per user; turns
# over a bound wait in a FIFO queue (position shown) of at most PLAYGROUND_MAX_QUEUED_TURNS,
# beyond which an action is refused with a clear message. The process default sits below the
# relay's measured knee (README, "Relay benchmark").
PLAYGROUND_MAX_TURNS = env.int("PLAYGROUND_MAX_TURNS", default=100)
PLAYGROUND_MAX_TURNS_PER_USER = env.int("PLAYGROUND_MAX_TURNS_PER_USER", default=20)
PLAYGROUND_MAX_QUEUED_TURNS = env.int("PLAYGROUND_MAX_QUEUED_TURNS", default=500)
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
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
