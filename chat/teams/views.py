"""Pages of teams, usage and budgets, and the staff's user administration. Thin: every object
comes from :mod:`chat.teams.selectors` (another user's or a non-member's ids give 404; a plain
member gets 404 on owner actions) and every change goes through :mod:`chat.teams.services`.

May import: Django, chat.selectors, chat.services, chat.teams.
"""

from __future__ import annotations

import csv
import datetime as dt
from typing import Any

from django.contrib import messages as flash
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import SetPasswordForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from chat.teams import chart, services
from chat.teams import selectors as teams
from chat.teams.models import Budget, BudgetUnit, Role

# ---- teams -------------------------------------------------------------------------------


def team_list(request: HttpRequest) -> HttpResponse:
    """The user's teams; POST creates one (the user becomes its owner)."""
    if request.method == "POST":
        try:
            team = services.team_create(user=request.user, name=request.POST.get("name", ""))
        except services.TeamError as exc:
            flash.error(request, str(exc))
            return redirect("chat:teams")
        request.session[teams.WORKSPACE_KEY] = team.pk
        flash.success(request, f"Team “{team.name}” created; you are its owner.")
        return redirect("chat:team", team_id=team.pk)
    return render(request, "teams/list.html", {"teams": teams.teams_for_user(user=request.user)})


@require_GET
def team_detail(request: HttpRequest, team_id: int) -> HttpResponse:
    """A team: its members and shared endpoints; owners also see roles, budgets and each
    member's use this month."""
    team = teams.team_get_for_user(user=request.user, team_id=team_id)
    is_owner = team.my_role == Role.OWNER
    members = list(teams.team_members(team=team))
    budget = Budget.objects.filter(team=team).first()
    if is_owner:
        month = teams.UsageScope(since=teams.month_start(), until=_today(), team_id=team.pk)
        used = {r["usage_user_id"]: r for r in teams.usage_for(scope=month, by_member=True).members}
        for m in members:
            r = used.get(m.user_id, {})
            m.used_tokens = (r.get("prompt") or 0) + (r.get("completion") or 0)
            m.used_usd = r.get("cost") or 0.0
            m.user_budget = Budget.objects.filter(user_id=m.user_id).first()
    return render(request, "teams/detail.html", {
        "team": team, "is_owner": is_owner, "members": members, "budget": budget,
        "budget_spent": teams.budget_spent(budget=budget) if budget else None,
        "endpoints": team.endpoints.all(), "units": BudgetUnit.choices, "roles": Role.choices,
    })


@require_POST
def member_add(request: HttpRequest, team_id: int) -> HttpResponse:
    team = teams.team_get_for_user(user=request.user, team_id=team_id, owner=True)
    try:
        m = services.member_add(team=team, who=request.POST.get("who", ""), role=request.POST.get("role", Role.MEMBER))
        flash.success(request, f"{m.user.get_username()} added as {m.role}.")
    except services.TeamError as exc:
        flash.error(request, str(exc))
    return redirect("chat:team", team_id=team.pk)


@require_POST
def member_remove(request: HttpRequest, membership_id: int) -> HttpResponse:
    """An owner removes a member (or leaves: a member may remove their own membership)."""
    try:
        m = teams.membership_get_for_owner(user=request.user, membership_id=membership_id)
    except Http404:
        m = teams.Membership.objects.filter(pk=_int(membership_id), user_id=request.user.pk).select_related("team", "user").first()
        if m is None:
            raise
    try:
        services.member_remove(membership=m)
        flash.success(request, f"{m.user.get_username()} is no longer in “{m.team.name}”.")
    except services.TeamError as exc:
        flash.error(request, str(exc))
    if m.user_id == request.user.pk:
        return redirect("chat:teams")
    return redirect("chat:team", team_id=m.team_id)


@require_POST
def member_role(request: HttpRequest, membership_id: int) -> HttpResponse:
    m = teams.membership_get_for_owner(user=request.user, membership_id=membership_id)
    try:
        services.member_set_role(membership=m, role=request.POST.get("role", ""))
        flash.success(request, f"{m.user.get_username()} is now {m.role}.")
    except services.TeamError as exc:
        flash.error(request, str(exc))
    return redirect("chat:team", team_id=m.team_id)


@require_POST
def team_budget(request: HttpRequest, team_id: int) -> HttpResponse:
    team = teams.team_get_for_user(user=request.user, team_id=team_id, owner=True)
    try:
        services.budget_set(team=team, unit=request.POST.get("unit", ""), amount=request.POST.get("amount", ""))
        flash.success(request, "Team budget saved.")
    except services.TeamError as exc:
        flash.error(request, str(exc))
    return redirect("chat:team", team_id=team.pk)


@require_POST
def workspace_switch(request: HttpRequest) -> HttpResponse:
    """Switch the top bar's workspace: "personal" or a team the user is in (else 404)."""
    value = request.POST.get("workspace", "personal")
    if value == "personal":
        request.session.pop(teams.WORKSPACE_KEY, None)
    else:
        team = teams.team_get_for_user(user=request.user, team_id=value)
        request.session[teams.WORKSPACE_KEY] = team.pk
    target = request.POST.get("next") or ""
    if not target.startswith("/") or target.startswith("//"):
        target = "/"
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
        return response
    return redirect(target)


