"""The per-language modules on the packed backbone: each one changes the forward pass, on every
attention backend, exactly as it does in the Hugging Face forward; two peft LoRAs add (adapters'
Stack would chain them); modules round-trip through their files; removing a language restores the
bare backbone."""

from __future__ import annotations

import json

import adapters
import pytest
import torch
from adapters import LoRAConfig, Stack
from transformers import BertConfig, BertModel

from modsenc.backbone import Backbone
from modsenc.backbone.attention import available_backends
from modsenc.modules.bundle import Zoo, module_kinds_in
from modsenc.modules.configs import alignment_adapter_config, language_adapter_config, sentence_adapter_config
from modsenc.modules.modular import ModularBackbone

TEXTS = [
    "Onam kasalxonada ishlaydi.",
    "Mening ikkita akam bor.",
    "Salom",
    "Bugun havo juda issiq va quyoshli.",
]


def _modular(backbone_dir, attention: str = "sdpa") -> ModularBackbone:
    torch.manual_seed(0)
    modular = ModularBackbone(Backbone.from_pretrained(backbone_dir, attention=attention))
    tokenizer = modular.base_tokenizer
    modular.add_vocabulary(
        "uz",
        tokenizer,
        modular.base_embeddings.weight + 0.5 * torch.randn_like(modular.base_embeddings.weight),
    )
    modular.add_lora("uz", "la", language_adapter_config())
    modular.add_lora("uz", "se", sentence_adapter_config())
    modular.add_alignment("uz", alignment_adapter_config())
    # LoRA B and the bottleneck's up-projection start at zero (identity); give them weights.
    for name, param in modular.backbone.named_parameters():
        if "lora_B" in name or "adapter_up" in name:
            torch.nn.init.normal_(param, std=0.2)
    return modular.eval()


@pytest.mark.parametrize("attention", available_backends())
def test_each_module_changes_the_forward_pass(tiny_backbone_dir, attention: str) -> None:
    modular = _modular(tiny_backbone_dir, attention)
    bare = modular.encode(TEXTS, None, convert_to_tensor=True)
    outputs = {}
    for kinds in (["vocab"], ["la"], ["se"], ["cla"], ["vocab", "la", "se", "cla"]):
        outputs[tuple(kinds)] = modular.encode(TEXTS, "uz", kinds, convert_to_tensor=True)
        assert (outputs[tuple(kinds)] - bare).abs().max() > 1e-2, kinds
    # Every single module gives a different output from every other one.
    singles = [outputs[(k,)] for k in ("vocab", "la", "se", "cla")]
    for i in range(4):
        for j in range(i + 1, 4):
            assert (singles[i] - singles[j]).abs().max() > 1e-2
    # Switching back to no modules gives the bare backbone again, exactly.
    assert torch.equal(modular.encode(TEXTS, None, convert_to_tensor=True), bare)


def test_an_active_block_puts_the_selected_language_back(tiny_backbone_dir) -> None:
    """Training selects LANG; encoding another state in between (the pivot, the bare backbone)
    runs in an active block, after which LANG's modules are in force again, with no call to
    re-select: the forward pass gives LANG's states, as before the block."""
    modular = _modular(tiny_backbone_dir)
    modular.select("uz", ["vocab", "la"])
    backbone = modular.backbone
    uz, base = modular.language_embeddings["uz"], modular.base_embeddings
    with torch.no_grad():
        batch = backbone.pack(modular.tokenize("uz", TEXTS, ["vocab", "la"]))
        selected = backbone(batch)
        bare = modular.encode(TEXTS, None, convert_to_tensor=True)  # an active block of its own
        with modular.active("uz", ["vocab"]):
            with modular.active(None):
                assert backbone.word_embeddings is base
            assert backbone.word_embeddings is uz  # the enclosing block's state again
        assert backbone.word_embeddings is uz and torch.equal(backbone(batch), selected)
    assert torch.equal(modular.encode(TEXTS, None, convert_to_tensor=True), bare)


