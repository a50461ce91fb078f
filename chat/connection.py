""""Test connection": ``GET {base}/models`` with an endpoint's settings, saved or not.

:func:`check` is what both "Test connection" buttons run (the endpoints list, for a saved
endpoint; the new/edit form, for the values typed but not saved): the base URL rules of the
endpoint form (:func:`chat.providers.http.check_base_url`, re-checked at call time so DNS that
changed since is caught), then the adapter's ``list_models``. :func:`probe_secrets` decides which
key and header values an unsaved test may send: the typed ones, else the stored ones only while
the base URL keeps the stored scheme, host and port (the rule of
:func:`chat.services.endpoint_update`), so a stored key can never be sent to another host by
editing the URL and pressing Test.

May import: asgiref, django.conf (the simulator key), chat.providers, chat.services
(``base_url_origin`` only).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync

from chat.providers import get_adapter
from chat.providers.base import EndpointConfig, ProviderError
from chat.providers.http import check_base_url, get_client


async def list_models(config: EndpointConfig) -> list[dict[str, Any]]:
    """``GET {base}/models`` through the adapter of ``config.api_style``: one dict per model
    (id, context length, max completion tokens, prices per million tokens, modalities).
    Raises ProviderError."""
    adapter = get_adapter(config.api_style)
    infos = await adapter.list_models(get_client(), config)
    return [vars(i) if not hasattr(i, "__dataclass_fields__") else {k: getattr(i, k) for k in i.__dataclass_fields__}
            for i in infos]


def check(config: EndpointConfig, *, is_simulator: bool, allow_private: bool) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Run "Test connection": ``(models, None)`` when the server listed its models, else
    ``([], error)`` with ``error`` a ProviderError dict (``message``, ``code``, ``status``…;
    secrets already scrubbed by the provider) or ``{"code": "base_url_refused"}`` for a URL the
    form rules refuse. ``config.base_url`` is the resolved URL (``sim://`` already mapped to
    this server's simulator, which is never refused). Writes nothing."""
    try:
        if not is_simulator:
            check_base_url(config.base_url, allow_private=allow_private)
        return async_to_sync(list_models)(config), None
    except ProviderError as exc:
        return [], exc.as_dict()
    except ValueError as exc:
        return [], {"message": str(exc), "code": "base_url_refused"}


def probe_secrets(
    *, stored: Any, base_url: str, api_key: str, extra_headers: dict[str, str] | None,
    clear_api_key: bool = False, clear_extra_headers: bool = False,
) -> tuple[str, dict[str, str]]:
    """The key and extra headers an unsaved test sends: ``(api_key, headers)``.

    ``stored`` is the endpoint being edited (already checked to be the user's: an Endpoint) or
    None for a new one. A typed key / typed headers win; blank ones fall back to the stored
    values only when ``base_url`` has the stored base URL's origin and the matching "remove"
    box is not ticked. The built-in simulator (``sim://``) always gets this server's simulator
    key, as a saved one does."""
    from chat.services import base_url_origin

    same_origin = stored is not None and base_url_origin(stored.base_url) == base_url_origin(base_url)
    if base_url.startswith("sim://"):
        from django.conf import settings

        key = settings.PLAYGROUND_SIMULATOR_KEY
    elif api_key:
        key = api_key
    elif same_origin and not clear_api_key:
        key = stored.get_api_key()
    else:
        key = ""
    if extra_headers is not None:
        headers = dict(extra_headers)
    elif same_origin and not clear_extra_headers:
        headers = stored.get_extra_headers()
    else:
        headers = {}
    return key, headers
