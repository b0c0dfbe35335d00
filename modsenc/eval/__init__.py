"""Evaluation of sentence encoders: bitext mining, STS, RSIM, language bias, classification, mining."""
