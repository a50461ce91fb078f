"""Writes of teams and user administration. Every function takes objects the caller already
checked through :mod:`chat.teams.selectors` (or staff status for accounts).

Removing a member takes effect at once: the row goes, and every socket of that user (in every
daphne process, through the channel layer) is told to stop its turns on the team's endpoints;
their next page load, websocket message and turn plan no longer find the team's endpoints.

May import: Django, channels (through chat.signals), chat.models, chat.teams.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q

from chat import signals
from chat.models import Endpoint, Message, MessageStatus
from chat.teams.models import Budget, BudgetUnit, Membership, Role, Team

log = logging.getLogger(__name__)

TEAM_REVOKE = "team.revoke"


class TeamError(ValueError):
    """An action that would break a rule (the last owner, an unknown user, a duplicate)."""


def team_create(*, user: AbstractBaseUser, name: str) -> Team:
    """A new team with ``user`` as its owner."""
    name = name.strip()[:100]
    if not name:
        raise TeamError("Give the team a name.")
    with transaction.atomic():
        team = Team.objects.create(name=name)
        Membership.objects.create(team=team, user=user, role=Role.OWNER)
    return team


def member_add(*, team: Team, who: str, role: str = Role.MEMBER) -> Membership:
    """Add an existing active account, by username or email (case-insensitive). Raises TeamError."""
    who = who.strip()
    if not who or len(who) > 254:
        raise TeamError("Type the username or email of an existing account.")
    User = get_user_model()
    users = list(User.objects.filter(Q(username__iexact=who) | Q(email__iexact=who), is_active=True)[:2])
    if len(users) != 1:
        raise TeamError(f"No single active account has the username or email “{who}”.")
    if Membership.objects.filter(team=team, user=users[0]).exists():
        raise TeamError(f"{users[0].get_username()} is in the team already.")
    return Membership.objects.create(team=team, user=users[0], role=role if role in Role.values else Role.MEMBER)


def _owners(team_id: int) -> int:
    return Membership.objects.select_for_update().filter(team_id=team_id, role=Role.OWNER).count()


def member_set_role(*, membership: Membership, role: str) -> Membership:
    """Make a member an owner or an owner a member. Raises TeamError for the last owner."""
    if role not in Role.values:
        raise TeamError("Unknown role.")
    with transaction.atomic():
        if membership.role == Role.OWNER and role != Role.OWNER and _owners(membership.team_id) <= 1:
            raise TeamError("A team always keeps an owner: make someone else an owner first.")
        Membership.objects.filter(pk=membership.pk).update(role=role)
        membership.role = role
    return membership


def member_remove(*, membership: Membership) -> None:
    """Remove a member (or owner, not the last one). Their running turns on the team's endpoints
    stop and their sockets refuse those endpoints from now on. Raises TeamError."""
    team_id, user_id = membership.team_id, membership.user_id
    with transaction.atomic():
        if membership.role == Role.OWNER and _owners(team_id) <= 1:
            raise TeamError("A team always keeps an owner: make someone else an owner first.")
        Membership.objects.filter(pk=membership.pk).delete()
        endpoint_ids = [str(i) for i in Endpoint.objects.filter(team_id=team_id).values_list("pk", flat=True)]
        transaction.on_commit(lambda: revoke_endpoints(user_id=user_id, endpoint_ids=endpoint_ids))


def revoke_endpoints(*, user_id: int, endpoint_ids: list[str]) -> None:
    """Tell every socket of ``user_id`` (every process) to stop its turns on ``endpoint_ids``;
    with a shared channel layer (Redis) also tell the process streaming each of the user's
    answers on them, which stops it even when the user has no page open there."""
    signals._send(signals.user_group(user_id), {"type": TEAM_REVOKE, "endpoint_ids": endpoint_ids})
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer) or not endpoint_ids:
        return  # one process: its sockets (above) are the only way to its turns
    running = Message.objects.filter(
        status=MessageStatus.STREAMING, usage_user_id=user_id, usage_endpoint_id__in=[int(i) for i in endpoint_ids]
    ).exclude(owner_channel="").values_list("id", "owner_channel")
    for mid, channel in running:
        try:
            async_to_sync(layer.send)(channel, {"type": "turn.stop", "mid": str(mid)})
        except Exception:
            log.warning("stopping %s on %s failed", mid, channel, exc_info=True)


def team_delete(*, team: Team) -> None:
    """Delete a team and its endpoints; its members' running turns on them stop."""
    users = list(Membership.objects.filter(team=team).values_list("user_id", flat=True))
    endpoint_ids = [str(i) for i in Endpoint.objects.filter(team=team).values_list("pk", flat=True)]
    team.delete()
    for uid in users:
        revoke_endpoints(user_id=uid, endpoint_ids=endpoint_ids)


def budget_set(*, team: Team | None = None, user: AbstractBaseUser | None = None, unit: str, amount: Any) -> Budget | None:
    """Set (``amount`` > 0), or remove (``amount`` empty or 0), the monthly budget of a team or a
    user. ``unit``: "usd" | "tokens". Raises TeamError for a bad amount."""
    if (team is None) == (user is None):
        raise ValueError("a budget is a team's or a user's")
    owner = {"team": team} if team is not None else {"user": user}
    if amount in (None, ""):
        Budget.objects.filter(**owner).delete()
        return None
    try:
        value = Decimal(str(amount))
    except Exception as exc:
        raise TeamError("The budget is a number.") from exc
    if not value.is_finite() or value < 0 or value > Decimal("1e9"):
        raise TeamError("The budget is a number from 0 to 1,000,000,000.")
    if value == 0:
        Budget.objects.filter(**owner).delete()
        return None
    if unit not in BudgetUnit.values:
        raise TeamError("The unit is USD or tokens.")
    budget, _ = Budget.objects.update_or_create(**owner, defaults={"unit": unit, "amount": value})
    return budget


# ---- user administration (staff) --------------------------------------------------------


def user_set_active(*, user: AbstractBaseUser, active: bool) -> None:
    """Deactivate (their sockets close at once: :mod:`chat.signals`) or reactivate an account."""
    user.is_active = active
    user.save(update_fields=["is_active"])


def user_reset_password(*, user: AbstractBaseUser, password: str) -> None:
    """Set a new password (the user's other sessions end and their sockets reconnect or close)."""
    user.set_password(password)
    user.save(update_fields=["password"])
