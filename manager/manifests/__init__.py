"""Model manifests: built-in YAML per model family, user overrides merged over them.

    effective = resolve_manifest("Qwen/Qwen2.5-7B-Instruct", "Qwen2ForCausalLM")
    flags = to_engine_flags(effective, "/models/Qwen/Qwen2.5-7B-Instruct")
"""

from manager.manifests.catalog import Catalog, load_catalog
from manager.manifests.effective import EffectiveManifest, FieldSource, Origin
from manager.manifests.errors import ManifestError
from manager.manifests.flags import to_engine_flags
from manager.manifests.resolve import resolve_manifest

__all__ = [
    "Catalog",
    "EffectiveManifest",
    "FieldSource",
    "ManifestError",
    "Origin",
    "load_catalog",
    "resolve_manifest",
    "to_engine_flags",
]
