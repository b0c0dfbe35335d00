"""What the LoRA kinds (``language``: LA, ``sentence``: SE) share: peft adapters named
``LANG_KIND``. When several are active peft *adds* their deltas (``W x + B_la A_la x + B_se A_se
x``), which is what the paper stacks (adapters' ``Stack`` would chain them instead, shown in
tests/modules/test_modular.py); export merges them as peft does (``get_delta_weight``: B A scaled)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from modsenc.modules.kinds.base import ModuleHost, ModuleKind, module_name

if TYPE_CHECKING:
    import torch
    from peft import LoraConfig


class LoraKind(ModuleKind):
    """A peft LoRA saved as ``KIND/`` (``adapter_config.json`` + ``adapter_model.safetensors``)."""

    library: ClassVar[str] = "peft"

    def create(self, modular: ModuleHost, lang: str, config: LoraConfig) -> None:
        from peft import get_peft_model  # noqa: PLC0415 - the registry is imported without peft

        name = module_name(lang, self.name)
        if modular.peft is None:
            modular.attach_peft(get_peft_model(modular.backbone, config, adapter_name=name))
        else:
            modular.peft.add_adapter(name, config)
        modular.mark_loaded(lang, self.name)

    def load(self, modular: ModuleHost, lang: str, directory: Path) -> None:
        from peft import PeftModel  # noqa: PLC0415

        name, path = module_name(lang, self.name), str(directory / self.files[0])
        if modular.peft is None:
            modular.attach_peft(PeftModel.from_pretrained(modular.backbone, path, adapter_name=name))
        else:
            modular.peft.load_adapter(path, adapter_name=name)
        modular.mark_loaded(lang, self.name)

    def save(self, modular: ModuleHost, lang: str, directory: Path) -> None:
        """peft's format, in ``directory/KIND``."""
        name, path = module_name(lang, self.name), directory / self.files[0]
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            modular.peft.save_pretrained(tmp, selected_adapters=[name], save_embedding_layers=False)
            shutil.move(str(Path(tmp) / name), str(path))

    def remove(self, modular: ModuleHost, lang: str) -> None:
        name = module_name(lang, self.name)
        if modular.peft is not None and name in modular.peft.peft_config:
            modular.peft.delete_adapter(name)

    def activate(self, modular: ModuleHost, lang: str | None, active: Sequence[str]) -> None:
        if modular.peft is None:
            return
        if active:
            modular.peft.base_model.enable_adapter_layers()
            names = [module_name(lang, kind) for kind in active]
            modular.peft.base_model.set_adapter(names, inference_mode=True)
        else:
            modular.peft.base_model.disable_adapter_layers()

    def merge_weights(self, modular: ModuleHost, lang: str, state: dict[str, torch.Tensor]) -> None:
        """Add ``B A`` scaled (peft's ``get_delta_weight``) to each adapted layer's weight."""
        from peft.tuners.lora import LoraLayer  # noqa: PLC0415

        adapter = module_name(lang, self.name)
        for name, layer in modular.backbone.model.named_modules():
            if isinstance(layer, LoraLayer) and adapter in layer.lora_A:
                key = name.replace(".base_layer", "") + ".weight"
                state[key] += layer.get_delta_weight(adapter).to(state[key].dtype)
