"""One loader per format, chosen by file suffix."""

from __future__ import annotations

from pathlib import Path

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import LoadedDocument
from governed_evidence.ingest.frontmatter import FrontMatterError
from governed_evidence.ingest.guards import decode_text

__all__ = ["SUPPORTED_SUFFIXES", "load_document"]

SUPPORTED_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".pdf", ".docx"})


def load_document(path: Path, fallback_title: str) -> LoadedDocument:
    """Parse one file; raises :class:`FileRejectedError` with a reason when it cannot."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        from governed_evidence.ingest.loaders.pdf import load_pdf

        return load_pdf(path, fallback_title)
    if suffix == ".docx":
        from governed_evidence.ingest.loaders.docx import load_docx

        return load_docx(path, fallback_title)
    if suffix in (".md", ".markdown", ".txt"):
        text = decode_text(path.read_bytes())
        try:
            if suffix == ".txt":
                from governed_evidence.ingest.loaders.text import parse_text

                return parse_text(text, fallback_title)
            from governed_evidence.ingest.loaders.markdown import parse_markdown

            return parse_markdown(text, fallback_title)
        except FrontMatterError as exc:
            raise FileRejectedError(str(exc)) from None
    raise FileRejectedError(f"unsupported file type {suffix or '(none)'}")
