"""Playground modes beside chat (issue 14): raw text completions, embeddings, audio.

Each mode run is one :class:`chat.modes.models.ModeRun` row owned by its user. A run is created
by a form POST (``views``), then executed once over the run's websocket (``consumer``) by
``runner``, which reuses the chat runner's pieces: the per-process :class:`chat.turns.Admission`,
:class:`chat.metrics.TurnClock` / :func:`chat.metrics.compute_metrics`, the writer thread
(``chat.db``) and the adapters of ``chat.providers``.
"""
