"""The router as its own Deployment and Service, its engines registered by Service DNS name.

The router learns backends over its admin API or, here, from `--backends FILE` at start-up
(router/static_backends.py): a ConfigMap holds that file, one entry per engine, each pinned
to the engine's Service, so engine pods restart and move without anyone registering again.
"""

from __future__ import annotations

import hashlib

import yaml

from manager.deploy.engine_pods import EnginePod
from manager.deploy.k8s_objects import (
    ConfigMap,
    ConfigMapVolumeSource,
    Container,
    ContainerPort,
    Deployment,
    DeploymentSpec,
    EmptyDirVolumeSource,
    EnvVar,
    EnvVarSource,
    HTTPGetAction,
    LabelSelector,
    ObjectMeta,
    PodSpec,
    PodTemplateSpec,
    Probe,
    SecretKeySelector,
    SecretVolumeSource,
    Service,
    ServicePort,
    ServiceSpec,
    Volume,
    VolumeMount,
)
from manager.deploy.kubernetes import PORT_NAME
from manager.deploy.options import RenderOptions
from router.admin import BackendIn
from router.backend import BackendKind
from router.static_backends import BackendsFile

ROUTER_NAME = "gomgr-router"
BACKENDS_KEY = "backends.yaml"
CONFIG_DIR = "/etc/gomgr"
# NOTE: the router makes its admin token here on start; nothing else needs it in a cluster.
TOKEN_DIR = "/var/run/gomgr"
TLS_DIR = "/etc/gomgr-tls"
BACKENDS_HASH = "gomgr.dev/backends-sha256"  # a changed file rolls the router's pod
API_KEY_ENV = "GOMGR_ROUTER_API_KEY"


def router_objects(
    pods: tuple[EnginePod, ...], urls: tuple[str, ...], options: RenderOptions
) -> list[ConfigMap | Deployment | Service]:
    """`urls`: each engine's base URL in the cluster, in the order of `pods`."""
    backends = backends_file(pods, urls)
    meta = ObjectMeta(name=ROUTER_NAME, namespace=options.namespace, labels=_labels())
    selector = {"app.kubernetes.io/part-of": "gomgr", "app.kubernetes.io/instance": ROUTER_NAME}
    digest = hashlib.sha256(backends.encode()).hexdigest()
    return [
        ConfigMap(metadata=meta, data={BACKENDS_KEY: backends}),
        Deployment(
            metadata=meta,
            spec=DeploymentSpec(
                replicas=1,
                selector=LabelSelector(match_labels=selector),
                template=PodTemplateSpec(
                    metadata=ObjectMeta(labels=_labels(), annotations={BACKENDS_HASH: digest}),
                    spec=_pod_spec(options),
                ),
            ),
        ),
        Service(
            metadata=meta,
            spec=ServiceSpec(
                selector=selector,
                ports=[
                    ServicePort(name=PORT_NAME, port=options.router_port, target_port=PORT_NAME)
                ],
            ),
        ),
    ]


def backends_file(pods: tuple[EnginePod, ...], urls: tuple[str, ...]) -> str:
    """The router's `--backends` file, in the router's own schema."""
    entries = [
        BackendIn(
            id=pod.name, model=pod.served_name, base_url=url, aliases=list(pod.aliases),
            kind=BackendKind.ENGINE if pod.engine == "gomgr" else BackendKind.OPENAI,
        )
        for pod, url in zip(pods, urls, strict=True)
    ]
    content = BackendsFile(backends=entries).model_dump(mode="json", exclude_defaults=True)
    return yaml.safe_dump(content, sort_keys=False)


def _labels() -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "gomgr-router",
        "app.kubernetes.io/part-of": "gomgr",
        "app.kubernetes.io/instance": ROUTER_NAME,
        "app.kubernetes.io/component": "router",
        "app.kubernetes.io/managed-by": "gomgr",
    }


def _pod_spec(options: RenderOptions) -> PodSpec:
    probe = Probe(
        http_get=HTTPGetAction(path="/health", port=PORT_NAME, scheme="HTTPS"),
        period_seconds=10, timeout_seconds=5, failure_threshold=3,
    )
    # NOTE: Kubernetes expands $(VAR) in a command from the container's environment, so the
    # key stays in its Secret, out of the rendered files.
    command = [
        "python", "-m", "router", "--host", "0.0.0.0", "--port", str(options.router_port),
        "--backends", f"{CONFIG_DIR}/{BACKENDS_KEY}",
        "--admin-token-file", f"{TOKEN_DIR}/router.token",
        "--api-key", f"$({API_KEY_ENV})",
        "--tls-certfile", f"{TLS_DIR}/tls.crt", "--tls-keyfile", f"{TLS_DIR}/tls.key",
    ]
    key = SecretKeySelector(name=options.router_api_key_secret, key="api-key")
    return PodSpec(
        containers=[
            Container(
                name="router",
                image=options.gomgr_image,
                command=command,
                env=[EnvVar(name=API_KEY_ENV, value_from=EnvVarSource(secret_key_ref=key))],
                ports=[ContainerPort(name=PORT_NAME, container_port=options.router_port)],
                volume_mounts=[
                    VolumeMount(name="backends", mount_path=CONFIG_DIR, read_only=True),
                    VolumeMount(name="admin-token", mount_path=TOKEN_DIR),
                    VolumeMount(name="tls", mount_path=TLS_DIR, read_only=True),
                ],
                readiness_probe=probe,
                liveness_probe=probe,
            )
        ],
        volumes=[
            Volume(name="backends", config_map=ConfigMapVolumeSource(name=ROUTER_NAME)),
            Volume(name="admin-token", empty_dir=EmptyDirVolumeSource()),
            Volume(name="tls", secret=SecretVolumeSource(secret_name=options.router_tls_secret)),
        ],
    )
