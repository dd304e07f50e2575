"""The command line's own commands, one module each: ingest, search, read and sources
(``documents``), status, serve, doctor.

Each module adds its parser with ``register`` and runs with the function that parser names;
``cli.py`` wires them (and the commands that live with their part: ``eval``, ``stats``,
``token``) into one program. ``--json`` prints exactly the structure the MCP tools return,
so scripts and checks can rely on one contract. Human output goes to stdout; logs to stderr.
"""

__all__: list[str] = []
