"""Training data: validated readers for parallel/paraphrase/monolingual text and batch ordering.

Importing this package is cheap (no torch, no ``datasets``): the Hugging Face loader imports
``datasets`` only when called.
"""

from modsenc.data.batching import BatchStream, LengthBucketBatchSampler, StreamItem, padding_waste, shard
from modsenc.data.demo import DEMO_PARALLEL, DEMO_PARAPHRASE, demo_path
from modsenc.data.errors import DataFormatError
from modsenc.data.hf_parallel import load_hf_parallel
from modsenc.data.language_data import LanguageData, load_language_data
from modsenc.data.readers import (
    PARAPHRASE_COLUMNS,
    ParallelCorpus,
    ParaphrasePair,
    TranslationPair,
    english_centric_pairs,
    is_language_code,
    read_monolingual,
    read_parallel_tsv,
    read_paraphrase_tsv,
)
from modsenc.data.specs import (
    file_record,
    load_monolingual,
    load_parallel,
    load_paraphrases,
    resolve_data_spec,
)

__all__ = [
    "DEMO_PARALLEL",
    "DEMO_PARAPHRASE",
    "PARAPHRASE_COLUMNS",
    "BatchStream",
    "DataFormatError",
    "LanguageData",
    "LengthBucketBatchSampler",
    "ParallelCorpus",
    "ParaphrasePair",
    "StreamItem",
    "TranslationPair",
    "demo_path",
    "english_centric_pairs",
    "file_record",
    "is_language_code",
    "load_hf_parallel",
    "load_language_data",
    "load_monolingual",
    "load_parallel",
    "load_paraphrases",
    "padding_waste",
    "read_monolingual",
    "read_parallel_tsv",
    "read_paraphrase_tsv",
    "resolve_data_spec",
    "shard",
]
