"""Provider adapters: one module per API style, all speaking the vocabulary of ``base``.

An adapter module exposes:

* ``build_request(config, request) -> (url, headers, json_body)``: pure, for tests and the
  Inspect view;
* ``stream(client, config, request) -> AsyncIterator[Event]``: an async iterator (nothing is
  sent before its first iteration) of the events of :mod:`chat.providers.base`; raises only
  ``ProviderError``. Every adapter's stream runs through the one SSE loop
  :func:`chat.providers.http.stream_sse` (limits, valid Unicode, warnings);
* ``async list_models(client, config) -> list[ModelInfo]`` (``ProviderError`` with
  ``code="models_not_listed"`` for a server without ``/models``);
* ``API_STYLE`` (its key in :data:`ADAPTERS`) and ``CONTENT_TYPES`` (the attachment types,
  ``ContentPart.type``, it can carry).

``anthropic_messages`` also has ``async count_tokens(client, config, request) -> int``
(``POST {base}/messages/count_tokens``).

``client`` comes from :func:`chat.providers.http.get_client` (its transport,
:class:`chat.providers.transport.PinnedTransport`, pins every connection to the address it
checked). Error bodies are turned into ``ProviderError`` by
:func:`chat.providers.errors.parse_error`. Shared text handling (inline reasoning tags, the
stream guard) is in :mod:`chat.providers.text`.

This package imports only the standard library, httpx (with httpcore, httpx's transport layer,
in ``transport``) and httpx-sse: never Django.
"""

from __future__ import annotations

from types import ModuleType

from . import anthropic_messages, openai_chat, openai_responses

ADAPTERS: dict[str, ModuleType] = {
    openai_chat.API_STYLE: openai_chat,
    anthropic_messages.API_STYLE: anthropic_messages,
    openai_responses.API_STYLE: openai_responses,
}


def get_adapter(api_style: str) -> ModuleType:
    """The adapter module for ``api_style`` (``"openai_chat"``, ``"anthropic_messages"``,
    ``"openai_responses"``).

    Raises ``ValueError`` for an API style without an adapter.
    """
    try:
        return ADAPTERS[api_style]
    except KeyError:
        known = ", ".join(sorted(ADAPTERS))
        raise ValueError(f"Unknown API style {api_style!r} (known: {known})") from None
