from modsenc.backbone.attention import available_backends, get_attention_backend
from modsenc.backbone.encoder import Backbone, load_manifest, packed_layer_forward, run_packed_layers
from modsenc.backbone.manifest import MANIFEST_NAME, fingerprint
from modsenc.backbone.packing import PackedBatch

__all__ = [
    "MANIFEST_NAME",
    "Backbone",
    "PackedBatch",
    "available_backends",
    "fingerprint",
    "get_attention_backend",
    "load_manifest",
    "packed_layer_forward",
    "run_packed_layers",
]
