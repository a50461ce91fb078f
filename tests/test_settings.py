"""Settings from the environment: production refuses unsafe configurations at start-up, and
the default run (no variable set) is not a debug run: its secrets are generated into ``var/``
(mode 0600) and the encryption key never derives from the secret key (issue 8 item 5).

Each case starts a fresh ``python -c "…django.setup()"`` process with every ``DJANGO_*`` and
``PLAYGROUND_*`` variable removed from its environment, then sets only what the case needs
(real environment variables win over a ``.env`` file, so an empty value also defeats one).
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent

PROBE = (
    "import os; os.environ['DJANGO_SETTINGS_MODULE']='playground.settings'; "
    "import django; django.setup(); "
    "from django.conf import settings as s; "
    "print('DEBUG=%s' % s.DEBUG); print('HOSTS=%s' % ','.join(s.ALLOWED_HOSTS)); "
    "print('KEYS=%d' % len(s.PLAYGROUND_ENCRYPTION_KEYS)); "
    "print('ENGINE=%s' % s.DATABASES['default']['ENGINE']); "
    "print('DBNAME=%s' % s.DATABASES['default']['NAME']); "
    "print('VAR=%s' % s.VAR_DIR); "
    "import hashlib; h = lambda v: hashlib.sha256(v.encode()).hexdigest()[:12]; "
    "print('SECRET=%s' % h(s.SECRET_KEY)); print('ENC=%s' % h(s.PLAYGROUND_ENCRYPTION_KEYS[0])); "
    "print('SIMKEY=%s' % h(s.PLAYGROUND_SIMULATOR_KEY))"
)

CLEARED_PREFIXES = ("DJANGO_", "PLAYGROUND_")
CLEARED_NAMES = {"DATABASE_URL", "REDIS_URL", "SAMBANOVA_API_KEY", "SANSA_API_KEY"}

PROD_SECRET = "a-long-random-production-secret-0123456789-abcdefghijklmnop"


def production(**extra: str) -> dict[str, str]:
    env = {
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": PROD_SECRET,
        "PLAYGROUND_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "DJANGO_ALLOWED_HOSTS": "playground.example.com",
    }
    env.update(extra)
    return env


def _env_example() -> dict[str, str]:
    out = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip()
    return out


_no_secret = production(PLAYGROUND_GENERATE_SECRETS="false")
del _no_secret["DJANGO_SECRET_KEY"]
_no_secrets_generated = production()
del _no_secrets_generated["DJANGO_SECRET_KEY"]
del _no_secrets_generated["PLAYGROUND_ENCRYPTION_KEYS"]

#: name -> (environment of the case, whether PLAYGROUND_VAR_DIR is left to the case)
CASES: dict[str, tuple[dict[str, str], bool]] = {
    "no_secret_empty": (production(DJANGO_SECRET_KEY="", PLAYGROUND_GENERATE_SECRETS="false"), False),
    "no_secret_unset": (_no_secret, False),
    "no_secret_upper_false": (
        production(DJANGO_DEBUG="FALSE", DJANGO_SECRET_KEY="", PLAYGROUND_GENERATE_SECRETS="0"), False
    ),
    "no_keys": (production(PLAYGROUND_ENCRYPTION_KEYS="", PLAYGROUND_GENERATE_SECRETS="false"), False),
    "generated": (_no_secrets_generated, False),
    "same_secret_a": ({"DJANGO_SECRET_KEY": PROD_SECRET}, False),
    "same_secret_b": ({"DJANGO_SECRET_KEY": PROD_SECRET}, False),
    "hosts_star": (production(DJANGO_ALLOWED_HOSTS="*"), False),
    "hosts_list_star": (production(DJANGO_ALLOWED_HOSTS="playground.example.com,*"), False),
    "hosts_list_space_star": (production(DJANGO_ALLOWED_HOSTS="playground.example.com, *"), False),
    "prod_ok_false": (production(DJANGO_DEBUG="false"), False),
    "prod_ok_zero": (production(DJANGO_DEBUG="0"), False),
    "debug_star": ({"DJANGO_DEBUG": "true", "DJANGO_ALLOWED_HOSTS": "*"}, False),
    "defaults": ({}, False),
    "env_example": (_env_example(), True),
}


@pytest.fixture(scope="module")
def results(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[subprocess.CompletedProcess[str], Path]]:
    """Every case, each in its own process, all started at once (a start-up takes ~3 s)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(CLEARED_PREFIXES) and k not in CLEARED_NAMES
    }
    procs = {}
    for name, (case_env, own_var_dir) in CASES.items():
        var_dir = tmp_path_factory.mktemp(f"settings-{name}")
        env = dict(clean)
        if not own_var_dir:
            # Keep the SQLite default away from the project's var/.
            env["PLAYGROUND_VAR_DIR"] = str(var_dir)
        env.update(case_env)
        proc = subprocess.Popen(
            [sys.executable, "-c", PROBE],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs[name] = (proc, var_dir)
    out = {}
    for name, (proc, var_dir) in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        out[name] = (
            subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr),
            var_dir,
        )
    return out


