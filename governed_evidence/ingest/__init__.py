"""Ingestion: loaders, chunking, classification, guards and the atomic build pipeline."""

from governed_evidence.ingest.pipeline import IngestReport, ingest_corpus

__all__ = ["IngestReport", "ingest_corpus"]
