"""EMS's cross-lingual token-level reconstruction (XTR, Mao et al.).

From the sentence vector u of S_l and a target-language embedding u_la = W_la·onehot(<2l'>), the
head predicts the bag of tokens of the translation S_l':

    q = softmax(W_emb · swish(W_fc [u_la ⊕ u] + b_fc)),   L = KL(p_{S_l'} ‖ q_{S_l})

where p is the translation's token counts divided by its length (special tokens excluded).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from modsenc.backbone.packing import PackedBatch


def bag_of_tokens(batch: PackedBatch, vocab_size: int, special_ids: Iterable[int]) -> torch.Tensor:
    """(num_sequences, vocab) distribution of each sequence's non-special tokens; a sequence made
    only of special tokens gets an all-zero row (it then adds nothing to the KL)."""
    ids = batch.input_ids
    lengths = torch.tensor(batch.seqlens, device=ids.device)
    owner = torch.repeat_interleave(torch.arange(len(batch.seqlens), device=ids.device), lengths)
    special = torch.tensor(sorted(special_ids), dtype=ids.dtype, device=ids.device)
    keep = ~torch.isin(ids, special)
    counts = torch.zeros(len(batch.seqlens), vocab_size, device=ids.device)
    counts.index_put_(
        (owner[keep], ids[keep]), torch.ones(int(keep.sum()), device=ids.device), accumulate=True
    )
    return counts / counts.sum(dim=1, keepdim=True).clamp_min(1.0)


class XTRHead(nn.Module):
    """The XTR head. ``num_languages=0`` drops the language embedding (the head's input is then
    u alone, d-dimensional). Without its own ``w_emb`` (``tied=True``) the caller passes the
    backbone's input embedding matrix to ``forward``, so the two share storage and gradients."""

    def __init__(
        self,
        hidden_size: int,
        vocab_size: int,
        num_languages: int = 0,
        language_dim: int = 128,
        tied: bool = False,
        init_embedding: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.language_embedding = nn.Embedding(num_languages, language_dim) if num_languages else None
        in_dim = hidden_size + (language_dim if num_languages else 0)
        self.fc = nn.Linear(in_dim, hidden_size)
        self.w_emb: nn.Parameter | None = None
        if not tied:
            # Untied but started from the input embeddings (when given): a pretrained backbone's
            # vocabulary geometry is a better start than noise, and the ablation then differs from
            # the tied head only in the sharing.
            weight = (
                init_embedding.detach().clone()
                if init_embedding is not None
                else torch.empty(vocab_size, hidden_size).normal_(std=0.02)
            )
            if weight.shape != (vocab_size, hidden_size):
                raise ValueError(
                    f"init_embedding must be ({vocab_size}, {hidden_size}), got {tuple(weight.shape)}"
                )
            self.w_emb = nn.Parameter(weight)

    @property
    def input_dim(self) -> int:
        return self.fc.in_features

    def forward(
        self,
        sentence: torch.Tensor,
        target_language: torch.Tensor | None = None,
        embedding_matrix: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """log q: (batch, vocab) log-probabilities of the translation's tokens."""
        x = sentence
        if self.language_embedding is not None:
            if target_language is None:
                raise ValueError("this XTR head has a language embedding: pass target_language")
            x = torch.cat([self.language_embedding(target_language).to(sentence.dtype), sentence], dim=-1)
        weight = self.w_emb if self.w_emb is not None else embedding_matrix
        if weight is None:
            raise ValueError("a tied XTR head needs the backbone's input embedding matrix")
        logits = F.linear(F.silu(self.fc(x)), weight)
        return F.log_softmax(logits.float(), dim=-1)


class XTRLoss(nn.Module):
    """Σ over the batch of KL(p ‖ q); returns the *sum*, so a data-parallel trainer divides by the
    global batch size."""

    def forward(self, log_q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if log_q.shape != target.shape:
            raise ValueError(f"log_q {tuple(log_q.shape)} and target {tuple(target.shape)} differ in shape")
        # kl_div(input=log q, target=p) = Σ p (log p - log q), with 0 · log 0 = 0.
        return F.kl_div(log_q, target.float(), reduction="sum")
