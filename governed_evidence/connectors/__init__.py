"""Connectors: SharePoint / OneDrive (Microsoft Graph) and Google Drive mirrored into a folder ingest reads.

:mod:`config` reads the TOML configuration (secrets only from the environment variables it
names), :mod:`names` makes a source's names safe as mirror paths, :mod:`mirror` writes the
mirror atomically with the level and link of every file, :mod:`graph` and :mod:`gdrive` are
the sources and :mod:`command` the ``sync`` and ``refresh`` commands.
"""

__all__: list[str] = []
