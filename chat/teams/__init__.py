"""Teams: shared endpoints without shared secrets, roles, usage and budgets, user administration.

Rows in :mod:`chat.teams.models` (imported by :mod:`chat.models`), reads (ownership scoping,
usage aggregates) in :mod:`chat.teams.selectors`, writes in :mod:`chat.teams.services`, pages in
:mod:`chat.teams.views`.
"""