def _probe(case_env: dict[str, str], var_dir: Path) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(CLEARED_PREFIXES) and k not in CLEARED_NAMES
    }
    env = {**clean, "PLAYGROUND_VAR_DIR": str(var_dir), **case_env}
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def values(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    out = {}
    for line in proc.stdout.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


@pytest.mark.parametrize("case", ["no_secret_empty", "no_secret_unset", "no_secret_upper_false"])
def test_production_without_secret_key_refuses(results, case: str) -> None:  # noqa: ANN001
    proc, _ = results[case]
    assert proc.returncode != 0, proc.stdout
    assert "ImproperlyConfigured" in proc.stderr
    assert "DJANGO_SECRET_KEY" in proc.stderr


def test_production_without_encryption_keys_refuses(results) -> None:  # noqa: ANN001
    proc, _ = results["no_keys"]
    assert proc.returncode != 0, proc.stdout
    assert "ImproperlyConfigured" in proc.stderr
    assert "PLAYGROUND_ENCRYPTION_KEYS" in proc.stderr


@pytest.mark.parametrize("case", ["hosts_star", "hosts_list_star", "hosts_list_space_star"])
def test_production_with_wildcard_hosts_refuses(results, case: str) -> None:  # noqa: ANN001
    proc, _ = results[case]
    assert proc.returncode != 0, proc.stdout
    assert "ImproperlyConfigured" in proc.stderr
    assert "DJANGO_ALLOWED_HOSTS" in proc.stderr


@pytest.mark.parametrize("case", ["prod_ok_false", "prod_ok_zero"])
def test_production_with_everything_set_starts(results, case: str) -> None:  # noqa: ANN001
    proc, _ = results[case]
    assert proc.returncode == 0, proc.stderr
    got = values(proc)
    assert got["DEBUG"] == "False"
    assert got["HOSTS"] == "playground.example.com"
    assert got["KEYS"] == "1"


def test_debug_allows_wildcard_hosts(results) -> None:  # noqa: ANN001
    proc, _ = results["debug_star"]
    assert proc.returncode == 0, proc.stderr
    got = values(proc)
    assert got["DEBUG"] == "True"
    assert got["HOSTS"] == "*"
    assert got["KEYS"] == "1"  # generated into var/, never derived from the secret key


def test_defaults_without_any_variable_start_without_debug(results) -> None:  # noqa: ANN001
    """``make run`` on a fresh machine: not a debug run, SQLite in var/, and the secret key,
    encryption key and simulator key generated into var/ with mode 0600."""
    proc, var_dir = results["defaults"]
    assert proc.returncode == 0, proc.stderr
    got = values(proc)
    assert got["DEBUG"] == "False"
    assert got["HOSTS"] == "127.0.0.1,localhost,[::1]"
    assert got["ENGINE"] == "django.db.backends.sqlite3"
    assert got["DBNAME"] == str(var_dir / "db.sqlite3")
    assert got["KEYS"] == "1"
    for name in ("secret_key", "encryption_key", "simulator_key"):
        path = var_dir / name
        assert path.exists(), name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
        assert len(path.read_text().strip()) >= 40, name
    assert got["SECRET"] == hashlib.sha256((var_dir / "secret_key").read_text().strip().encode()).hexdigest()[:12]
    assert got["ENC"] == hashlib.sha256((var_dir / "encryption_key").read_text().strip().encode()).hexdigest()[:12]
    assert len({got["SECRET"], got["ENC"], got["SIMKEY"]}) == 3


def test_generated_secrets_are_kept_across_starts(results) -> None:  # noqa: ANN001
    proc, var_dir = results["defaults"]
    again = _probe({}, var_dir)
    assert again.returncode == 0, again.stderr
    first, second = values(proc), values(again)
    assert (first["SECRET"], first["ENC"], first["SIMKEY"]) == (second["SECRET"], second["ENC"], second["SIMKEY"])


def test_production_without_secrets_generates_them_unless_told_not_to(results) -> None:  # noqa: ANN001
    proc, var_dir = results["generated"]
    assert proc.returncode == 0, proc.stderr
    assert values(proc)["DEBUG"] == "False"
    assert stat.S_IMODE((var_dir / "encryption_key").stat().st_mode) == 0o600


def test_encryption_key_never_derives_from_the_secret_key(results) -> None:  # noqa: ANN001
    """The same DJANGO_SECRET_KEY on two installs gives two unrelated encryption keys (the
    old development key was sha256 of the secret key, public in the repository)."""
    a, _ = results["same_secret_a"]
    b, _ = results["same_secret_b"]
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert values(a)["SECRET"] == values(b)["SECRET"]
    assert values(a)["ENC"] != values(b)["ENC"]


def test_a_secret_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret_key").write_text("x" * 60)
    os.chmod(tmp_path / "secret_key", 0o644)
    proc = _probe({}, tmp_path)
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr and "chmod 600" in proc.stderr


def test_env_example_values_start(results) -> None:  # noqa: ANN001
    """``.env.example`` says "copy to .env": its values (many empty) must give a working dev
    set-up; an empty ``DATABASE_URL`` / ``PLAYGROUND_VAR_DIR`` means the default."""
    assert {"DJANGO_SECRET_KEY", "PLAYGROUND_ENCRYPTION_KEYS", "DATABASE_URL"} <= set(
        _env_example()
    )
    proc, _ = results["env_example"]
    assert proc.returncode == 0, proc.stderr
    got = values(proc)
    assert got["ENGINE"] == "django.db.backends.sqlite3"
    assert got["VAR"] == str(ROOT / "var")
    assert got["DBNAME"] == str(ROOT / "var" / "db.sqlite3")