# ---- usage -------------------------------------------------------------------------------

MAX_DAYS = 366


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _today() -> dt.date:
    return timezone.now().astimezone(dt.UTC).date()


def _scope(request: HttpRequest) -> tuple[teams.UsageScope, Any, bool]:
    """The usage scope of the request: the workspace (personal, or a team: owners see every
    member, members their own use), the range (``days`` back from today, 1..366, default 30),
    and a member filter for owners (``member``)."""
    team = teams.workspace_team(user=request.user, session=request.session)
    days = max(1, min(MAX_DAYS, _int(request.GET.get("days", 30)) if request.GET.get("days") else 30))
    until = _today()
    since = until - dt.timedelta(days=days - 1)
    if team is None:
        return teams.UsageScope(since=since, until=until, user_id=request.user.pk), None, False
    is_owner = team.my_role == Role.OWNER
    member = _int(request.GET.get("member")) if is_owner and request.GET.get("member") else None
    user_id = member if is_owner else request.user.pk
    return teams.UsageScope(since=since, until=until, team_id=team.pk, user_id=user_id), team, is_owner


@require_GET
def usage(request: HttpRequest) -> HttpResponse:
    """Tokens (prompt, completion, reasoning, cached), cost in USD and turns per day and month,
    by endpoint and model with median TTFT and tokens per second; by member for team owners.
    ``metric``: "tokens" | "cost" for the chart."""
    scope, team, is_owner = _scope(request)
    u = teams.usage_for(scope=scope, by_member=is_owner)
    metric = "cost" if request.GET.get("metric") == "cost" else "tokens"
    budget = Budget.objects.filter(team=team).first() if team else Budget.objects.filter(user=request.user).first()
    return render(request, "teams/usage.html", {
        "u": u, "team": team, "is_owner": is_owner, "scope": scope, "metric": metric,
        "chart": chart.stacked_by_model(u.daily, since=scope.since, until=scope.until, metric=metric),
        "days": (scope.until - scope.since).days + 1, "budget": budget,
        "budget_spent": teams.budget_spent(budget=budget) if budget else None,
        "member_id": scope.user_id if is_owner else None, "day_choices": (7, 30, 90, 365),
    })


@require_GET
def usage_csv(request: HttpRequest) -> HttpResponse:
    """The usage page's daily figures by endpoint and model as CSV (same scope as the page)."""
    scope, team, is_owner = _scope(request)
    rows = teams.usage_daily_csv(scope=scope)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="usage.csv"'
    w = csv.writer(response)
    w.writerow(["day", "user", "endpoint", "model", "turns", "prompt_tokens", "completion_tokens",
                "reasoning_tokens", "cached_tokens", "cost_usd"])
    for r in rows:
        w.writerow([r["usage_day"], r["username"], r["endpoint_name"], _csv_safe(r["usage_model"]), r["turns"],
                    r["prompt"], r["completion"], r["reasoning"], r["cached"], f"{r['cost']:.6f}"])
    return response


def _csv_safe(text: str) -> str:
    """A cell a spreadsheet will not run as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


# ---- user administration (staff) --------------------------------------------------------


def _user(user_id: int) -> Any:
    try:
        return get_user_model().objects.get(pk=user_id)
    except get_user_model().DoesNotExist as exc:
        raise Http404("No such user") from exc


@staff_member_required(login_url="login")
@require_POST
def user_active(request: HttpRequest, user_id: int) -> HttpResponse:
    """Deactivate (sockets close at once) or reactivate an account; never one's own."""
    u = _user(user_id)
    if u.pk == request.user.pk:
        flash.error(request, "You cannot deactivate your own account.")
        return redirect("chat:users")
    active = request.POST.get("active") == "1"
    services.user_set_active(user=u, active=active)
    flash.success(request, f"{u.get_username()} is {'active' if active else 'deactivated'}.")
    return redirect("chat:users")


@staff_member_required(login_url="login")
def user_password(request: HttpRequest, user_id: int) -> HttpResponse:
    """Set a new password for another account (its sessions end); one's own goes through the
    ordinary password change (which asks for the old one and keeps this session)."""
    u = _user(user_id)
    if u.pk == request.user.pk:
        return redirect("password_change")
    form = SetPasswordForm(u, request.POST or None)
    if request.method == "POST" and form.is_valid():
        services.user_reset_password(user=u, password=form.cleaned_data["new_password1"])
        flash.success(request, f"Password of {u.get_username()} reset. Tell them the new one.")
        return redirect("chat:users")
    return render(request, "teams/user_password.html", {"form": form, "target": u})


@staff_member_required(login_url="login")
@require_POST
def user_budget(request: HttpRequest, user_id: int) -> HttpResponse:
    """Set or clear a user's monthly budget (USD or tokens)."""
    u = _user(user_id)
    try:
        services.budget_set(user=u, unit=request.POST.get("unit", ""), amount=request.POST.get("amount", ""))
        flash.success(request, f"Budget of {u.get_username()} saved.")
    except services.TeamError as exc:
        flash.error(request, str(exc))
    return redirect("chat:users")
