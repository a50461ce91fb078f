"""Reads of teams: the one ownership rule for endpoints, teams and memberships, budgets, usage.

Ownership (the only place it is decided):

- the endpoints a user may USE: their own, and those of every team they are a member of
  (:func:`endpoints_usable`);
- the endpoints a user may EDIT and see the settings of: their own, and those of the teams they
  own (:func:`endpoints_manageable`). Nobody is ever shown a key or secret header value.

Usage is computed with aggregate queries over stored assistant messages (their ``usage_*``
columns, set in the INSERT that starts a turn, indexed by user/team/endpoint and UTC day):
nothing is written per turn for it.

May import: Django, chat.models (and chat.teams.models).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import (
    Count,
    F,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.functions import Coalesce, Floor
from django.http import Http404
from django.utils import timezone

from chat.models import Endpoint, Message
from chat.teams.models import Budget, BudgetUnit, Membership, Role, Team

# ---- ownership ---------------------------------------------------------------------------


def endpoints_usable(*, user: AbstractBaseUser) -> QuerySet[Endpoint]:
    """Endpoints ``user`` may chat with: own + every team they are a member of (any role)."""
    teams = Membership.objects.filter(user_id=user.pk).values("team_id")
    return Endpoint.objects.filter(Q(owner_id=user.pk) | Q(team_id__in=teams)).select_related("team")


def endpoints_manageable(*, user: AbstractBaseUser) -> QuerySet[Endpoint]:
    """Endpoints ``user`` may edit, test and delete: own + the teams they own."""
    teams = Membership.objects.filter(user_id=user.pk, role=Role.OWNER).values("team_id")
    return Endpoint.objects.filter(Q(owner_id=user.pk) | Q(team_id__in=teams)).select_related("team")


def endpoint_can_manage(*, user: AbstractBaseUser, endpoint: Endpoint) -> bool:
    """Whether ``user`` may see ``endpoint``'s settings (own, or owner of its team)."""
    if endpoint.owner_id is not None:
        return endpoint.owner_id == user.pk
    return Membership.objects.filter(team_id=endpoint.team_id, user_id=user.pk, role=Role.OWNER).exists()


def teams_for_user(*, user: AbstractBaseUser) -> QuerySet[Team]:
    """The teams ``user`` is in, each with ``my_role`` ("owner" | "member")."""
    return Team.objects.filter(memberships__user_id=user.pk).annotate(my_role=F("memberships__role")).order_by(
        "name", "id"
    )


