"""Team prompt sharing: a versioned prompt library (issue 13).

Modules: ``models`` (rows), ``variables`` ({{name}} parsing and filling), ``selectors``
(ownership-scoped reads), ``services`` (writes), ``forms``, ``views``, ``api`` (read-only JSON
API with per-user tokens), ``urls``.
"""
