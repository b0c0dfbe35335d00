"""Prometheus metrics of one server, in their own registry (several apps in one process stay apart)."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

# Batch sizes in inputs and in requests: powers of two up to the largest batch anyone would set.
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# Seconds: a tiny model on a GPU answers in well under a millisecond, a large one on a CPU in seconds.
TIME_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # process_resident_memory_bytes, process_cpu_seconds_total ... (Linux /proc).
        ProcessCollector(registry=self.registry)
        r = self.registry
        self.requests = Counter(
            "modsenc_requests", "HTTP requests answered", ["endpoint", "status"], registry=r
        )
        self.errors = Counter("modsenc_errors", "Requests refused or failed, by kind", ["kind"], registry=r)
        self.inputs = Counter("modsenc_inputs", "Texts embedded", ["lang", "mode"], registry=r)
        self.routes = Counter(
            "modsenc_routes",
            "Texts by route (bundle, backbone: a language without a bundle, refused) and language "
            "(the bundle's, or the one detected; und: none)",
            ["route", "lang"],
            registry=r,
        )
        self.tokens = Counter("modsenc_tokens", "Tokens embedded (after truncation)", registry=r)
        self.truncated = Counter("modsenc_truncated_inputs", "Inputs cut to the token limit", registry=r)
        self.batch_inputs = Histogram(
            "modsenc_batch_inputs", "Texts per encoded batch", buckets=SIZE_BUCKETS, registry=r
        )
        self.batch_requests = Histogram(
            "modsenc_batch_requests",
            "Distinct HTTP requests whose texts share one encoded batch",
            buckets=SIZE_BUCKETS,
            registry=r,
        )
        self.queue_seconds = Histogram(
            "modsenc_queue_seconds",
            "Time a text waits before its batch starts",
            buckets=TIME_BUCKETS,
            registry=r,
        )
        self.encode_seconds = Histogram(
            "modsenc_encode_seconds",
            "Time to encode one batch (language load included)",
            buckets=TIME_BUCKETS,
            registry=r,
        )
        self.request_seconds = Histogram(
            "modsenc_request_seconds",
            "Time to answer an embedding request",
            ["endpoint"],
            buckets=TIME_BUCKETS,
            registry=r,
        )
        self.queued = Gauge("modsenc_queue_inputs", "Texts waiting for a batch", registry=r)
        self.languages_loaded = Gauge(
            "modsenc_languages_loaded", "Languages whose modules are loaded", registry=r
        )
        self.language_loads = Counter(
            "modsenc_language_loads", "Language bundles loaded", ["lang"], registry=r
        )
        self.language_evictions = Counter(
            "modsenc_language_evictions", "Language bundles unloaded to make room", ["lang"], registry=r
        )
        self.ready = Gauge("modsenc_ready", "1 once the backbone is loaded", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
