"""HTTP views: thin. Parse input, call one service or selector, render a template or partial.

Pages: first-account setup, sign-up (when open), users (admin), endpoints (CRUD, test
connection), the chat page with its sidebar, and per-message Inspect. Every view is scoped to
the requesting user through ``selectors.*_get_for_user`` (another user's ids give 404).

May import: Django, django-htmx, chat.forms, chat.selectors, chat.services, chat.frames,
chat.turns (read-only live views), chat.providers, chat.connection (Test connection), chat.codegen.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib import messages as flash
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth import get_user_model, login
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import UserCreationForm
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST, require_safe

from chat import connection, forms, frames, selectors, services
from chat.middleware import reset_cache, users_exist
from chat.models import SiteSettings
from chat.providers.base import EndpointConfig, ProviderError
from chat.teams import selectors as team_selectors
from chat.turns import registry

# ---- accounts ------------------------------------------------------------------------------


@login_not_required
def setup(request: HttpRequest) -> HttpResponse:
    """On an empty database: create the first account, which becomes the admin."""
    if users_exist():
        return redirect("chat:home")
    form = forms.FirstAccountForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = services.user_create_first(
                username=form.cleaned_data["username"], password=form.cleaned_data["password1"]
            )
        except PermissionError:
            reset_cache()
            return redirect("login")
        reset_cache()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("chat:home")
    return render(request, "registration/setup.html", {"form": form})


@login_not_required
def signup(request: HttpRequest) -> HttpResponse:
    """Open sign-up, only when the admin turned it on; while closed, a page that says so and
    whom to ask (HTTP 403), not a 404."""
    if not SiteSettings.load().open_signup:
        return render(request, "registration/signup_closed.html", status=403)
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = services.user_create(username=form.cleaned_data["username"], password=form.cleaned_data["password1"])
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("chat:home")
    return render(request, "registration/signup.html", {"form": form})


def _non_staff_403(view):  # noqa: ANN001, ANN202
    """A signed-in user who is not staff gets the 403 page instead of the login form."""

    @functools.wraps(view)
    def inner(request: HttpRequest, *args, **kwargs) -> HttpResponse:  # noqa: ANN002, ANN003
        if request.user.is_authenticated and not request.user.is_staff:
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return inner


@_non_staff_403
@staff_member_required(login_url="login")
def users(request: HttpRequest) -> HttpResponse:
    """Admin: add users and switch open sign-up (a signed-in non-admin gets the 403 page)."""
    site = SiteSettings.load()
    form = UserCreationForm(request.POST or None if request.POST.get("form") == "create" else None)
    if request.method == "POST":
        if request.POST.get("form") == "signup":
            site.open_signup = request.POST.get("open_signup") == "on"
            site.save()
            flash.success(request, f"Open sign-up is {'on' if site.open_signup else 'off'}.")
            return redirect("chat:users")
        if request.POST.get("form") == "public_share_links":
            from chat.sharing import services as sharing_services

            choice = {"default": None, "on": True, "off": False}.get(request.POST.get("public_share_links", ""), "bad")
            if choice == "bad":
                flash.error(request, "Pick allowed, forbidden or the server default.")
                return redirect("chat:users")
            sharing_services.public_links_set(allowed=choice)
            flash.success(request, "Public share links are " + ("allowed." if sharing_services.public_links_allowed() else "forbidden."))
            return redirect("chat:users")
        if form.is_valid():
            services.user_create(username=form.cleaned_data["username"], password=form.cleaned_data["password1"])
            flash.success(request, f"User {form.cleaned_data['username']} created.")
            return redirect("chat:users")
    return render(
        request, "chat/users.html",
        {"form": form, "site": site, "users": get_user_model().objects.select_related("budget").order_by("username"),
         "units": (("usd", "USD"), ("tokens", "tokens")), **_share_link_setting()},
    )


def _share_link_setting() -> dict[str, Any]:
    """The /users/ page's public-share-links switch: the saved choice (default | on | off), the
    server default and what holds now."""
    from chat.sharing import services as sharing_services

    saved = SiteSettings.load().public_share_links
    return {"public_links_choice": "default" if saved is None else ("on" if saved else "off"),
            "public_links_default": sharing_services.public_links_default(),
            "public_links_allowed": sharing_services.public_links_allowed()}


# ---- endpoints -----------------------------------------------------------------------------


def _allow_private() -> bool:
    return not settings.PLAYGROUND_REFUSE_PRIVATE_URLS


def endpoint_list(request: HttpRequest) -> HttpResponse:
    """The endpoints the user may use; settings, key hints and actions only on those they may
    edit (a team's shared endpoints show only their name to members)."""
    endpoints = list(selectors.endpoint_list_for_user(user=request.user))
    manageable = set(team_selectors.endpoints_manageable(user=request.user).values_list("pk", flat=True))
    for e in endpoints:
        e.can_manage = e.pk in manageable
    return render(request, "chat/endpoints.html", {"endpoints": endpoints, "presets": services.PRESETS})


def endpoint_edit(request: HttpRequest, endpoint_id: int | None = None) -> HttpResponse:
    """Create (no id) or edit an endpoint. Secrets are write-only: blank keeps the stored ones."""
    endpoint = selectors.endpoint_get_for_user(user=request.user, endpoint_id=endpoint_id) if endpoint_id else None
    # The form gets a copy: ModelForm validation writes the posted values onto its instance, and
    # endpoint_update compares the stored base URL with the new one (to drop cached models).
    form = forms.EndpointForm(
        request.POST or None, instance=copy.copy(endpoint) if endpoint else None, allow_private=_allow_private()
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        headers = data.get("extra_headers")
        if data.get("clear_extra_headers"):
            headers = {}
        common: dict[str, Any] = {
            "name": data["name"], "base_url": data["base_url"], "api_style": data["api_style"],
            "api_key": data.get("api_key") or "", "stream_options": data.get("stream_options", True),
            "default_model": data.get("default_model") or "",
        }
        dropped = False
        if endpoint is None:
            endpoint = services.endpoint_create(
                user=request.user, extra_headers=headers or {}, team=_workspace_team_owned(request), **common
            )
        else:
            dropped = services.endpoint_update(
                endpoint=endpoint, extra_headers=headers, clear_api_key=bool(data.get("clear_api_key")), **common
            )
        flash.success(request, f"Endpoint “{endpoint.name}” saved.")
        if dropped:
            flash.warning(
                request, "The base URL now points to another scheme, host or port, so the stored key and "
                "header values were removed. Enter them again if this host should have them.",
            )
        return redirect("chat:endpoints")
    return render(
        request, "chat/endpoint_form.html",
        {"form": form, "endpoint": endpoint, "presets": services.PRESETS,
         "new_for_team": _workspace_team_owned(request) if endpoint is None else None,
         "presets_json": json.dumps({k: {"base_url": v[0], "api_style": str(v[1])} for k, v in services.PRESETS.items()})},
    )


def _workspace_team_owned(request: HttpRequest) -> Any:
    """The current workspace's team when the user owns it (a new endpoint is then the team's), else None."""
    team = team_selectors.workspace_team(user=request.user, session=request.session)
    return team if team is not None and team.my_role == "owner" else None


@require_POST
def endpoint_delete(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    endpoint = selectors.endpoint_get_for_user(user=request.user, endpoint_id=endpoint_id)
    services.endpoint_delete(endpoint=endpoint)
    flash.success(request, "Endpoint deleted.")
    return redirect("chat:endpoints")


def endpoint_base_url_for_request(request: HttpRequest, base_url: str) -> str:
    """Resolve ``sim://`` to the simulator of the server that received this request."""
    if base_url.startswith("sim://"):
        # The port this server listens on (ASGI scope "server"), not the Host header's: behind a
        # proxy, or on port 80/443, the Host header has another port or none at all.
        port = str(request.META.get("SERVER_PORT") or "")
        if not port.isdigit() or port == "0":
            _, sep, host_port = request.get_host().rpartition(":")
            port = host_port if sep and host_port.isdigit() else "8000"
        return f"http://127.0.0.1:{port}/simulator/v1"
    return base_url


_list_models = connection.list_models


@require_POST
def endpoint_test(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    """"Test connection": ``GET {base}/models``; lists models with their metadata, caches them."""
    endpoint = selectors.endpoint_get_for_user(user=request.user, endpoint_id=endpoint_id)
    config = EndpointConfig(
        base_url=endpoint_base_url_for_request(request, endpoint.base_url),
        api_key=endpoint.get_api_key(), extra_headers=endpoint.get_extra_headers(),
        api_style=endpoint.api_style, stream_options=endpoint.stream_options,
    )
    models, error = connection.check(config, is_simulator=endpoint.is_simulator, allow_private=_allow_private())
    if error is None:
        services.endpoint_set_models(endpoint_id=endpoint.pk, models=models)
    return render(request, "chat/endpoints.html#models", {"endpoint": endpoint, "models": models, "error": error})


@require_POST
def endpoint_test_unsaved(request: HttpRequest) -> HttpResponse:
    """"Test connection" on the new/edit form: the same check as :func:`endpoint_test` with the
    values typed (base URL, API style, key, headers), saving nothing (no row, no model cache).

    POST: the endpoint form's fields, plus ``endpoint_id`` when editing (must be an endpoint the
    user may edit, else 404): a blank key or blank headers then mean the stored ones, sent only
    while the base URL keeps their scheme, host and port (:func:`chat.connection.probe_secrets`).
    The base URL follows the form's rules. Returns the result partial (htmx), or the form page
    with the result without JavaScript; neither contains the key or header values."""
    endpoint_id = request.POST.get("endpoint_id") or None
    endpoint = selectors.endpoint_get_for_user(user=request.user, endpoint_id=endpoint_id) if endpoint_id else None
    form = forms.EndpointForm(request.POST, instance=copy.copy(endpoint) if endpoint else None, allow_private=_allow_private())
    form.is_valid()
    data = form.cleaned_data
    problems = {k: v for k, v in form.errors.items() if k in ("base_url", "api_style", "extra_headers", "api_key")}
    models: list[dict[str, Any]] = []
    error = None
    if problems:
        error = {"message": " ".join(str(m) for msgs in problems.values() for m in msgs), "code": "invalid_settings"}
    else:
        key, headers = connection.probe_secrets(
            stored=endpoint, base_url=data["base_url"], api_key=data.get("api_key") or "",
            extra_headers=data.get("extra_headers"), clear_api_key=bool(data.get("clear_api_key")),
            clear_extra_headers=bool(data.get("clear_extra_headers")),
        )
        config = EndpointConfig(
            base_url=endpoint_base_url_for_request(request, data["base_url"]), api_key=key, extra_headers=headers,
            api_style=data["api_style"], stream_options=bool(data.get("stream_options")),
        )
        models, error = connection.check(config, is_simulator=data["base_url"].startswith("sim://"),
                                         allow_private=_allow_private())
    result = {"endpoint": None, "models": models, "error": error, "unsaved": True}
    if request.htmx:
        return render(request, "chat/endpoints.html#models", result)
    return render(
        request, "chat/endpoint_form.html",
        {"form": form, "endpoint": endpoint, "presets": services.PRESETS, "test_result": result,
         "new_for_team": _workspace_team_owned(request) if endpoint is None else None,
         "presets_json": json.dumps({k: {"base_url": v[0], "api_style": str(v[1])} for k, v in services.PRESETS.items()})},
    )


def endpoint_models(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    """``<option>``s of an endpoint's model ids, for the model picker's datalist.

    GET reads the cached list only (nothing is written or fetched on a GET); when it is empty
    the partial asks again by POST at once. POST (the refresh button, or that follow-up) calls
    ``GET {base}/models`` upstream and caches the result.
    """
    endpoint = selectors.endpoint_usable_get_for_user(user=request.user, endpoint_id=endpoint_id)
    models = endpoint.models_cache
    if request.method == "POST":
        try:
            config = EndpointConfig(
                base_url=endpoint_base_url_for_request(request, endpoint.base_url),
                api_key=endpoint.get_api_key(), extra_headers=endpoint.get_extra_headers(),
                api_style=endpoint.api_style, stream_options=endpoint.stream_options,
            )
            if not endpoint.is_simulator:
                from chat.providers.http import check_base_url

                check_base_url(config.base_url, allow_private=_allow_private())
            models = async_to_sync(_list_models)(config)
            services.endpoint_set_models(endpoint_id=endpoint.pk, models=models)
        except (ProviderError, ValueError):
            models = []
    elif request.method != "GET":
        return HttpResponseNotAllowed(["GET", "POST"])
    return render(request, "chat/conversation.html#model-options", {
        "models": models, "endpoint": endpoint, "fetch_models": request.method == "GET" and not models,
    })


# ---- conversations -------------------------------------------------------------------------


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """A new chat, without writing on a GET: the user's newest empty conversation when there is
    one, else a page whose form POSTs to ``conversation_new`` (app.js submits it at once; without
    JavaScript it is a button)."""
    conversation = selectors.conversation_empty_for_user(user=request.user)
    if conversation is not None:
        return redirect("chat:conversation", conversation_id=conversation.pk)
    return render(request, "chat/home.html")


@require_POST
def conversation_new(request: HttpRequest) -> HttpResponse:
    # A new chat keeps the last chat's endpoint, model and settings (issue 10).
    conversation = services.conversation_create_like_last(user=request.user)
    return redirect("chat:conversation", conversation_id=conversation.pk)


def conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conv = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    if conv.kind == "compare":  # links to "a conversation" may point at a comparison
        return redirect("chat:compare", conversation_id=conv.pk)
    endpoints = list(selectors.endpoint_list_for_user(user=request.user))
    params = forms.ParamsForm(initial={
        **conv.params, "stop": "\n".join(conv.params.get("stop", []) or []),
    })
    thread = frames.thread_views(selectors.conversation_thread_for_display(conversation=conv), registry.live_view)
    return render(
        request, "chat/conversation.html",
        {
            "conversation": conv,
            "thread": thread,
            "efforts": ["", *forms.EFFORTS],
            "formats": ["", "text", "json_object", "json_schema"],
            "json_schema_text": json.dumps(conv.params["json_schema"], indent=2) if conv.params.get("json_schema") else "",
            "tools_text": json.dumps(conv.params["tools"], indent=2) if conv.params.get("tools") else "",
            "prompt_chars": len(conv.system_prompt) + sum(len(v.content) for v in thread),
            "endpoints": endpoints,
            "sidebar": selectors.conversation_list_for_user(user=request.user)[:200],
            "params_form": params,
            "turn_id": forms.new_turn_id(),
            "models": conv.endpoint.models_cache if conv.endpoint else [],
            "ws_max_bytes": settings.PLAYGROUND_WS_MAX_MESSAGE_BYTES,
        },
    )


def _sidebar_context(request: HttpRequest, q: str, current: str | None) -> dict[str, Any]:
    """The sidebar list: every conversation, or with ``q`` the search (each row with why it
    matched, bounded: ``selectors.conversation_search_for_user``); ``current`` (an id) is
    highlighted."""
    q = q.strip()[:selectors.SEARCH_MAX_QUERY]
    rows = (selectors.conversation_search_for_user(user=request.user, query=q) if q
            else selectors.conversation_list_for_user(user=request.user)[:200])
    return {"sidebar": rows, "query": q,
            "conversation": {"pk": int(current)} if current and current.isdigit() else None}


def conversation_sidebar(request: HttpRequest) -> HttpResponse:
    return render(request, "chat/conversation.html#sidebar-list",
                  _sidebar_context(request, request.GET.get("q", ""), request.GET.get("current")))


@require_POST
def conversation_rename(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conv = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    form = forms.RenameForm(request.POST)
    if form.is_valid():
        try:
            services.conversation_rename(conversation=conv, title=form.cleaned_data["title"])
        except ValueError as exc:
            flash.error(request, str(exc))
    if request.htmx:
        # The sidebar's row menu renames any row: the list keeps its search (``q``) and the
        # page's current conversation (``current``); the header's form renames the page's own.
        current = request.POST.get("current") or str(conv.pk)
        return render(request, "chat/conversation.html#sidebar-list",
                      _sidebar_context(request, request.POST.get("q", ""), current))
    return redirect("chat:conversation", conversation_id=conv.pk)


@require_POST
def conversation_fork(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Copy the active branch (up to ``upto``) into a new conversation and open it."""
    conv = selectors.refuse_if_blind(selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id))
    upto = None
    if request.POST.get("upto"):
        upto = selectors.message_get_for_user(user=request.user, message_id=request.POST["upto"])
        if upto.conversation_id != conv.pk:
            raise Http404("No such message")
    fork = services.conversation_fork(conversation=conv, upto=upto)
    if request.htmx:
        # The button is htmx (its CSRF token comes from <body hx-headers>): the same partial is
        # rendered in websocket frames, where {% csrf_token %} would be empty.
        response = HttpResponse(status=204)
        response["HX-Redirect"] = reverse("chat:conversation", kwargs={"conversation_id": fork.pk})
        return response
    return redirect("chat:conversation", conversation_id=fork.pk)


@require_POST
def conversation_delete(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conv = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    services.conversation_delete(conversation=conv)
    return redirect("chat:home")


@require_GET
def message_raw(request: HttpRequest, message_id: str) -> HttpResponse:
    """A message's text as sent or received (markdown source), for Copy: on demand, so frames
    and pages carry the answer once."""
    message = selectors.message_get_for_user(user=request.user, message_id=message_id)
    live = registry.live_view(message.id) if message.status == "streaming" else None
    response = HttpResponse((live or message).content, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
def message_edit_form(request: HttpRequest, message_id: str) -> HttpResponse:
    """The in-place editor of a finished message (its text on demand)."""
    message = selectors.message_get_for_user(user=request.user, message_id=message_id)
    if message.status == "streaming":
        return HttpResponse(status=204)
    return render(request, "chat/message.html#editor", {"m": frames.MessageView.from_row(message)})


@require_GET
def message_inspect(request: HttpRequest, message_id: str) -> HttpResponse:
    """The request sent (key redacted) and the raw upstream events of one turn: a page, or
    (htmx) the drawer's fragment beside the answer on the chat page."""
    message = selectors.message_get_for_user(user=request.user, message_id=message_id)
    selectors.refuse_if_blind(message.conversation)
    inspect = message.inspect or {}
    events = inspect.get("events", [])
    response = render(request, "chat/inspect.html#drawer" if request.htmx else "chat/inspect.html", {
        "message": message,
        "request_json": json.dumps(inspect.get("request", {}), indent=2, ensure_ascii=False),
        "events": events,
        "inspect": inspect,
        "drawer": bool(request.htmx),
    })
    patch_vary_headers(response, ("HX-Request",))
    return response


@require_GET
def message_code(request: HttpRequest, message_id: str) -> HttpResponse:
    """"View code" of one finished turn: the exact request it sent (its Inspect record) as
    curl, Python and JavaScript, secrets as environment variables. A page, or (htmx) the code
    dialog's body. Another user's message: 404."""
    from chat.codegen import snippets_recorded

    message = selectors.message_get_for_user(user=request.user, message_id=message_id)
    selectors.refuse_if_blind(message.conversation)
    snap = message.settings_snapshot or {}
    header_names: list[str] = []
    if snap.get("endpoint_id"):
        try:
            header_names = list(selectors.endpoint_usable_get_for_user(
                user=request.user, endpoint_id=snap["endpoint_id"]).extra_header_names)
        except Http404:
            pass
    recorded = snippets_recorded(
        (message.inspect or {}).get("request") or {}, api_style=str(snap.get("api_style") or "openai_chat"),
        endpoint_name=str(snap.get("endpoint_name") or "playground"), header_names=header_names,
    )
    context = {
        "s": recorded.s if recorded else None, "shortened": recorded.shortened if recorded else False,
        "turn": message, "endpoint": {"name": snap.get("endpoint_name") or "the endpoint",
                                      "is_simulator": str(snap.get("base_url", "")).startswith("sim://")},
        "refusal": None if recorded else "No request was recorded for this turn (it was added by hand, or recorded "
                                         "before requests were kept), so there is no code to show.",
    }
    if request.htmx:
        response = render(request, "chat/code.html" if recorded else "chat/code.html#problem", context)
    else:
        response = render(request, "chat/turn_code.html", context)
    patch_vary_headers(response, ("HX-Request",))
    return response


# ---- attachments ---------------------------------------------------------------------------

IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
AUDIO_TYPES = {
    "audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav",
    "audio/mp4": "m4a", "audio/x-m4a": "m4a", "audio/m4a": "m4a", "audio/webm": "webm", "audio/ogg": "ogg",
    "audio/flac": "flac", "audio/x-flac": "flac", "audio/opus": "opus",
}
AUDIO_EXTENSIONS = {"mp3": "audio/mpeg", "wav": "audio/wav", "m4a": "audio/mp4", "webm": "audio/webm",
                    "ogg": "audio/ogg", "flac": "audio/flac", "opus": "audio/opus"}


@require_POST
def attachment_upload(request: HttpRequest) -> HttpResponse:
    """Upload images/audio (multipart ``file``, several allowed) or register an image ``url``.

    Returns one chip per attachment (a hidden ``attachment_ids`` input bound to the composer),
    and one error chip per refused file with the reason: unknown type, over
    ``PLAYGROUND_MAX_ATTACHMENT_BYTES``, or over a per-message cap or the user's quota
    (:func:`chat.services.attachment_create`). Also deletes old unsent uploads now and then.
    """
    services.attachments_delete_orphans_now_and_then()
    limit = settings.PLAYGROUND_MAX_ATTACHMENT_BYTES
    created, errors = [], []
    url = (request.POST.get("url") or "").strip()
    if url:
        if not url.startswith(("http://", "https://")):
            errors.append("An image URL must start with http:// or https://.")
        else:
            try:
                created.append(services.attachment_create(
                    user=request.user, kind="image", media_type="", url=url, filename=url.rsplit("/", 1)[-1],
                ))
            except services.AttachmentRefused as exc:
                errors.append(str(exc))
    for f in request.FILES.getlist("file"):
        media_type = (f.content_type or "").lower()
        ext = f.name.rsplit(".", 1)[-1].lower() if "." in f.name else ""
        if media_type in IMAGE_TYPES:
            kind = "image"
        elif media_type in AUDIO_TYPES or ext in AUDIO_EXTENSIONS:
            kind = "audio"
            media_type = media_type if media_type in AUDIO_TYPES else AUDIO_EXTENSIONS[ext]
        else:
            errors.append(f"{f.name}: only images (png, jpeg, gif, webp) and audio (mp3, wav, m4a, webm, ogg, flac, opus).")
            continue
        if f.size > limit:
            errors.append(f"{f.name} is {f.size / 1e6:.1f} MB; the limit is {limit / 1e6:.0f} MB.")
            continue
        try:
            created.append(services.attachment_create(
                user=request.user, kind=kind, media_type=media_type, filename=f.name, data=f.read(),
            ))
        except services.AttachmentRefused as exc:
            errors.append(str(exc))
    return render(request, "chat/conversation.html#attachment-chips", {"attachments": created, "errors": errors})


@require_POST
def attachment_delete(request: HttpRequest, attachment_id: str) -> HttpResponse:
    """Remove an upload not yet sent (its chip's ✕), so it stops counting against the limits."""
    services.attachment_delete_unsent(user=request.user, attachment_id=attachment_id)
    return HttpResponse(status=204)


@require_GET
def attachment_get(request: HttpRequest, attachment_id: str) -> HttpResponse:
    """The bytes of an attachment, for its owner only (404 otherwise)."""
    from chat.models import Attachment

    try:
        a = Attachment.objects.get(pk=attachment_id, owner=request.user)
    except (Attachment.DoesNotExist, ValueError) as exc:
        raise Http404("No such attachment") from exc
    if a.url:
        return redirect(a.url)
    response = HttpResponse(bytes(a.data), content_type=a.media_type)
    response["Content-Disposition"] = "inline"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


# ---- "View code" ---------------------------------------------------------------------------


def conversation_code(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The next request of this conversation (the settings panel's values, plus the text in the
    box as the next message) as curl, Python and JavaScript; secrets as env vars. The same
    settings path as every action that starts a turn (``selectors.turn_preview_request``)."""
    from chat.codegen import snippets

    conv = selectors.refuse_if_blind(selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id))
    data = request.GET
    if any(k in data for k in (*forms.PARAM_FIELDS, *forms.OPTION_FIELDS, "model", "endpoint_id", "system_prompt")):
        # The panel's values, what it did not send taken from the conversation.
        data = data.copy()
        for key, value in (("endpoint_id", conv.endpoint_id), ("model", conv.model), ("system_prompt", conv.system_prompt)):
            if key not in data and value is not None:
                data[key] = value
        style = None
        try:
            style = selectors.endpoint_usable_get_for_user(user=request.user, endpoint_id=data.get("endpoint_id")).api_style
        except Http404:
            pass
        form = forms.TurnSettingsForm(data, api_style=style)
        if not form.is_valid():
            return render(request, "chat/code.html#problem", {"errors": form.errors})
        c = form.cleaned_data
        next_settings = selectors.NextTurnSettings(c["endpoint_id"], c["model"], c.get("system_prompt") or "", form.params())
    else:
        next_settings = selectors.NextTurnSettings.of_conversation(conv)
    try:
        endpoint, request_obj = selectors.turn_preview_request(
            user=request.user, conversation_id=conv.pk, settings=next_settings,
            draft=data.get("content", ""), role=data.get("role") or "user",
        )
    except selectors.TurnRefused as refusal:
        return render(request, "chat/code.html#problem", {"refusal": refusal.message})
    config = EndpointConfig(
        base_url=endpoint_base_url_for_request(request, endpoint.base_url),
        api_key=endpoint.api_key and "x", extra_headers={k: "x" for k in endpoint.extra_headers},
        api_style=endpoint.api_style, stream_options=endpoint.stream_options,
    )
    s = snippets(config, request_obj, endpoint_name=endpoint.name)
    return render(request, "chat/code.html", {"s": s, "endpoint": endpoint})