def test_packed_forward_with_modules_matches_hugging_face(tiny_backbone_dir) -> None:
    modular = _modular(tiny_backbone_dir)
    modular.select("uz")
    backbone = modular.backbone
    with torch.no_grad():
        batch = backbone.pack(modular.tokenize("uz", TEXTS))
        packed = backbone(batch).split(batch.seqlens)
        enc = modular.tokenizer_of("uz")(TEXTS, padding=True, return_tensors="pt")
        reference = backbone.model(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]
        ).last_hidden_state
    worst = max(float((packed[i] - reference[i, : len(packed[i])]).abs().max()) for i in range(len(TEXTS)))
    assert worst < 1e-5, worst


def _linear_delta_check(layer, x, activate) -> tuple[float, float]:
    """(|delta_both - (delta_a + delta_b)|, |delta_both|) for one linear layer."""
    with torch.no_grad():
        return _deltas(layer, x, activate)


def _deltas(layer, x, activate) -> tuple[float, float]:
    activate(None)
    base = layer(x)
    activate(["a"])
    delta_a = layer(x) - base
    activate(["b"])
    delta_b = layer(x) - base
    activate(["a", "b"])
    delta_both = layer(x) - base
    return float((delta_both - delta_a - delta_b).abs().max()), float(delta_both.abs().max())


def test_peft_adds_two_active_loras_where_adapters_stack_chains_them(tiny_backbone_dir) -> None:
    torch.manual_seed(0)
    x = torch.randn(5, 32)

    # peft (what modsenc uses for LA + SE): deltas add.
    modular = ModularBackbone(Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa"))
    modular.add_lora("a", "la", language_adapter_config())
    modular.add_lora("b", "la", language_adapter_config())
    for name, param in modular.backbone.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.5)
    peft_model = modular.peft.base_model
    query = modular.backbone.model.encoder.layer[0].attention.self.query

    def activate_peft(names):
        if names is None:
            peft_model.disable_adapter_layers()
        else:
            peft_model.enable_adapter_layers()
            peft_model.set_adapter([f"{n}_la" for n in names])

    gap, size = _linear_delta_check(query.eval(), x, activate_peft)
    assert size > 0.1 and gap < 1e-5

    # adapters' Stack: the second LoRA is applied to the first one's output, so it is not a sum.
    model = BertModel(
        BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
    )
    adapters.init(model)
    for name in ("a", "b"):
        model.add_adapter(name, config=LoRAConfig(r=8, alpha=16, selfattn_lora=True))
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.5)
    layer = model.encoder.layer[0].attention.self.query

    def activate_adapters(names):
        model.set_active_adapters(None if names is None else Stack(*names) if len(names) > 1 else names[0])

    gap, size = _linear_delta_check(layer.eval(), x, activate_adapters)
    assert size > 0.1 and gap > 0.05 * size


