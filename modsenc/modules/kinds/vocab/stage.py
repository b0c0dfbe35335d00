"""The ``vocab`` stage: a SentencePiece tokenizer for LANG and FOCUS-initialised embeddings
(deepfocus), from LANG's monolingual text."""

from __future__ import annotations

from pathlib import Path

from modsenc.backbone.focus import focus_from_texts
from modsenc.backbone.tokenizer import train_sentencepiece
from modsenc.modules.kinds.stage import Metrics, Plan, StageContext, StageRecipe
from modsenc.modules.kinds.vocab.config import VocabConfig
from modsenc.modules.kinds.vocab.files import TOKENIZER_DIR


def train_vocab(ctx: StageContext, out: Path, run_dir: Path) -> Metrics:
    cfg = ctx.settings("vocab")
    tokenizer = train_sentencepiece(ctx.data.mono, out / TOKENIZER_DIR, vocab_size=cfg.vocab_size)
    weight = focus_from_texts(
        ctx.modular.base_tokenizer,
        ctx.modular.base_embeddings.weight,
        tokenizer,
        ctx.data.mono,
        ctx.work / "vocab" / "focus",
        fasttext=cfg,
        seed=ctx.seed,
    )
    ctx.modular.add_vocabulary(ctx.lang, tokenizer, weight)
    ctx.modular.save_module(ctx.lang, "vocab", out)
    return {"vocab_size": float(len(tokenizer))}


STAGE = StageRecipe(
    VocabConfig,
    train_vocab,
    prepare=lambda ctx: ctx.needs("vocab", "mono", ctx.data.mono),
    plan=lambda ctx: Plan(
        len(ctx.data.mono), "sentences", drop_last=False, trains=False, note="a tokenizer and embeddings from"
    ),
)
