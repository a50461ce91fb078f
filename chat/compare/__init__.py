"""Side-by-side comparison: 2–6 lanes answering one prompt on the chat's turn runner.

Modules: ``models`` (Vote), ``selectors`` (ownership-scoped reads and turn plans per lane),
``services`` (lane writes, votes), ``stats`` (percentiles, Bradley–Terry), ``charts`` (SVG
geometry), ``views``, ``consumers`` (the websocket ``/ws/compare/<id>/``).
"""