def test_modules_round_trip_through_their_files(tiny_backbone_dir, tmp_path) -> None:
    modular = _modular(tiny_backbone_dir)
    expected = modular.encode(TEXTS, "uz", convert_to_tensor=True)
    modular.save_vocabulary("uz", tmp_path)
    for kind in ("la", "se"):
        modular.save_lora("uz", kind, tmp_path / kind)
    modular.save_alignment("uz", tmp_path / "cla")
    assert (tmp_path / "la" / "adapter_model.safetensors").exists()
    assert (tmp_path / "cla" / "adapter.safetensors").exists()
    assert not list(tmp_path.rglob("*.bin"))  # safetensors only, nothing pickled

    fresh = ModularBackbone(Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa")).eval()

    (tmp_path / "modsenc_bundle.json").write_text(
        json.dumps(
            {
                "format": "modsenc-bundle/1",
                "language": "uz",
                "modules": {"vocab": {}, "la": {}, "se": {}, "cla": {}},
            }
        )
    )
    # a hand-written manifest lists no file hashes: loadable unverified only
    assert fresh.load_bundle(tmp_path, "uz", verify=False) == {"vocab", "la", "se", "cla"}
    assert torch.equal(fresh.encode(TEXTS, "uz", convert_to_tensor=True), expected)


def test_removing_a_language_restores_the_bare_backbone(tiny_backbone_dir) -> None:
    plain = Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa").eval()
    reference = plain.encode(TEXTS, convert_to_tensor=True)
    modular = _modular(tiny_backbone_dir)
    modular.remove_language("uz")
    assert modular.modules_of("uz") == set()
    assert not [n for n, _ in modular.backbone.named_parameters() if "uz_" in n]
    assert torch.allclose(modular.encode(TEXTS, None, convert_to_tensor=True), reference, atol=1e-6)


def test_a_corrupt_bundle_leaves_nothing_half_loaded(tiny_backbone_dir, tmp_path) -> None:
    modular = _modular(tiny_backbone_dir)
    modular.save_vocabulary("uz", tmp_path)
    modular.save_lora("uz", "la", tmp_path / "la")
    (tmp_path / "se").mkdir()
    (tmp_path / "se" / "adapter_config.json").write_text("{not json")

    (tmp_path / "modsenc_bundle.json").write_text(json.dumps({"modules": {"vocab": {}, "la": {}, "se": {}}}))
    fresh = ModularBackbone(Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa"))
    with pytest.raises(Exception):  # noqa: B017 - whichever error the library raises
        fresh.load_bundle(tmp_path, "kk")
    assert fresh.modules_of("kk") == set()
    assert "kk" not in fresh.language_embeddings
    assert not [n for n, _ in fresh.backbone.named_parameters() if "kk_" in n]


def test_save_bundle_installs_the_saved_modules_and_load_bundle_reads_them_back(
    tiny_backbone_dir, tmp_path
) -> None:
    modular = _modular(tiny_backbone_dir)
    expected = modular.encode(TEXTS, "uz", convert_to_tensor=True)
    # Two "stages": the first saves the vocabulary and the LA, the second the SE and the CLA.
    first, second = tmp_path / "one", tmp_path / "two"
    for kind in ("vocab", "la"):
        modular.save_module("uz", kind, first)
    for kind in ("se", "cla"):
        modular.save_module("uz", kind, second)
    assert module_kinds_in(first) == ["vocab", "la"] and module_kinds_in(second) == ["se", "cla"]
    zoo = Zoo(tmp_path / "zoo")
    zoo.install_backbone(tiny_backbone_dir)
    langid = tmp_path / "langid.json"
    langid.write_text('{"language": "uz"}')  # a stand-in profile, labelled as verify_bundle checks
    common = {
        "pivot": "en",
        "stages": ["vocab", "la", "se", "cla"],
        "script": "Latn",
        "router": {"langid": "langid.json"},
        "router_files": {"langid.json": langid},
        "record": {"precision": "bf16", "cla_variant": "pp"},
    }
    with pytest.raises(FileNotFoundError, match=r"modules \['cla', 'se'\] are loaded but not saved"):
        modular.save_bundle(zoo, "uz", [first], **common)
    with pytest.raises(ValueError, match=r"record: \['language', 'note'\] are not training fields"):
        modular.save_bundle(zoo, "uz", [first, second], **{**common, "record": {"note": 1, "language": "kk"}})
    target = modular.save_bundle(zoo, "uz", [first, second], **common)
    manifest = zoo.read_manifest("uz")
    assert manifest.format == "modsenc-bundle/1" and manifest.language == "uz" and manifest.pivot == "en"
    assert manifest.precision == "bf16" and manifest.cla_variant == "pp"
    assert manifest.stages == common["stages"]
    assert sorted(manifest.modules) == ["cla", "la", "se", "vocab"] and not manifest.is_pivot
    assert manifest.modules["vocab"]["path"] == "embeddings.safetensors"
    assert set(manifest.file_sha256) >= {"langid.json", "embeddings.safetensors", "la/adapter_config.json"}
    assert {"peft", "adapters", "torch"} <= set(manifest.versions)
    assert zoo.languages() == ["uz"]

    fresh = ModularBackbone(Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa")).eval()
    assert fresh.load_bundle(target, "uz") == {"vocab", "la", "se", "cla"}  # hashes verified
    assert torch.equal(fresh.encode(TEXTS, "uz", convert_to_tensor=True), expected)
