"""Open websockets lose their authorization the moment the session that opened them does.

A conversation socket joins two channel-layer groups when it connects: its user's
(:func:`user_group`) and its session's (:func:`session_group`, a hash of the session key, never
the key). Then:

- logging out closes the sockets of that session;
- deactivating or deleting a user closes all of their sockets;
- changing a user's password closes every socket of the user with 1012 ("reconnect"): the
  page reconnects at once, and the handshake admits only a browser whose session is still
  valid (Django keeps the session that changed the password, ``update_session_auth_hash``,
  and ends the others, which then get 4401).

Through the channel layer this reaches every daphne process (Redis in the scaled set-up, the
in-memory layer in one process). Close code 4401 unless said otherwise.

May import: Django (auth, signals), channels, the standard library.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

log = logging.getLogger(__name__)

REVOKE = "auth.revoke"
CHECK = "auth.check"


def user_group(user_id: int) -> str:
    """The group of every open socket of ``user_id``."""
    return f"auth.user.{user_id}"


def session_group(session_key: str) -> str:
    """The group of the sockets opened by one session (a hash: the key never leaves the server)."""
    return "auth.session." + hashlib.sha256(session_key.encode()).hexdigest()[:32]


def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except RuntimeError:  # called from async code: schedule it on the running loop instead
        import asyncio

        asyncio.get_running_loop().create_task(layer.group_send(group, message))
    except Exception:
        log.warning("closing the sockets of %s failed", group, exc_info=True)


@receiver(user_logged_out)
def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        _send(session_group(key), {"type": REVOKE, "reason": "logged out"})


@receiver(pre_save, sender=get_user_model())
def _remember_password(sender: Any, instance: Any, **kwargs: Any) -> None:
    if instance.pk is None:
        return
    old = sender.objects.filter(pk=instance.pk).values_list("password", "is_active").first()
    instance._auth_before = old


@receiver(post_save, sender=get_user_model())
def _user_saved(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    before = getattr(instance, "_auth_before", None)
    if created or before is None:
        return
    password, was_active = before
    if was_active and not instance.is_active:
        _send(user_group(instance.pk), {"type": REVOKE, "reason": "deactivated"})
    elif password != instance.password:
        _send(user_group(instance.pk), {"type": CHECK})


@receiver(post_delete, sender=get_user_model())
def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    _send(user_group(instance.pk), {"type": REVOKE, "reason": "deleted"})
