"""The model side of the server: a ``ModularEncoder`` and the batch function the batcher runs.

Everything here runs off the event loop, the batch function in the batcher's worker thread (one
batch at a time): loading or evicting a language, tokenising to count tokens, and encoding. Fast
tokenizers must not be called from two threads at once (they mutate their truncation settings),
and the encoder's lock serialises forward passes anyway, so one thread is all there is to gain. A
batch goes through the encoder's public path: ``tokenize`` (the token counts reported and the
too-long refusals are about the tokens encoded), then ``encode_tokens`` on the tokens kept. TEI's
token routes (``tokens``, ``decode``, ``token_vectors``) run in a thread of their own under the
encoder's lock, which the worker's tokenising and encoding take too.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modsenc.backbone.encoder import Tokenized
from modsenc.encoder import MODES, PROMPT_ALIASES, ModularEncoder
from modsenc.modules.bundle import check_language_code
from modsenc.routing.router import BACKBONE, Detection
from modsenc.utils.errors import InputError, UnknownNameError

log = logging.getLogger("modsenc.serving")

# What the warm-up encodes in each --languages language: any short text loads and compiles it.
WARM_UP_TEXT = "Hello."


@contextmanager
def warnings_logged(where: str, level: int = logging.WARNING) -> Iterator[None]:
    """Python warnings raised in the block as one log line each (``where``: what was running),
    instead of the interpreter's two lines with a source line on stderr. The encoder warns when it
    truncates a text, which the server already reports in the response (``truncated``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:  # logged when the block fails too
            for warning in caught:
                first = str(warning.message).strip().splitlines() or [""]
                log.log(level, "modsenc serve: %s: %s: %s", where, warning.category.__name__, first[0])


class InputTooLong(InputError):
    """An input is longer than the token limit and the request asked not to truncate."""

    def __init__(self, index: int, limit: int) -> None:
        super().__init__(f"input {index} has more than {limit} tokens")
        self.index, self.limit = index, limit


class UnknownLanguage(UnknownNameError):
    """A language the zoo has no bundle for (printed unquoted, unlike a plain KeyError)."""


class UnknownPrompt(InputError):
    """A ``prompt_name`` the encoder has no prompt for (or an encoder without prompts)."""


@dataclass(frozen=True)
class Embedded:
    vector: np.ndarray  # float32, not normalised
    tokens: int  # tokens encoded (after truncation), special tokens included
    truncated: bool


@dataclass(frozen=True)
class Text:
    index: int  # position in its request, for error messages
    text: str
    truncate: bool


class EmbeddingService:
    def __init__(
        self, encoder: ModularEncoder, zoo: str | os.PathLike, model_name: str | None = None
    ) -> None:
        self.encoder = encoder
        self.zoo = Path(zoo)
        self.model_name = model_name or self.zoo.resolve().name
        self.dimension = encoder.get_sentence_embedding_dimension()
        self.max_tokens = encoder.modular.backbone.max_length
        self.backbone_parameters = encoder.modular.backbone_parameter_count()
        # Read by the event loop (/info, /metrics) while the worker thread changes the encoder:
        # a list replaced whole after each batch is safe to read without the encoder's lock.
        self.loaded: list[str] = encoder.loaded_languages

    @property
    def installed(self) -> list[str]:
        return list(self.encoder.installed)

    # ----------------------------------------------------------------- request checks (event loop)
    def check_language(self, code: str) -> str:
        """A normalised installed language code (or ``backbone``: no modules), or
        :class:`UnknownLanguage` naming the installed ones."""
        if code == BACKBONE:
            return code
        try:
            lang = check_language_code(code)
        except ValueError as err:
            raise UnknownLanguage(f"{err}; installed: {', '.join(self.installed)}") from err
        if lang not in self.encoder.installed:
            raise UnknownLanguage(
                f"language {code!r} is not installed in this zoo (installed: {', '.join(self.installed)})"
            )
        return lang

    def route(self, texts: Sequence[str]) -> list[Detection]:
        """Each text's route: its bundle, the backbone (a language the zoo lacks) or refused, with
        the language detected (the router of ``ModularEncoder.encode``; thread-safe)."""
        return self.encoder.detect_languages(texts)

    def check_prompt_name(self, name: str | None) -> str | None:
        """The encoder's name for the prompt ``name`` (``passage`` and ``document`` are one), or
        :class:`UnknownPrompt` naming the ones it has."""
        if name is None:
            return None
        prompts = getattr(self.encoder, "prompts", None)
        if prompts is None:  # an encoder from before ModularEncoder took prompt_name
            raise UnknownPrompt("prompt_name is not supported by this encoder; leave it out")
        # TEI takes the model's sentence-transformers prompt names; e5's are "query" and "passage",
        # which ModularEncoder calls "document" (sentence-transformers' encode_document name).
        for candidate in (name, PROMPT_ALIASES.get(name)):
            if candidate in prompts:
                return candidate
        names = ", ".join(sorted(prompts)) or "none"
        raise UnknownPrompt(f"prompt_name {name!r} is not one of this model's prompts ({names})")

    # ----------------------------------------------------------------- tokens (a worker thread)
    def tokens(
        self, texts: Sequence[str], lang: str, mode: str, prompt_name: str | None, add_special: bool
    ) -> list[list[dict]]:
        """TEI's ``/tokenize`` tokens of ``texts``, all in ``lang`` (``backbone``: none): the ids the
        model runs on (orthography, prompt, the language's tokenizer, cut to the maximum length),
        each with its text and whether it is special; ``start``/``stop`` are null (the orthography
        may change the text before the tokenizer sees it). Under the encoder's lock, as the
        batcher's worker tokenises: a fast tokenizer must not run in two threads at once."""
        prompt = {} if prompt_name is None else {"prompt_name": prompt_name}
        encoder = self.encoder
        with encoder.modular.lock:
            ids = encoder.tokenize(list(texts), lang, mode, **prompt).ids
            tokenizer = encoder.tokenizer_for(lang, mode)
            special = set(tokenizer.all_special_ids)
            result = []
            for row in ids:
                row = row if add_special else row[1:-1]  # the added ones: first and last
                result.append(
                    [
                        {
                            "id": i,
                            "text": tokenizer.convert_ids_to_tokens(i)
                            if i in special
                            else tokenizer.decode([i]),
                            "special": i in special,
                            "start": None,
                            "stop": None,
                        }
                        for i in row
                    ]
                )
            self.loaded = encoder.loaded_languages  # the language may have been loaded now
        return result

    def decode(self, rows: list[list[int]], lang: str, mode: str, skip_special: bool) -> list[str]:
        """TEI's ``/decode``: each row of ``lang``'s token ids (its tokenizer's) back to text; an
        id outside that tokenizer is an ``InputError`` naming it."""
        encoder = self.encoder
        with encoder.modular.lock:
            tokenizer = encoder.tokenizer_for(lang, mode)
            size = len(tokenizer)
            for r, row in enumerate(rows):
                bad = next((i for i in row if not 0 <= i < size), None)
                if bad is not None:
                    whose = "the backbone's" if lang == BACKBONE else f"{lang}'s"
                    raise InputError(
                        f"ids[{r}]: token id {bad} is not in {whose} tokenizer (0 to {size - 1})"
                    )
            self.loaded = encoder.loaded_languages
            return [tokenizer.decode(row, skip_special_tokens=skip_special) for row in rows]

    def token_vectors(
        self, texts: Sequence[str], langs: Sequence[str], how: tuple[str, str | None], truncate: bool
    ) -> list[np.ndarray]:
        """TEI's ``/embed_all``: each text's last hidden states, (tokens, hidden) float32, through
        its language (``langs``: one per text) in ``how``'s mode and prompt; over-long texts are
        cut, or with ``truncate`` False an ``InputTooLong`` naming the first."""
        mode, prompt_name = how
        prompt = {} if prompt_name is None else {"prompt_name": prompt_name}
        encoder = self.encoder
        with encoder.modular.lock, warnings_logged("embed_all", logging.INFO):
            if not truncate:
                for lang in dict.fromkeys(langs):
                    index = [i for i, code in enumerate(langs) if code == lang]
                    cut = encoder.tokenize([texts[i] for i in index], lang, mode, **prompt).truncated
                    first = next((i for i, c in zip(index, cut) if c), None)
                    if first is not None:
                        raise InputTooLong(first, self.max_tokens)
            found = encoder.encode(
                list(texts), lang=list(langs), mode=mode, output_value="token_embeddings", **prompt
            )
            self.loaded = encoder.loaded_languages
        return [matrix.numpy() for matrix in found]

    # ----------------------------------------------------------------- the batch function (worker thread)
    def run_batch(self, key: Hashable, texts: list[Text]) -> list[Embedded | Exception]:
        """Encode one (language, mode, prompt name) batch (language ``backbone``: no modules; prompt
        None: the backbone's own prefix); an over-long text with ``truncate=False`` fails alone."""
        lang, mode, prompt_name = key
        # passed only when given, so an encoder without prompts serves requests without one
        prompt = {} if prompt_name is None else {"prompt_name": prompt_name}
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        encoder = self.encoder
        # INFO: the warning that matters, a text cut to the token limit, is in the response too
        with warnings_logged(f"encoding {lang}", logging.INFO):
            # The tokens encode() runs on (the language's orthography, the backbone's prefix, its
            # tokenizer): the usage reported and the too-long refusal are about what is encoded.
            tokens = encoder.tokenize([t.text for t in texts], lang, mode, **prompt)  # may evict a language
            results: list[Embedded | Exception | None] = [None] * len(texts)
            keep = []
            for i, (text, cut) in enumerate(zip(texts, tokens.truncated)):
                if cut and not text.truncate:
                    results[i] = InputTooLong(text.index, self.max_tokens)
                else:
                    keep.append(i)
            if keep:
                kept = Tokenized([tokens.ids[i] for i in keep], [tokens.truncated[i] for i in keep])
                kept.warn_if_truncated(self.max_tokens)  # as encode() warns
                vectors = encoder.encode_tokens(kept.ids, lang, mode, batch_size=len(keep)).numpy()
                for row, i in enumerate(keep):
                    results[i] = Embedded(vectors[row], len(tokens.ids[i]), tokens.truncated[i])
            self.loaded = encoder.loaded_languages
        return results  # type: ignore[return-value]

    def warm_up(self, languages: Sequence[str]) -> None:
        """Encode one short text in each of ``languages`` (cross mode, the default), through the path
        requests take: the language is loaded and, on the openvino runtime, its graph compiled, so
        the first request in it is not the one that waits for that."""
        for lang in languages:
            (result,) = self.run_batch((lang, "cross", None), [Text(0, WARM_UP_TEXT, True)])
            if isinstance(result, Exception):
                raise result
