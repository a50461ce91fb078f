"""Read-only share links (issue 13): a frozen snapshot of a conversation's current branch.

Only the SHA-256 of a link's random token is stored. The snapshot keeps messages (reasoning
optional), metrics, usage and settings (model, API style, parameters, system prompt) — never
endpoint URLs, keys, headers or endpoint ids. Links expire and can be revoked; the shared page
renders model output with ``chat.rendering`` (the chat page's sanitizer) and sends no referrer to other sites (Referrer-Policy same-origin, links rel=noreferrer).
"""
