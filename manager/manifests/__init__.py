"""Model manifests: built-in YAML per model family, user overrides merged over them.

    from manager.manifests.flags import to_engine_flags
    from manager.manifests.resolve import resolve_manifest

    effective = resolve_manifest("Qwen/Qwen2.5-7B-Instruct", "Qwen2ForCausalLM")
    flags = to_engine_flags(effective, "/models/Qwen/Qwen2.5-7B-Instruct")

catalog.py (Catalog, load_catalog), effective.py (EffectiveManifest, FieldSource, Origin),
errors.py (ManifestError). NOTE: nothing is re-exported here: importing any submodule (the
CLI's `manager.manifests.engines`) would otherwise load the YAML and pydantic layers too.
"""
