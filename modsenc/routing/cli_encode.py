"""What ``modsenc zoo list`` and ``modsenc zoo info`` print (the CLI only parses options)."""

from __future__ import annotations

import json
import os

from modsenc.modules.bundle import Zoo, check_language_code


def zoo_table(zoo_dir: str | os.PathLike) -> str:
    zoo = Zoo(zoo_dir)
    if not zoo.index_path.exists():
        raise FileNotFoundError(f"{zoo_dir} is not a modsenc zoo (no index.json)")
    rows = ["lang  script  pivot  modules               size (MB)  created"]
    for lang in zoo.languages():
        try:
            manifest = zoo.read_manifest(lang)
        except (OSError, ValueError) as err:  # one broken entry is reported, the others still listed
            rows.append(f"{lang:<5} BROKEN: {err}")
            continue
        size = zoo.bundle_bytes(lang) / 2**20
        modules = ",".join(k for k in ("vocab", "la", "se", "cla") if k in manifest["modules"])
        rows.append(
            f"{lang:<5} {manifest.get('script', '?'):<7} {'yes' if manifest.get('is_pivot') else 'no':<6} "
            f"{modules:<21} {size:>9.1f}  {manifest.get('created', '?')}"
        )
    backbone = zoo.read_index().get("backbone") or {}
    rows.append(f"backbone: {zoo.backbone_dir} (fingerprint {str(backbone.get('fingerprint'))[:12]})")
    return "\n".join(rows)


def bundle_info(zoo_dir: str | os.PathLike, lang: str) -> str:
    manifest = Zoo(zoo_dir).read_manifest(check_language_code(lang))
    lines = [
        f"language {manifest['language']} ({manifest['script']}), pivot {manifest['pivot']}"
        + (" (this is the pivot)" if manifest["is_pivot"] else ""),
        f"stages: {', '.join(manifest['stages'])}"
        + (f" (CLA variant {manifest['cla_variant']})" if manifest.get("cla_variant") else ""),
        "modules:",
    ]
    for kind, info in sorted(manifest["modules"].items()):
        lines.append(
            f"  {kind:<6} {info['parameters']:>12,} parameters  "
            f"{info['percent_of_backbone']:6.2f}% of backbone"
        )
    lines.append("data:")
    for kind, files in manifest["data"]["files"].items():
        for record in files:
            column = f" [{record['column']}]" if record.get("column") else ""
            lines.append(
                f"  {kind:<10} {record.get('path', record.get('spec'))}{column}: {record['count']} rows"
            )
    lines.append("dev metrics:")
    for stage, metrics in manifest["dev_metrics"].items():
        lines.append(f"  after {stage}: {json.dumps(metrics)}")
    lines.append(
        f"built {manifest['created']} in {manifest['wall_seconds']:.0f} s with "
        + ", ".join(f"{k} {v}" for k, v in manifest["versions"].items())
    )
    return "\n".join(lines)
