"""What sentence-transformers' ``SentenceTransformer`` offers beside ``encode``, on
``ModularEncoder``: ``device``, ``max_seq_length``, ``tokenizer``, ``get_embedding_dimension``, and
``encode``'s ``device`` and ``output_value`` checked. Each works as sentence-transformers' does, or
is refused in one line where a modular encoder cannot (``check_st_options``)."""

from __future__ import annotations

from typing import Any

import torch

from modsenc.routing.router import explicit_route
from modsenc.utils.errors import InputError

# sentence-transformers' encode outputs: one vector per sentence, or one per token (unpooled)
OUTPUT_VALUES = ("sentence_embedding", "token_embeddings")


def check_st_options(own: torch.device, output_value: Any, device: Any) -> None:
    """``encode``'s sentence-transformers options a modular encoder takes: ``output_value``
    ``"sentence_embedding"`` or ``"token_embeddings"`` (not None, sentence-transformers' every
    output at once), and ``device`` only the encoder's own (its modules and compiled graphs live
    there: move it with ``from_pretrained(device=...)``)."""
    if output_value not in OUTPUT_VALUES:
        raise InputError(
            f"output_value={output_value!r} is not supported: ModularEncoder gives "
            "'sentence_embedding' or 'token_embeddings'"
        )
    if device is not None and not same_device(torch.device(device), own):
        raise InputError(
            f"device={str(device)!r} is not this encoder's device ({own}): load it there with "
            f"ModularEncoder.from_pretrained(..., device={str(device)!r})"
        )


def same_device(asked: torch.device, own: torch.device) -> bool:
    """``cuda`` is ``cuda:0`` when the encoder is there (the current device), as torch places it."""
    if asked.type != own.type:
        return False
    return asked.index is None or own.index is None or asked.index == own.index


class SentenceTransformerAttributes:
    """Mixed into ``ModularEncoder`` (which has ``modular`` and
    ``get_sentence_embedding_dimension``)."""

    modular: Any

    @property
    def device(self) -> torch.device:
        """Where the backbone and the modules are (sentence-transformers' ``model.device``)."""
        return self.modular.backbone.device

    @property
    def max_seq_length(self) -> int:
        """Tokens per text, special tokens included; longer texts are cut, with a warning (as
        sentence-transformers' ``max_seq_length``; ``from_pretrained(max_length=...)``)."""
        return self.modular.backbone.max_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        backbone = self.modular.backbone
        limit = backbone.config.max_position_embeddings - backbone.position_offset
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= limit:
            raise InputError(
                f"max_seq_length must be an integer from 2 (the special tokens) to {limit} (the "
                f"backbone's positions), got {value!r}"
            )
        backbone.max_length = value

    @property
    def tokenizer(self) -> Any:
        """The backbone's tokenizer (sentence-transformers' ``model.tokenizer``). A language with a
        vocabulary module of its own tokenises with that one instead:
        ``encoder.modular.tokenizer_of(lang)``, loaded with the language; ``tokenize(texts, lang)``
        gives the ids ``encode`` runs on, whatever the language."""
        return self.modular.base_tokenizer

    def tokenizer_for(self, lang: str | None, mode: str = "cross") -> Any:
        """The tokenizer ``lang``'s text goes through in ``mode`` (its own vocabulary module's, else
        the backbone's; ``None`` or ``"backbone"``: the backbone's), the language loaded if needed.
        Its ids are the ones ``tokenize(texts, lang, mode)`` gives."""
        bundle = explicit_route(lang).bundle if lang is not None else None
        with self._lock:  # type: ignore[attr-defined]
            if bundle is not None:
                self.load_language(bundle)  # type: ignore[attr-defined]
            return self.modular.tokenizer_of(bundle, self._kinds(bundle, mode))  # type: ignore[attr-defined]

    def _token_embeddings(
        self, texts: list[str], routes: list[Any], mode: str, batch_size: int, prefix: str | None
    ) -> list[torch.Tensor]:
        """``encode(output_value="token_embeddings")``: each text's last hidden states through its
        language's modules, one (tokens, hidden) tensor per text in input order; the tokens are the
        ones ``tokenize`` gives (a language's own vocabulary's, special tokens included)."""
        out: list[Any] = [None] * len(texts)
        groups: dict[str | None, list[int]] = {}
        for i, route in enumerate(routes):
            groups.setdefault(route.bundle, []).append(i)
        for code, index in groups.items():
            with self._lock:  # type: ignore[attr-defined]
                tokens = self._tokenized([texts[i] for i in index], code, mode, prefix)  # type: ignore[attr-defined]
                tokens.warn_if_truncated(self.modular.backbone.max_length)
                kinds = frozenset(self._kinds(code, mode))  # type: ignore[attr-defined]
                runtime = self._runtime  # type: ignore[attr-defined]
                vectors = runtime.token_embeddings(code, kinds, tokens.ids, batch_size)
            for i, vector in zip(index, vectors):
                out[i] = vector
        return out

    def get_embedding_dimension(self) -> int:
        """sentence-transformers 5's name for ``get_sentence_embedding_dimension``."""
        return self.get_sentence_embedding_dimension()  # type: ignore[attr-defined]