def team_get_for_user(*, user: AbstractBaseUser, team_id: Any, owner: bool = False) -> Team:
    """The team if ``user`` is a member (an owner with ``owner=True``), with ``my_role``.
    Raises Http404 otherwise (also for a malformed id): a non-member learns nothing."""
    try:
        m = Membership.objects.select_related("team").get(team_id=int(team_id), user_id=user.pk)
    except (Membership.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such team") from exc
    if owner and m.role != Role.OWNER:
        raise Http404("No such team")
    team = m.team
    team.my_role = m.role
    return team


def team_members(*, team: Team) -> QuerySet[Membership]:
    """The team's memberships with their users, owners first."""
    return Membership.objects.filter(team=team).select_related("user").order_by("role", "user__username")


def membership_get_for_owner(*, user: AbstractBaseUser, membership_id: Any) -> Membership:
    """A membership of a team ``user`` owns. Raises Http404 otherwise."""
    try:
        m = Membership.objects.select_related("team", "user").get(pk=int(membership_id))
    except (Membership.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404("No such membership") from exc
    team_get_for_user(user=user, team_id=m.team_id, owner=True)
    return m


# ---- budgets -----------------------------------------------------------------------------


def month_start(today: dt.date | None = None) -> dt.date:
    """The first day of the current UTC month."""
    today = today or timezone.now().astimezone(dt.UTC).date()
    return today.replace(day=1)


def _spent(qs: QuerySet[Message]) -> dict[str, float]:
    row = qs.aggregate(
        tokens=Coalesce(Sum("usage_prompt"), 0) + Coalesce(Sum("usage_completion"), 0),
        usd=Coalesce(Sum("usage_cost_usd"), 0.0),
    )
    return {"tokens": float(row["tokens"] or 0), "usd": float(row["usd"] or 0.0)}


def budget_spent(*, budget: Budget, user_id: int | None = None) -> float:
    """What ``budget``'s owner used this UTC month, in the budget's unit (USD or tokens, prompt +
    completion). ``user_id`` narrows a team budget to one member (shown to owners)."""
    qs = Message.objects.filter(usage_day__gte=month_start())
    qs = qs.filter(usage_team_id=budget.team_id) if budget.team_id else qs.filter(usage_user_id=budget.user_id)
    if user_id is not None:
        qs = qs.filter(usage_user_id=user_id)
    spent = _spent(qs)
    return spent["usd"] if budget.unit == BudgetUnit.USD else spent["tokens"]


def budget_reached(*, user: AbstractBaseUser, endpoint: Endpoint) -> Budget | None:
    """The first budget a new turn of ``user`` on ``endpoint`` would go over (the user's own,
    then the endpoint's team's), or None. Two small aggregate reads at most."""
    budgets = Budget.objects.filter(Q(user_id=user.pk) | Q(team_id=endpoint.team_id) if endpoint.team_id else Q(user_id=user.pk))
    for b in sorted(budgets.select_related("team"), key=lambda b: b.team_id is not None):
        if budget_spent(budget=b) >= float(b.amount):
            return b
    return None


# ---- usage -------------------------------------------------------------------------------

PROMPT = F("usage_prompt")
COMPLETION = F("usage_completion")
REASONING = F("usage_reasoning")
CACHED = F("usage_cached")
COST = F("usage_cost_usd")

FIGURES = {
    "turns": Count("usage_day"),  # never null in the usage indexes: counted from the index alone
    "prompt": Coalesce(Sum(PROMPT), 0),
    "completion": Coalesce(Sum(COMPLETION), 0),
    "reasoning": Coalesce(Sum(REASONING), 0),
    "cached": Coalesce(Sum(CACHED), 0),
    "cost": Coalesce(Sum(COST), 0.0),
}


@dataclass
class UsageScope:
    """Which turns a usage page counts: a user's (``user_id``), a team's (``team_id``, narrowed
    to ``user_id`` when set), from ``since`` to ``until`` (UTC days, inclusive)."""

    since: dt.date
    until: dt.date
    user_id: int | None = None
    team_id: int | None = None

    def queryset(self) -> QuerySet[Message]:
        qs = Message.objects.filter(usage_day__gte=self.since, usage_day__lte=self.until)
        if self.team_id is not None:
            qs = qs.filter(usage_team_id=self.team_id)
        if self.user_id is not None:
            qs = qs.filter(usage_user_id=self.user_id)
        return qs


@dataclass
class Usage:
    """Aggregated usage. ``daily``: rows ``{usage_day, usage_model, turns, prompt, completion,
    reasoning, cached, cost}``; ``groups``: by endpoint and model with ``endpoint_name``,
    ``median_ttft_ms`` and ``median_tokens_per_sec``; ``members``: by user (team owners);
    ``monthly``: by month; ``by_day``: by day, newest first; ``totals``. Tokens are counts, cost USD."""

    daily: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    members: list[dict[str, Any]] = field(default_factory=list)
    monthly: list[dict[str, Any]] = field(default_factory=list)
    by_day: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)


def _medians(qs: QuerySet[Message], column: str, per_unit: int) -> dict[tuple[Any, str], float]:
    """Median of ``column`` per (endpoint, model), to ``1 / per_unit`` of its unit, from one
    aggregate query: a histogram of the values in steps of ``1 / per_unit`` (TTFT to the
    millisecond, tokens per second to a tenth), walked in order up to the middle count. The
    walk is over histogram steps, never over turns; a window function ranking every turn was
    ten times slower on SQLite."""
    rows = (
        qs.filter(**{f"{column}__isnull": False})
        .annotate(step=Floor(F(column) * per_unit))
        .values("usage_endpoint_id", "usage_model", "step")
        .annotate(n=Count("usage_day"))
        .order_by("usage_endpoint_id", "usage_model", "step")
        .values_list("usage_endpoint_id", "usage_model", "step", "n")
    )
    hist: dict[tuple[Any, str], list[tuple[int, int]]] = {}
    for endpoint_id, model, step, n in rows:
        hist.setdefault((endpoint_id, model), []).append((step, n))
    out: dict[tuple[Any, str], float] = {}
    for key, steps in hist.items():
        total = sum(n for _, n in steps)
        lo_rank, hi_rank = (total + 1) // 2, total // 2 + 1  # 1-based middle ranks (equal when odd)
        seen, lo, hi = 0, None, None
        for step, n in steps:
            seen += n
            if lo is None and seen >= lo_rank:
                lo = step
            if seen >= hi_rank:
                hi = step
                break
        out[key] = (lo + hi) / 2 / per_unit  # type: ignore[operator]
    return out


def _roll(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Sum the :data:`FIGURES` of already aggregated ``rows`` by ``keys`` (sorted by them)."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        k = tuple(r[x] for x in keys)
        acc = out.get(k)
        if acc is None:
            out[k] = {**{x: r[x] for x in keys}, **{f: r[f] for f in FIGURES}}
        else:
            for f in FIGURES:
                acc[f] += r[f]
    return [out[k] for k in sorted(out, key=lambda k: tuple((x is None, x) for x in k))]


def usage_for(*, scope: UsageScope, by_member: bool = False) -> Usage:
    """The usage of ``scope`` from three aggregate queries over the usage index: the figures by
    (day, endpoint, model, user) — at most days × endpoints × models × users rows, rolled up
    here into days, months, endpoint/model groups and members — and the TTFT and tokens per
    second histograms for the medians. No loop over turns. ``by_member`` fills ``members``."""
    qs = scope.queryset()
    out = Usage()
    fine = list(
        qs.values("usage_day", "usage_endpoint_id", "usage_model", "usage_user_id").annotate(**FIGURES).order_by()
    )
    out.daily = _roll(fine, ("usage_day", "usage_model"))
    groups = _roll(fine, ("usage_endpoint_id", "usage_model"))
    names = dict(
        Endpoint.objects.filter(pk__in=[g["usage_endpoint_id"] for g in groups if g["usage_endpoint_id"]])
        .values_list("pk", "name")
    )
    ttft, tps = _medians(qs, "usage_ttft_ms", 1), _medians(qs, "usage_tokens_per_sec", 10)
    for g in groups:
        key = (g["usage_endpoint_id"], g["usage_model"])
        g["endpoint_name"] = names.get(g["usage_endpoint_id"], "(deleted endpoint)")
        g["median_ttft_ms"] = ttft.get(key)
        g["median_tokens_per_sec"] = tps.get(key)
    out.groups = groups
    if by_member:
        rows = sorted(_roll(fine, ("usage_user_id",)), key=lambda r: -r["turns"])
        users = dict(get_user_model().objects.filter(pk__in=[r["usage_user_id"] for r in rows]).values_list("pk", "username"))
        for r in rows:
            r["username"] = users.get(r["usage_user_id"], "(deleted user)")
        out.members = rows
    for r in out.daily:
        r["month"] = r["usage_day"].strftime("%Y-%m")
    out.monthly = _roll(out.daily, ("month",))
    out.by_day = list(reversed(_roll(out.daily, ("usage_day",))))
    for r in out.by_day:
        r["day"] = r["usage_day"]
    totals = _roll([{**r, "all": 1} for r in out.monthly], ("all",))
    out.totals = totals[0] if totals else {k: 0 for k in FIGURES}
    return out


def decimal_or_none(value: Any) -> Decimal | None:
    """``value`` as a Decimal, or None when it is not a number."""
    try:
        return Decimal(str(value))
    except Exception:
        return None


# ---- workspace ---------------------------------------------------------------------------

WORKSPACE_KEY = "workspace"


def workspace_team(*, user: AbstractBaseUser, session: Any) -> Team | None:
    """The team the user's current workspace is (the session remembers it), or None for the
    personal workspace; a team the user is no longer in counts as personal."""
    tid = session.get(WORKSPACE_KEY) if session is not None else None
    if not tid:
        return None
    try:
        return team_get_for_user(user=user, team_id=tid)
    except Http404:
        return None


def usage_daily_csv(*, scope: UsageScope) -> list[dict[str, Any]]:
    """Rows for the CSV: per UTC day, user, endpoint and model, the usage figures, with
    ``username`` and ``endpoint_name`` (one aggregate query and two name lookups)."""
    rows = list(
        scope.queryset().values("usage_day", "usage_user_id", "usage_endpoint_id", "usage_model")
        .annotate(**FIGURES).order_by("usage_day", "usage_user_id", "usage_endpoint_id", "usage_model")
    )
    users = dict(get_user_model().objects.filter(pk__in={r["usage_user_id"] for r in rows}).values_list("pk", "username"))
    names = dict(Endpoint.objects.filter(pk__in={r["usage_endpoint_id"] for r in rows}).values_list("pk", "name"))
    for r in rows:
        r["username"] = users.get(r["usage_user_id"], "")
        r["endpoint_name"] = names.get(r["usage_endpoint_id"], "(deleted endpoint)")
    return rows
