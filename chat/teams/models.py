"""Rows of teams: ``Team``, ``Membership`` (role owner | member) and monthly ``Budget``s.

An endpoint belongs to a user or to a team (``Endpoint.owner`` xor ``Endpoint.team``). A member
may use a team endpoint; only owners see its settings; nobody sees its key.

May import: Django.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    OWNER = "owner", "owner"
    MEMBER = "member", "member"


class Team(models.Model):
    """A group of users sharing endpoints. Always keeps at least one owner (services enforce it)."""

    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """``user`` is in ``team`` with ``role``. One row per (team, user)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "user"]
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="membership_team_user_unique")]
        indexes = [models.Index(fields=["user", "role"])]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.team_id} ({self.role})"


class BudgetUnit(models.TextChoices):
    USD = "usd", "USD"
    TOKENS = "tokens", "tokens"


class Budget(models.Model):
    """A monthly limit (calendar month, UTC) on a team's use of its endpoints (``team``) or on a
    user's own use of every endpoint (``user``); exactly one of them is set. ``amount`` is USD
    or tokens (prompt + completion) by ``unit``. At the limit a new turn is refused; a turn
    already running is never cut."""

    team = models.OneToOneField(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="budget")
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="budget"
    )
    unit = models.CharField(max_length=8, choices=BudgetUnit.choices, default=BudgetUnit.USD)
    amount = models.DecimalField(max_digits=14, decimal_places=4)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(team__isnull=False, user__isnull=True)
                | models.Q(team__isnull=True, user__isnull=False),
                name="budget_team_xor_user",
            ),
        ]

    def __str__(self) -> str:
        return f"Budget {self.amount} {self.unit}"

    @property
    def label(self) -> str:
        """How a refusal names it: ``team “X” monthly budget`` or ``your monthly budget``."""
        if self.team_id:
            return f"the team “{self.team.name}” monthly budget ({self.amount_text})"
        return f"your monthly budget ({self.amount_text})"

    @property
    def amount_text(self) -> str:
        if self.unit == BudgetUnit.USD:
            return f"${self.amount:,.2f}"
        return f"{int(self.amount):,} tokens"
