"""Account fixtures shared by the view and service tests: fast password hashing, a fresh
middleware cache around every test, and a logged-in test client. The two users ``alice`` and
``bob`` (the second user of every authorization test) are fixtures in conftest.py.

Import what a module uses (``from tests.accounts import PASSWORD, client_for, fast_accounts
# noqa: F401``); pytest finds fixtures, autouse ones included, in the importing module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client

from chat import middleware

PASSWORD = "correct-horse-battery-9"


@pytest.fixture(autouse=True)
def fast_accounts(settings) -> Iterator[None]:  # noqa: ANN001
    """MD5 hashing (user creation in ms, not 100s of ms) and a middleware cache (the "has any
    user been created" flag) reset before and after each test."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    middleware.reset_cache()
    yield
    middleware.reset_cache()


def client_for(user) -> Client:  # noqa: ANN001
    """A Django test client logged in as ``user``."""
    c = Client()
    c.force_login(user)
    return c
