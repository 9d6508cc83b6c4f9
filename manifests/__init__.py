"""The built-in model manifests (`*.yaml`), shipped as package data; read by manager.manifests."""
