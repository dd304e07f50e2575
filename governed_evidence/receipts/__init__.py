"""Signed evidence receipts: what was served, from which build of the index, at which level.

A receipt is a small signed statement attached to every answer that cites
(``search_documents``, ``read_passage``, ``get_data``). ``model`` is its shape (imported by
the response models), ``canonical`` the bytes that are signed, ``keys`` the Ed25519 key,
``fingerprint`` the index's identity as one level sees it, ``issue`` builds receipts and
``check`` verifies one against an index; ``command`` is ``governed-evidence verify``.
"""

__all__: list[str] = []
