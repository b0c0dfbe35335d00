"""bench/prompts.py: P@1 and MRR of a score matrix whose gold is its diagonal, checked by hand."""

from __future__ import annotations

import pytest
import torch

from bench import prompts as prompts_bench


def test_retrieval_scores_by_hand() -> None:
    scores = torch.tensor(
        [
            [0.9, 0.1, 0.2],  # gold first: rank 1
            [0.8, 0.5, 0.1],  # one above the gold: rank 2
            [0.7, 0.6, 0.3],  # two above: rank 3
        ]
    )
    p_at_1, mrr = prompts_bench.retrieval_scores(scores)
    assert p_at_1 == pytest.approx(100 / 3)
    assert mrr == pytest.approx(100 * (1 + 1 / 2 + 1 / 3) / 3)
    # a tie with the gold counts for the gold
    assert prompts_bench.retrieval_scores(torch.ones(2, 2)) == (100.0, 100.0)
