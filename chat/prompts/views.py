"""HTTP views of the prompt library. Thin: parse with ``chat.prompts.forms``, read with
``chat.prompts.selectors`` (scoped: another user's private prompt is a 404), write with
``chat.prompts.services``. Owner-only actions use ``prompt_get_owned``.

May import: Django, chat.selectors, chat.prompts.*.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages as flash
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from chat import selectors as chat_selectors
from chat.prompts import forms, selectors, services, variables
from chat.prompts.models import PromptLabelMove, PromptVisibility

SESSION_USE_KEY = "prompt_use"


def _content_initial(version: Any) -> dict[str, Any]:
    config = version.config or {}
    params = dict(config.get("params") or {})
    return {
        "system_prompt": version.system_prompt, "endpoint_id": config.get("endpoint_id"), "model": config.get("model", ""),
        "params": params,
        "json_schema_text": json.dumps(params["json_schema"], indent=2) if params.get("json_schema") else "",
        "tools_text": json.dumps(params["tools"], indent=2) if params.get("tools") else "",
    }


def _message_slots(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    slots = [{"i": i, **r} for i, r in enumerate(rows)]
    for j in range(len(rows), len(rows) + forms.MESSAGE_SLOTS_EXTRA):
        slots.append({"i": j, "role": "user", "content": ""})
    return slots


def prompt_list(request: HttpRequest) -> HttpResponse:
    """The library: visible prompts, searchable by text and tag, sorted by last use."""
    q = request.GET.get("q", "")[: selectors.MAX_SEARCH]
    tag = request.GET.get("tag", "")[:50]
    sort = request.GET.get("sort", "used")
    prompts = selectors.prompt_list_for_user(user=request.user, query=q, tag=tag, sort=sort)[:200]
    return render(request, "prompts/list.html", {
        "prompts": prompts, "q": q, "tag": tag, "sort": sort, "tags": selectors.tags_for_user(user=request.user),
    })


def _editor(request: HttpRequest, *, prompt: Any = None) -> HttpResponse:
    latest = selectors.version_latest(prompt=prompt) if prompt else None
    if request.method == "POST":
        base = ((latest.config or {}).get("params") or {}) if latest else {}
        form = forms.PromptForm(request.POST, user=request.user, base_params=base)
        if form.is_valid():
            d = form.cleaned_data
            try:
                if prompt is None:
                    prompt = services.prompt_create(
                        user=request.user, name=d["name"], description=d["description"], tags=d["tags"],
                        visibility=d["visibility"], content=form.content(), message=d["version_message"],
                        team_id=d.get("team"),
                    )
                    flash.success(request, f"Prompt “{prompt.name}” saved as v1.")
                else:
                    v = services.prompt_save(
                        prompt=prompt, user=request.user, name=d["name"], description=d["description"],
                        tags=d["tags"], visibility=d["visibility"], content=form.content(), message=d["version_message"],
                        team_id=d.get("team"),
                    )
                    flash.success(request, f"Saved v{v.number}." if v else "Saved (content unchanged: no new version).")
                return redirect("prompts:detail", prompt.pk)
            except services.PromptError as exc:
                form.add_error("name", str(exc))
        rows = form.message_rows or []
        initial = {"system_prompt": request.POST.get("system_prompt", ""), "model": request.POST.get("model", ""),
                   "params": request.POST, "json_schema_text": request.POST.get("json_schema", ""),
                   "tools_text": request.POST.get("tools", ""), "endpoint_id": request.POST.get("endpoint_id")}
        found = form.variables()
    else:
        meta = {"name": prompt.name, "description": prompt.description, "tags": ", ".join(prompt.tags),
                "visibility": prompt.visibility, "team": prompt.team_id} if prompt else {"visibility": PromptVisibility.PRIVATE}
        form = forms.PromptForm(initial=meta, user=request.user)
        rows = list(latest.messages) if latest else [{"role": "user", "content": ""}]
        initial = _content_initial(latest) if latest else {"params": {}}
        found = selectors.version_variables(latest) if latest else []
    return render(request, "prompts/edit.html", {
        "form": form, "prompt": prompt, "latest": latest, "slots": _message_slots([r for r in rows if r.get("content")] or []),
        "c": initial, "found_variables": found, "formats": ["", "text", "json_object", "json_schema"],
    })


def prompt_new(request: HttpRequest) -> HttpResponse:
    return _editor(request)


def prompt_edit(request: HttpRequest, prompt_id: int) -> HttpResponse:
    """Owner only: each save with changed content is a new immutable version."""
    return _editor(request, prompt=selectors.prompt_get_owned(user=request.user, prompt_id=prompt_id))


def prompt_detail(request: HttpRequest, prompt_id: int, number: int | None = None) -> HttpResponse:
    """A version (default the newest) with its variables, the history, labels and their moves."""
    prompt = selectors.prompt_get_for_user(user=request.user, prompt_id=prompt_id)
    version = selectors.version_get(prompt=prompt, number=number) if number else selectors.version_latest(prompt=prompt)
    versions = list(prompt.versions.select_related("author").order_by("-number"))
    return render(request, "prompts/detail.html", {
        "prompt": prompt, "version": version, "versions": versions, "is_owner": prompt.owner_id == request.user.pk,
        "labels": selectors.labels_of(prompt=prompt), "variables": selectors.version_variables(version),
        "moves": PromptLabelMove.objects.filter(prompt=prompt).select_related("moved_by")[:50],
        "params_json": json.dumps((version.config or {}).get("params") or {}, indent=2, sort_keys=True),
    })


def prompt_diff(request: HttpRequest, prompt_id: int) -> HttpResponse:
    """Text diff of each field between versions ``a`` and ``b`` (query parameters)."""
    prompt = selectors.prompt_get_for_user(user=request.user, prompt_id=prompt_id)
    a = selectors.version_get(prompt=prompt, number=request.GET.get("a"))
    b = selectors.version_get(prompt=prompt, number=request.GET.get("b"))
    return render(request, "prompts/diff.html", {
        "prompt": prompt, "a": a, "b": b, "fields": selectors.version_diff(a, b),
        "versions": prompt.versions.order_by("-number"),
    })


@require_POST
def prompt_restore(request: HttpRequest, prompt_id: int) -> HttpResponse:
    prompt = selectors.prompt_get_owned(user=request.user, prompt_id=prompt_id)
    v = services.prompt_restore(prompt=prompt, user=request.user, number=request.POST.get("number"))
    flash.success(request, f"Restored as v{v.number}.")
    return redirect("prompts:detail", prompt.pk)


@require_POST
def prompt_label(request: HttpRequest, prompt_id: int) -> HttpResponse:
    prompt = selectors.prompt_get_owned(user=request.user, prompt_id=prompt_id)
    form = forms.LabelForm(request.POST)
    if not form.is_valid():
        flash.error(request, "; ".join(e for errs in form.errors.values() for e in errs))
        return redirect("prompts:detail", prompt.pk)
    services.label_move(prompt=prompt, user=request.user, name=form.cleaned_data["label"], number=form.cleaned_data["number"])
    flash.success(request, f"Label {form.cleaned_data['label']} → v{form.cleaned_data['number']}.")
    return redirect("prompts:detail", prompt.pk)


@require_POST
def prompt_fork(request: HttpRequest, prompt_id: int) -> HttpResponse:
    prompt = selectors.prompt_get_for_user(user=request.user, prompt_id=prompt_id)
    version = selectors.version_get(prompt=prompt, number=request.POST.get("number"))
    form = forms.ForkForm(request.POST)
    if not form.is_valid():
        flash.error(request, "Give the fork a valid name.")
        return redirect("prompts:detail", prompt.pk)
    try:
        fork = services.prompt_fork(user=request.user, version=version, name=form.cleaned_data["name"])
    except services.PromptError as exc:
        flash.error(request, str(exc))
        return redirect("prompts:detail", prompt.pk)
    flash.success(request, f"Forked into your library as “{fork.name}”.")
    return redirect("prompts:detail", fork.pk)


@require_POST
def prompt_delete(request: HttpRequest, prompt_id: int) -> HttpResponse:
    prompt = selectors.prompt_get_owned(user=request.user, prompt_id=prompt_id)
    services.prompt_delete(prompt=prompt)
    flash.success(request, "Prompt deleted.")
    return redirect("prompts:list")


def prompt_use(request: HttpRequest, prompt_id: int) -> HttpResponse:
    """Ask for the variables of version ``v`` (default newest), then open a new conversation with
    the filled prompt; the chat page sends its last user message (see ``prompts_tags``)."""
    prompt = selectors.prompt_get_for_user(user=request.user, prompt_id=prompt_id)
    raw_v = request.POST.get("v") or request.GET.get("v")
    version = selectors.version_get(prompt=prompt, number=raw_v) if raw_v else selectors.version_latest(prompt=prompt)
    names = selectors.version_variables(version)
    form = forms.use_form(names, request.POST if request.method == "POST" else None)
    missing: list[str] = []
    if request.method == "POST":
        values = {n: request.POST.get(n, "") for n in names}
        missing, _ = variables.check(names, values)
        if form.is_valid() and not missing:
            use = services.prompt_use(user=request.user, version=version, values=form.cleaned_data)
            if use.send:
                pending = request.session.get(SESSION_USE_KEY) or {}
                pending[str(use.conversation.pk)] = {"version_id": use.version_id, "send": use.send}
                request.session[SESSION_USE_KEY] = dict(list(pending.items())[-5:])
            return redirect("chat:conversation", use.conversation.pk)
    return render(request, "prompts/use.html", {
        "prompt": prompt, "version": version, "form": form, "missing": missing, "variables": names,
    })


@require_POST
def save_as_prompt(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """"Save as prompt" from a conversation the user owns (404 otherwise)."""
    conversation = chat_selectors.refuse_if_blind(
        chat_selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id))
    form = forms.SaveAsPromptForm(request.POST)
    if not form.is_valid():
        flash.error(request, "Give the prompt a valid name (letters, digits, spaces, _ . -).")
        return redirect("chat:conversation", conversation.pk)
    try:
        prompt = services.prompt_from_conversation(user=request.user, conversation=conversation, name=form.cleaned_data["name"])
    except services.PromptError as exc:
        flash.error(request, str(exc))
        return redirect("chat:conversation", conversation.pk)
    flash.success(request, f"Saved as prompt “{prompt.name}”.")
    return redirect("prompts:detail", prompt.pk)


def prompt_export(request: HttpRequest, prompt_id: int) -> HttpResponse:
    """The prompt with all versions and labels as a JSON download."""
    prompt = selectors.prompt_get_for_user(user=request.user, prompt_id=prompt_id)
    response = JsonResponse(services.prompt_export(prompt=prompt), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="prompt-{prompt.pk}.json"'
    return response


@require_POST
def prompt_import(request: HttpRequest) -> HttpResponse:
    """Import an export file into the user's library; a bad file imports nothing."""
    upload = request.FILES.get("file")
    if upload is None:
        flash.error(request, "Choose a JSON file to import.")
        return redirect("prompts:list")
    if upload.size > forms.MAX_IMPORT_BYTES:
        flash.error(request, "Import refused: the file is larger than 2 MB.")
        return redirect("prompts:list")
    try:
        data = forms.validate_export(upload.read(forms.MAX_IMPORT_BYTES + 1))
        name = (request.POST.get("name") or "").strip() or None
        prompt = services.prompt_import(user=request.user, data=data, name=name)
    except ValidationError as exc:
        flash.error(request, "Import refused: " + " ".join(exc.messages))
        return redirect("prompts:list")
    except services.PromptError as exc:
        flash.error(request, f"Import refused: {exc}")
        return redirect("prompts:list")
    flash.success(request, f"Imported “{prompt.name}” with {prompt.versions.count()} versions.")
    return redirect("prompts:detail", prompt.pk)


#: Session key of a just-created API token, shown once on the next page.
NEW_TOKEN_KEY = "prompts_new_token"


def tokens(request: HttpRequest) -> HttpResponse:
    """API tokens: create and revoke. The raw token is shown once: the POST keeps it in the
    session and redirects (a reload never creates a second token); the next GET pops it."""
    raw = request.session.pop(NEW_TOKEN_KEY, None) if request.method == "GET" else None
    form = forms.TokenForm(request.POST or None)
    if request.method == "POST":
        if request.POST.get("revoke"):
            if not services.token_revoke(user=request.user, token_id=int(request.POST["revoke"]) if request.POST["revoke"].isdigit() else 0):
                raise Http404("No such token")
            flash.success(request, "Token revoked.")
            return redirect("prompts:tokens")
        if form.is_valid():
            _, request.session[NEW_TOKEN_KEY] = services.token_create(user=request.user, name=form.cleaned_data["name"])
            return redirect("prompts:tokens")
    return render(request, "prompts/tokens.html", {
        "tokens": selectors.token_list_for_user(user=request.user), "raw": raw, "form": form,
        "api_example": request.build_absolute_uri(reverse("prompts:api", args=["NAME"])) + "?label=production",
    })
