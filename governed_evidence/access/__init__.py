"""Who is calling and how far they are cleared: tokens issued by this server, JWTs from an
organisation's identity provider, and the caller each verified credential becomes."""

__all__: list[str] = []
