"""Encryption at rest for endpoint secrets (API keys, extra header values).

Uses cryptography's MultiFernet with keys from ``settings.PLAYGROUND_ENCRYPTION_KEYS``: the
first key encrypts, every key decrypts, so rotation is "prepend a new key, re-save". Without
the variable, settings generate one key into ``var/`` on first start; key material never
derives from ``SECRET_KEY``.

May import: Django settings, cryptography.
"""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretDecryptionError(Exception):
    """A stored secret could not be decrypted with any configured key."""


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    if not keys:
        raise SecretDecryptionError("PLAYGROUND_ENCRYPTION_KEYS is empty: no key to encrypt with")
    return MultiFernet([Fernet(k.encode() if isinstance(k, str) else k) for k in keys])


def fernet() -> MultiFernet:
    """The MultiFernet for the configured keys (cached per key set). Raises
    SecretDecryptionError when no key is configured."""
    return _fernet(tuple(settings.PLAYGROUND_ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    """Encrypt ``plaintext`` (UTF-8) to a Fernet token string; "" stays ""."""
    if not plaintext:
        return ""
    return fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    """Decrypt a token made by :func:`encrypt`. Raises SecretDecryptionError on a bad key."""
    if not token:
        return ""
    try:
        return fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise SecretDecryptionError("stored secret cannot be decrypted with the configured keys") from exc


def hint(secret: str) -> str:
    """What the UI may show of a secret: ``…`` plus its last 4 characters ("" when empty)."""
    if not secret:
        return ""
    return "…" + secret[-4:] if len(secret) > 8 else "…"
