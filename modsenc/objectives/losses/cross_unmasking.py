"""MEXMA's cross-unmasking: rebuild one language's masked tokens from its own (masked) token
states plus the *other* language's sentence vector.

As in the authors' code: the clean sentence vector of the other language replaces position 0
of the masked pass's last hidden states (the sequence keeps its length, no new position
embeddings), a stack of XLM-R layers mixes it in, and a vocabulary projection tied to the
backbone's input embeddings predicts the original tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import XLMRobertaConfig
from transformers.models.xlm_roberta.modeling_xlm_roberta import XLMRobertaLayer

from modsenc.backbone.attention import AttentionBackend
from modsenc.backbone.encoder import run_packed_layers
from modsenc.backbone.packing import PackedBatch

IGNORE_INDEX = -100


class CrossUnmaskingHead(nn.Module):
    def __init__(
        self,
        hidden_size: int,
        vocab_size: int,
        num_layers: int = 6,
        num_heads: int = 8,
        intermediate_size: int | None = None,
        hidden_dropout: float = 0.1,
        attention_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.config = XLMRobertaConfig(
            hidden_size=hidden_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            intermediate_size=intermediate_size or 4 * hidden_size,
            hidden_dropout_prob=hidden_dropout,
            attention_probs_dropout_prob=attention_dropout,
            vocab_size=vocab_size,
        )
        # The packed forward calls only query/key/value; the class picked here is never run as a whole.
        self.config._attn_implementation = "eager"
        self.layers = nn.ModuleList(XLMRobertaLayer(self.config) for _ in range(num_layers))
        self.apply(self._init_weights)
        # The projection matrix is the backbone's word embedding matrix (tied); only the bias is ours.
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(
        self,
        masked_hidden: torch.Tensor,
        other_sentence: torch.Tensor,
        layout: PackedBatch,
        labels: torch.Tensor,
        embedding_matrix: torch.Tensor,
        attention: AttentionBackend,
        output_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy of each masked position, and those positions' packed indices.

        ``masked_hidden``: (total_tokens, hidden) packed states of the masked pass;
        ``other_sentence``: (batch, hidden) clean sentence vectors of the other language;
        ``labels``: (total_tokens,) original ids at masked positions, ``IGNORE_INDEX`` elsewhere;
        ``output_ids``: sorted vocabulary ids the softmax runs over (every label among them), or
        ``None`` for the whole vocabulary.
        """
        hidden = masked_hidden.index_copy(0, layout.first_token_index, other_sentence.to(masked_hidden.dtype))
        hidden = run_packed_layers(self.layers, hidden, layout.seqlens, attention)
        positions = (labels != IGNORE_INDEX).nonzero(as_tuple=True)[0]
        targets = labels.index_select(0, positions)
        weight, bias = embedding_matrix, self.bias
        if output_ids is not None:
            weight, bias = weight.index_select(0, output_ids), bias.index_select(0, output_ids)
            targets = torch.searchsorted(output_ids, targets)  # id -> its row in the restricted softmax
        # Project only the masked positions: the vocabulary matmul is the head's largest.
        logits = F.linear(hidden.index_select(0, positions), weight, bias)
        losses = F.cross_entropy(logits.float(), targets, reduction="none")
        return losses, positions
