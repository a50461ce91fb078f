"""Share-link views: create (from a conversation the user owns), list and revoke (own links),
the shared page (public or signed-in only) and "continue as a copy".

May import: Django, chat.selectors, chat.rendering, chat.sharing.*.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from chat import rendering
from chat import selectors as chat_selectors
from chat.sharing import services
from chat.sharing.models import ShareLink


def _list(request: HttpRequest, *, new_url: str | None = None, error: str = "") -> HttpResponse:
    return render(request, "sharing/list.html", {
        "links": ShareLink.objects.filter(owner=request.user).select_related("team").defer("snapshot")[:200], "new_url": new_url,
        "error": error, "public_allowed": services.public_links_allowed(),
    })


def share_list(request: HttpRequest) -> HttpResponse:
    """The user's links with their state; revoke with POST ``revoke=<id>``."""
    if request.method == "POST":
        raw_id = request.POST.get("revoke", "")
        if not raw_id.isdigit() or not services.share_revoke(user=request.user, link_id=int(raw_id)):
            raise Http404("No such link")
        return redirect("sharing:list")
    return _list(request)


@require_POST
def share_new(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Share the current branch of a conversation the user owns (404 otherwise). The page shows
    the link once (only its hash is stored)."""
    conversation = chat_selectors.refuse_if_blind(
        chat_selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id))
    try:
        _, raw = services.share_create(
            user=request.user, conversation=conversation, visibility=request.POST.get("visibility", "link"),
            include_reasoning=request.POST.get("include_reasoning") == "on", expires=request.POST.get("expires", ""),
        )
    except ValueError as exc:
        return _list(request, error=str(exc))
    return _list(request, new_url=request.build_absolute_uri(reverse("sharing:view", args=[raw])))


@require_POST
def share_new_run(request: HttpRequest, run_id: int) -> HttpResponse:
    """Share a test-set run the user owns (404 otherwise) as a frozen grid."""
    from chat.prompts import testsets

    run = testsets.run_get_for_user(user=request.user, run_id=run_id)
    try:
        _, raw = services.share_create_run(
            user=request.user, run=run, grid=testsets.run_grid(run=run),
            visibility=request.POST.get("visibility", "link"), expires=request.POST.get("expires", ""),
        )
    except ValueError as exc:
        return _list(request, error=str(exc))
    return _list(request, new_url=request.build_absolute_uri(reverse("sharing:view", args=[raw])))


@require_POST
def share_new_compare(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Share a comparison the user owns (404 otherwise) as a frozen snapshot of its lanes and
    answers. A blind one awaiting its vote is refused with the reason (its owner asked; the
    snapshot would show the models)."""
    from chat.compare import selectors as compare_selectors

    conversation = compare_selectors.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    if chat_selectors.blind_pending(conversation):
        response = _list(request, error="Not shared: this blind comparison hides its models until you vote. "
                                        "Vote on the last turn, then share it.")
        response.status_code = 409
        return response
    try:
        _, raw = services.share_create_compare(
            user=request.user, conversation=conversation, visibility=request.POST.get("visibility", "link"),
            include_reasoning=request.POST.get("include_reasoning") == "on", expires=request.POST.get("expires", ""),
        )
    except ValueError as exc:
        return _list(request, error=str(exc))
    return _list(request, new_url=request.build_absolute_uri(reverse("sharing:view", args=[raw])))


def _gone(request: HttpRequest, state: str) -> HttpResponse:
    """The 404 page of a link that cannot open: ``state`` missing | revoked | expired |
    public_off (an "anyone with the link" link while the admin forbids public links: it says
    so and offers sign-in)."""
    response = render(request, "sharing/gone.html", {"state": state, "next": request.get_full_path()}, status=404)
    response["Referrer-Policy"] = "same-origin"  # no referrer to external links; forms keep their Origin
    return response


def _resolve(request: HttpRequest, token: str) -> tuple[ShareLink | None, HttpResponse | None]:
    link = services.share_resolve(raw=token)
    if link is None:
        return None, _gone(request, "missing")
    if link.state != "active":
        return None, _gone(request, link.state)
    if not services.share_can_open(user=request.user, link=link):
        if link.visibility == "link" and not request.user.is_authenticated:
            return None, _gone(request, "public_off")  # the admin switched public links off
        if not request.user.is_authenticated:
            return None, redirect_to_login(request.get_full_path())
        return None, _gone(request, "missing")  # a team link, and not (or no longer) a member
    return link, None


@login_not_required
def share_view(request: HttpRequest, token: str) -> HttpResponse:
    """The read-only snapshot. Revoked, expired or unknown links: a 404 page saying which."""
    link, refusal = _resolve(request, token)
    if refusal is not None:
        return refusal
    snap = link.snapshot
    if link.kind == "run":
        response = render(request, "sharing/view_run.html", {"link": link, "snap": snap})
        response["Referrer-Policy"] = "same-origin"
        return response
    if link.kind == "compare":
        turns = [{"prompt_html": mark_safe(rendering.render_markdown(t.get("prompt", ""))),  # noqa: S308
                  "answers": [None if a is None else {
                      **a, "html": mark_safe(rendering.render_markdown(a.get("content", ""))),  # noqa: S308
                      "reasoning_html": mark_safe(rendering.render_markdown(a.get("reasoning", "")))}  # noqa: S308
                      for a in t.get("answers") or []]}
                 for t in snap.get("turns") or []]
        response = render(request, "sharing/view_compare.html", {"link": link, "snap": snap, "turns": turns})
        response["Referrer-Policy"] = "same-origin"
        return response
    messages: list[dict[str, Any]] = []
    for m in snap.get("messages") or []:
        # The chat page's sanitizer (markdown-it + nh3) for everything a model or user wrote.
        messages.append({**m, "html": mark_safe(rendering.render_markdown(m.get("content", ""))),  # noqa: S308
                         "reasoning_html": mark_safe(rendering.render_markdown(m.get("reasoning", "")))})  # noqa: S308
    response = render(request, "sharing/view.html", {"link": link, "snap": snap, "shared_messages": messages, "token": token})
    response["Referrer-Policy"] = "same-origin"  # no referrer to external links; forms keep their Origin
    return response


@require_POST
def share_copy(request: HttpRequest, token: str) -> HttpResponse:
    """"Continue as a copy" into the signed-in viewer's workspace."""
    link, refusal = _resolve(request, token)
    if refusal is not None:
        return refusal
    if link.kind != "conversation":
        raise Http404("Only a shared conversation can be copied")
    conv = services.share_copy(user=request.user, link=link)
    return redirect("chat:conversation", conv.pk)


# ---- export / import of conversations ---------------------------------------------------------


def conversation_export_json(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Download the user's conversation (every branch, attachments included) as JSON."""
    import json

    from chat.sharing import transfer

    conversation = chat_selectors.refuse_if_blind(
        chat_selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id))
    body = json.dumps(transfer.conversation_export(conversation=conversation), ensure_ascii=False)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="conversation-{conversation.pk}.json"'
    return response


def conversation_export_md(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Download the current branch of the user's conversation as Markdown."""
    from chat.sharing import transfer

    conversation = chat_selectors.refuse_if_blind(
        chat_selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id))
    response = HttpResponse(transfer.conversation_markdown(conversation=conversation), content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="conversation-{conversation.pk}.md"'
    return response


@require_POST
def conversation_import(request: HttpRequest) -> HttpResponse:
    """Import a JSON export into the user's workspace: a conversation
    (``playground.conversation/1``) or a comparison (``"kind": "comparison"``,
    ``chat.compare.transfer``), told apart by the file's ``kind``/``format``. A bad file is
    refused with the reason and imports nothing."""
    from django.contrib import messages as flash

    from chat.compare import transfer as compare_transfer
    from chat.sharing import transfer

    upload = request.FILES.get("file")
    try:
        if upload is None:
            raise transfer.ImportRefused("Choose a JSON export file.")
        if upload.size > transfer.MAX_FILE_BYTES:
            raise transfer.ImportRefused("The file is larger than 64 MB.")
        raw = upload.read(transfer.MAX_FILE_BYTES + 1)
        data = transfer.load_json(raw)
        kind = transfer.export_kind(data)
        if kind == "comparison":
            if len(raw) > compare_transfer.MAX_FILE_BYTES:
                raise transfer.ImportRefused(f"A comparison export is at most {compare_transfer.MAX_FILE_BYTES // (1024 * 1024)} MB.")
            comparison, notes = compare_transfer.comparison_import(user=request.user, data=data)
        else:
            conv = transfer.conversation_import(user=request.user, raw=raw, data=data)
    except (transfer.ImportRefused, compare_transfer.ImportRefused) as exc:
        flash.error(request, f"Import refused: {exc}")
        return redirect("sharing:list")
    if kind == "comparison":
        flash.success(request, "Comparison imported. Lanes: " + " ".join(notes))
        return redirect("chat:compare", comparison.pk)
    flash.success(request, "Conversation imported.")
    return redirect("chat:conversation", conv.pk)
