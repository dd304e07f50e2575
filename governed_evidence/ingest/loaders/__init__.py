"""One loader per format, chosen by file suffix."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import LoadedDocument
from governed_evidence.ingest.frontmatter import FrontMatterError
from governed_evidence.ingest.guards import decode_text, printable_name

__all__ = ["SUPPORTED_SUFFIXES", "load_document", "skip_reason"]

SUPPORTED_SUFFIXES = frozenset(
    {".md", ".markdown", ".txt", ".pdf", ".docx", ".html", ".htm", ".xlsx", ".pptx", ".csv", ".tsv"}
)
#: The binary formats before Office 2007, which the loaders do not read: the reason says what to do.
_LEGACY_OFFICE = {".doc": ".docx", ".xls": ".xlsx", ".ppt": ".pptx"}


def skip_reason(name: str) -> str | None:
    """Why a file named ``name`` is not read (the ingest report lists it), or None when a
    loader reads it.

    Office's lock files (``~$report.docx``, written beside a document while it is open) are
    not documents, whatever their suffix. The reason names the suffix, never the file name.
    """
    if name.startswith("~$"):
        return "Office lock file (~$ prefix): not a document"
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in SUPPORTED_SUFFIXES:
        return None
    if not suffix:
        return "unsupported format (no file extension)"
    shown = printable_name(suffix)
    if suffix in _LEGACY_OFFICE:
        return f"unsupported format {shown} (the pre-2007 binary format: save it as {_LEGACY_OFFICE[suffix]})"
    return f"unsupported format {shown}"


def load_document(path: Path, fallback_title: str) -> LoadedDocument:
    """Parse one file; raises :class:`FileRejectedError` with a reason when it cannot."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        from governed_evidence.ingest.loaders.pdf import load_pdf

        return load_pdf(path, fallback_title)
    if suffix == ".docx":
        from governed_evidence.ingest.loaders.docx import load_docx

        return load_docx(path, fallback_title)
    if suffix in (".html", ".htm"):
        from governed_evidence.ingest.loaders.html import load_html

        return load_html(path, fallback_title)
    if suffix == ".xlsx":
        from governed_evidence.ingest.loaders.xlsx import load_xlsx

        return load_xlsx(path, fallback_title)
    if suffix in (".csv", ".tsv"):
        from governed_evidence.ingest.loaders.delimited import load_delimited

        return load_delimited(path, fallback_title)
    if suffix == ".pptx":
        from governed_evidence.ingest.loaders.pptx import load_pptx

        return load_pptx(path, fallback_title)
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
