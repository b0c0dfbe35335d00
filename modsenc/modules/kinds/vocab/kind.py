"""``vocab``: a language's own tokenizer and input-embedding matrix (FOCUS-initialised, then
trained with the LA). Switching language swaps the embedding module, which costs nothing; the
merged model of ``export`` holds the matrix because the active model's input embeddings are it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from modsenc.modules.kinds.base import ModuleHost, ModuleKind
from modsenc.modules.kinds.vocab.files import EMBEDDINGS_FILE, TOKENIZER_DIR

if TYPE_CHECKING:
    import torch
    from torch import nn

    from modsenc.modules.kinds.stage import StageRecipe


@dataclass(frozen=True)
class Vocabulary:
    """What a ``vocab`` module is made of: a tokenizer and its (len(tokenizer), hidden) embeddings."""

    tokenizer: Any
    weight: torch.Tensor


class VocabularyKind(ModuleKind):
    name: ClassVar[str] = "vocab"
    files: ClassVar[tuple[str, ...]] = (EMBEDDINGS_FILE, TOKENIZER_DIR)
    library: ClassVar[str] = "modsenc"

    def stage(self) -> StageRecipe:
        from modsenc.modules.kinds.vocab.stage import STAGE  # noqa: PLC0415 - torch

        return STAGE

    def check_loadable(self, source: Path, lang: str) -> None:
        """Its weights file is a safetensors file by name: nothing else is read."""

    def create(self, modular: ModuleHost, lang: str, config: Vocabulary) -> None:
        import torch  # noqa: PLC0415 - the registry is imported without torch
        from torch import nn  # noqa: PLC0415

        tokenizer, weight = config.tokenizer, config.weight
        hidden = modular.backbone.hidden_size
        if weight.shape != (len(tokenizer), hidden):
            raise ValueError(
                f"{lang} embeddings must be ({len(tokenizer)}, {hidden}), got {tuple(weight.shape)}"
            )
        embedding = nn.Embedding(len(tokenizer), weight.shape[1], padding_idx=tokenizer.pad_token_id)
        with torch.no_grad():
            embedding.weight.copy_(weight)
        embedding.requires_grad_(False)
        modular.language_embeddings[lang] = embedding.to(modular.backbone.device)
        modular.tokenizers[lang] = tokenizer
        modular.mark_loaded(lang, self.name)

    def load(self, modular: ModuleHost, lang: str, directory: Path) -> None:
        from safetensors.torch import load_file  # noqa: PLC0415

        from modsenc.utils.hub import load_tokenizer  # noqa: PLC0415 - transformers

        tokenizer = load_tokenizer(directory / TOKENIZER_DIR)
        self.create(modular, lang, Vocabulary(tokenizer, load_file(directory / EMBEDDINGS_FILE)["weight"]))

    def save(self, modular: ModuleHost, lang: str, directory: Path) -> None:
        """``tokenizer/`` and ``embeddings.safetensors``."""
        from safetensors.torch import save_file  # noqa: PLC0415

        modular.tokenizers[lang].save_pretrained(directory / TOKENIZER_DIR)
        weight = modular.language_embeddings[lang].weight.detach().cpu().contiguous()
        save_file({"weight": weight}, directory / EMBEDDINGS_FILE)

    def remove(self, modular: ModuleHost, lang: str) -> None:
        if lang in modular.language_embeddings:
            del modular.language_embeddings[lang]
        modular.tokenizers.pop(lang, None)

    def activate(self, modular: ModuleHost, lang: str | None, active: Sequence[str]) -> None:
        embeddings = modular.language_embeddings[lang] if active else modular.base_embeddings
        modular.backbone.model.set_input_embeddings(embeddings)

    def parameters(self, modular: ModuleHost, lang: str) -> list[nn.Parameter]:
        return list(modular.language_embeddings[lang].parameters())

    def tokenizer(self, modular: ModuleHost, lang: str) -> Any:
        return modular.tokenizers[lang]

    def embeddings(self, modular: ModuleHost, lang: str) -> nn.Embedding:
        return modular.language_embeddings[lang]

    def manifest_entry(self, modular: ModuleHost, lang: str) -> dict[str, Any]:
        return {"tokenizer": TOKENIZER_DIR, "vocab_size": len(modular.tokenizers[lang])}
