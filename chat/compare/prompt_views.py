"""Pages linking comparisons and the prompt library: "Use in compare" from a prompt version,
"Version" per lane, and "Save as prompt" from a lane.

The variables' values and each lane's chosen version live in the session under
:data:`SESSION_KEY` (``{str(conversation id): {"prompt_id", "version_id", "values", "send",
"lanes": {str(lane id): version id}}}``, the 5 newest comparisons), so picking another version
for a lane fills it with the same values. ``send`` is taken out once the compare page shows it.

May import: Django, chat.selectors, chat.compare.*, chat.prompts.*.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages as flash
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from chat import selectors
from chat.compare import display
from chat.compare import prompts as compare_prompts
from chat.compare import selectors as cs
from chat.compare import services as compare_services
from chat.prompts import forms as prompt_forms
from chat.prompts import selectors as prompt_selectors
from chat.prompts import services as prompt_services
from chat.prompts import variables
from chat.prompts.models import PromptVersion

SESSION_KEY = "compare_prompt"
KEEP = 5


def _state(request: HttpRequest, conversation_id: int) -> dict[str, Any] | None:
    return (request.session.get(SESSION_KEY) or {}).get(str(conversation_id))


def _store(request: HttpRequest, conversation_id: int, state: dict[str, Any]) -> None:
    all_ = dict(request.session.get(SESSION_KEY) or {})
    all_.pop(str(conversation_id), None)
    all_[str(conversation_id)] = state
    request.session[SESSION_KEY] = dict(list(all_.items())[-KEEP:])


def compare_from_prompt(request: HttpRequest, prompt_id: int) -> HttpResponse:
    """``/compare/from-prompt/<prompt id>/?v=N``: ask for version N's variables (default the
    newest version), then open a new comparison with two lanes set from it; the compare page
    sends the last user message (the turn records the version)."""
    prompt = prompt_selectors.prompt_get_for_user(user=request.user, prompt_id=prompt_id)
    raw_v = request.POST.get("v") or request.GET.get("v")
    version = prompt_selectors.version_get(prompt=prompt, number=raw_v) if raw_v else prompt_selectors.version_latest(prompt=prompt)
    names = prompt_selectors.version_variables(version)
    form = prompt_forms.use_form(names, request.POST if request.method == "POST" else None)
    missing: list[str] = []
    if request.method == "POST":
        missing, _ = variables.check(names, {n: request.POST.get(n, "") for n in names})
        if form.is_valid() and not missing:
            values = {n: form.cleaned_data[n] for n in names}
            use = compare_prompts.compare_from_version(user=request.user, version=version, values=values,
                                                       blind=request.POST.get("blind") == "on")
            lanes = cs.lanes_of(conversation=use.conversation)
            _store(request, use.conversation.pk, {
                "prompt_id": prompt.pk, "version_id": version.pk, "values": values, "send": use.send,
                "lanes": {str(lane.pk): version.pk for lane in lanes},
            })
            return redirect("chat:compare", conversation_id=use.conversation.pk)
    return render(request, "compare/use_prompt.html", {
        "prompt": prompt, "version": version, "form": form, "missing": missing, "variables": names,
    })


def decorate(request: HttpRequest, conversation: Any, lane_views: list[display.LaneView]) -> dict[str, Any]:
    """Give each lane view the prompt versions it may pick (``lv.prompt_versions``) and its
    chosen version (``lv.version_id``, ``lv.version_number``) when the comparison came from a
    prompt; return the page's context: ``prompt_use`` (the send still to make, taken out of
    the session) and ``prompt_source`` (the prompt)."""
    state = _state(request, conversation.pk)
    if not state:
        return {}
    try:
        prompt = prompt_selectors.prompt_get_for_user(user=request.user, prompt_id=state.get("prompt_id"))
    except Http404:
        return {}
    versions = list(prompt.versions.order_by("-number").only("id", "number"))
    by_id = {v.pk: v for v in versions}
    for lv in lane_views:
        vid = (state.get("lanes") or {}).get(str(lv.lane.pk)) or state.get("version_id")
        lv.prompt_versions = versions  # type: ignore[attr-defined]
        lv.version_id = vid if vid in by_id else None  # type: ignore[attr-defined]
        lv.version_number = by_id[vid].number if vid in by_id else None  # type: ignore[attr-defined]
    out: dict[str, Any] = {"prompt_source": prompt}
    if state.get("send"):
        out["prompt_use"] = {"send": state["send"], "version_id": state["version_id"]}
        _store(request, conversation.pk, {**state, "send": ""})
    return out


def lanes_response(request: HttpRequest, conversation: Any) -> HttpResponse:
    """The ``#lanes`` region, with the lanes' prompt versions (see :func:`decorate`)."""
    lanes = cs.lanes_of(conversation=conversation)
    rows = cs.compare_rows(conversation=conversation)
    endpoints = list(selectors.endpoint_list_for_user(user=request.user))
    from chat.turns import registry

    html = display.render_lanes(conversation, lanes, rows, endpoints, registry.live_view,
                                decorate=lambda views: decorate(request, conversation, views), request=request)
    return HttpResponse(html)


@require_POST
def lane_version(request: HttpRequest, conversation_id: int, lane_id: int) -> HttpResponse:
    """Set one lane from another version (POST ``number``) of the prompt the comparison came
    from, filled with the same values; returns the ``#lanes`` region. 404 when the comparison
    did not come from a prompt (in this session) or the version is not the prompt's."""
    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    state = _state(request, conversation.pk)
    if not state:
        raise Http404("This comparison did not come from a prompt")
    prompt = prompt_selectors.prompt_get_for_user(user=request.user, prompt_id=state["prompt_id"])
    version: PromptVersion = prompt_selectors.version_get(prompt=prompt, number=request.POST.get("number"))
    try:
        compare_prompts.lane_apply_version(user=request.user, conversation=conversation, lane_id=lane_id,
                                           version=version, values=state.get("values") or {})
    except compare_services.LaneRefused as exc:
        raise Http404("No such lane") from exc
    except prompt_services.PromptError as exc:
        response = lanes_response(request, conversation)
        response["HX-Trigger"] = json.dumps({"pg:notice": str(exc)[:200]})
        return response
    _store(request, conversation.pk, {**state, "lanes": {**(state.get("lanes") or {}), str(lane_id): version.pk}})
    return lanes_response(request, conversation)


@require_POST
def lane_save_prompt(request: HttpRequest, conversation_id: int, lane_id: int) -> HttpResponse:
    """"Save as prompt" from one lane (POST ``name``). Refused (404) while blind mode hides the
    lanes' settings."""
    conversation = cs.compare_get_for_user(user=request.user, conversation_id=conversation_id)
    if cs.settings_hidden(conversation=conversation, rows=cs.compare_rows(conversation=conversation)):
        raise Http404("Vote first")
    form = prompt_forms.SaveAsPromptForm(request.POST)
    if not form.is_valid():
        flash.error(request, "Give the prompt a valid name (letters, digits, spaces, _ . -).")
        return redirect("chat:compare", conversation_id=conversation.pk)
    try:
        prompt = compare_prompts.lane_save_as_prompt(user=request.user, conversation=conversation, lane_id=lane_id,
                                                     name=form.cleaned_data["name"])
    except compare_services.LaneRefused as exc:
        raise Http404("No such lane") from exc
    except prompt_services.PromptError as exc:
        flash.error(request, str(exc))
        return redirect("chat:compare", conversation_id=conversation.pk)
    flash.success(request, f"Saved as prompt “{prompt.name}”.")
    return redirect("prompts:detail", prompt.pk)
