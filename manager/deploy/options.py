"""What `gomgr deploy render` is asked for beyond the desired-state file."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Target(StrEnum):
    KUBERNETES = "kubernetes"  # a Deployment and a Service per engine
    KSERVE = "kserve"  # an InferenceService per engine (a custom-container predictor)


class ModelSource(StrEnum):
    PULL = "pull"  # an init container runs `gomgr models pull <repo>` into an emptyDir
    PVC = "pvc"  # an existing PersistentVolumeClaim that holds a gomgr model store


@dataclass(frozen=True)
class RenderOptions:
    target: Target = Target.KUBERNETES
    namespace: str | None = None  # None: the namespace kubectl applies to
    model_source: ModelSource = ModelSource.PULL
    models_pvc: str = "gomgr-models"  # the claim, for ModelSource.PVC
    # NOTE: an image with the gomgr distribution installed: the router runs from it, and the
    # init container that pulls models (docs/scale-out.md shows how to build one).
    gomgr_image: str = "gomgr:latest"
    # NOTE: where the manifests name gomgr's engine image (`gomgr-engine:latest`, a local tag),
    # the image a cluster pulls instead, e.g. registry.example.com/gomgr-engine:0.1.
    engine_image: str | None = None
    router_port: int = 8000
    # NOTE: in its pod the router listens beyond loopback, which it does only with a client
    # key and TLS (router/config.py): a Secret whose `api-key` its clients must send, and a
    # kubernetes.io/tls Secret (tls.crt, tls.key) it serves HTTPS with. The user creates both
    # (docs/scale-out.md); the pod waits for them.
    router_api_key_secret: str = "gomgr-router-key"
    router_tls_secret: str = "gomgr-router-tls"
