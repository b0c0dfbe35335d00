"""Evaluation of sentence encoders: STS, paraphrase retrieval (more metrics follow in issue 5)."""
