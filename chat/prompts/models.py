"""Rows of the prompt library: prompts, immutable versions, labels and their moves, API tokens.

A ``Prompt`` is owned by a user and visible to its owner, or to everyone on the site
(``visibility="site"``), or to the members of one team (``visibility="team"``, ``team``); see
``chat.prompts.selectors.prompt_visible_q``. Each save makes a new ``PromptVersion`` (never
updated). A ``PromptLabel`` points at one version; every move is a ``PromptLabelMove`` row.

May import: Django.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PromptVisibility(models.TextChoices):
    PRIVATE = "private", "Private (only me)"
    SITE = "site", "Everyone on this site"
    TEAM = "team", "A team's members"


class Prompt(models.Model):
    """A named prompt in a user's library. ``tags``: list of short strings. ``last_used_at``:
    when it was last used in chat (sorting by "last used")."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="prompts")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, default="")
    tags = models.JSONField(default=list, blank=True)
    visibility = models.CharField(max_length=16, choices=PromptVisibility.choices, default=PromptVisibility.PRIVATE)
    # With visibility "team": the team whose members see and use it (the owner alone edits it).
    team = models.ForeignKey("chat.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="prompts")
    forked_from = models.ForeignKey(
        "PromptVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "chat"
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="prompt_owner_name_unique")]
        indexes = [models.Index(fields=["visibility", "name"])]

    def __str__(self) -> str:
        return self.name


class PromptVersion(models.Model):
    """One immutable save of a prompt. ``messages``: ``[{"role": "user"|"assistant", "content":
    str}]`` templates with ``{{variables}}``; ``config``: ``{"endpoint_id": int|None, "model": str,
    "params": {...}}`` where params are those of ``chat.forms.ParamsForm.params()`` (sampling
    parameters, response format, JSON schema, tools)."""

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    system_prompt = models.TextField(blank=True, default="")
    messages = models.JSONField(default=list, blank=True)
    config = models.JSONField(default=dict, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    message = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "chat"
        ordering = ["prompt_id", "-number"]
        constraints = [models.UniqueConstraint(fields=["prompt", "number"], name="promptversion_number_unique")]

    def __str__(self) -> str:
        return f"{self.prompt_id} v{self.number}"


class PromptLabel(models.Model):
    """A named pointer (``production``, ``staging`` …) at one version of a prompt."""

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="labels")
    name = models.CharField(max_length=50)
    version = models.ForeignKey(PromptVersion, on_delete=models.CASCADE, related_name="labels")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "chat"
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["prompt", "name"], name="promptlabel_name_unique")]

    def __str__(self) -> str:
        return self.name


class PromptLabelMove(models.Model):
    """History of a label: it pointed at ``from_version`` (None when created) and now at ``to_version``."""

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="label_moves")
    label = models.CharField(max_length=50)
    from_number = models.PositiveIntegerField(null=True, blank=True)
    to_number = models.PositiveIntegerField()
    moved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    moved_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "chat"
        ordering = ["-moved_at", "-id"]

    def __str__(self) -> str:
        return f"{self.label}: v{self.from_number} → v{self.to_number}"


class ApiToken(models.Model):
    """A per-user token for the read-only prompt API. Only the SHA-256 of the token is stored;
    ``hint`` is its first characters, for recognising it in the list."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "chat"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<ApiToken {self.pk}: {self.name!r} {self.hint}…>"


class TestSet(models.Model):
    """Rows of variable values for a prompt, each with optional per-row checks, plus checks for
    every row. ``rows``: ``[{"vars": {name: value}, "checks": [check]}]`` (``chat.prompts.checks``
    shapes); ``checks``: ``[check]``. At most 200 rows."""

    __test__ = False  # not a pytest class

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="test_sets")
    name = models.CharField(max_length=100)
    rows = models.JSONField(default=list, blank=True)
    checks = models.JSONField(default=list, blank=True)
    # Where ``judge`` checks are asked: {"endpoint_id": int, "model": str} (one of the owner's endpoints).
    judge = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "chat"
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class TestRun(models.Model):
    """A run of a test set in one or more lanes. ``lanes``: ``[{"version": n, "version_id": id,
    "endpoint_id": id, "endpoint_name": str, "model": str}]``; its turns are ordinary
    conversations (one per row × lane, see :class:`TestRunCell`)."""

    __test__ = False

    test_set = models.ForeignKey(TestSet, on_delete=models.CASCADE, related_name="runs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    lanes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "chat"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"run {self.pk}"


class TestRunCell(models.Model):
    """One row × lane of a run: its conversation and answer, and the check results once the
    answer is final (``checks``: list of ``chat.prompts.checks.run_check`` results; None until then)."""

    __test__ = False

    run = models.ForeignKey(TestRun, on_delete=models.CASCADE, related_name="cells")
    row = models.PositiveIntegerField()
    lane = models.PositiveSmallIntegerField()
    conversation = models.ForeignKey("chat.Conversation", null=True, on_delete=models.SET_NULL, related_name="+")
    # The answer's id (not a FK: the runner inserts the row after the cell is written).
    message_id = models.UUIDField(null=True, blank=True)
    checks = models.JSONField(null=True, blank=True)
    # Judge verdicts: [{"rubric", "prompt", "answer", "ok", "error"}] (None until judged).
    judge = models.JSONField(null=True, blank=True)

    class Meta:
        app_label = "chat"
        ordering = ["row", "lane"]
        constraints = [models.UniqueConstraint(fields=["run", "row", "lane"], name="testruncell_unique")]

    def __str__(self) -> str:
        return f"cell {self.row}×{self.lane}"
