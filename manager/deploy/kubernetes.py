"""`--target kubernetes`: a Deployment and a ClusterIP Service per engine."""

from __future__ import annotations

from manager.deploy.engine_pods import EnginePod
from manager.deploy.k8s_objects import (
    Deployment,
    DeploymentSpec,
    LabelSelector,
    ObjectMeta,
    PodTemplateSpec,
    Service,
    ServicePort,
    ServiceSpec,
)
from manager.deploy.options import RenderOptions
from manager.deploy.pod_spec import engine_pod_spec
from manager.runtimes.base import CONTAINER_PORT

CONTAINER_NAME = "engine"
PORT_NAME = "http"


def engine_deployment(pod: EnginePod, options: RenderOptions) -> Deployment:
    return Deployment(
        metadata=_meta(pod, options),
        spec=DeploymentSpec(
            replicas=pod.replicas,
            selector=LabelSelector(match_labels=pod.selector()),
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=pod.labels(), annotations=pod.annotations()),
                spec=engine_pod_spec(pod, options, CONTAINER_NAME, PORT_NAME),
            ),
        ),
    )


def engine_service(pod: EnginePod, options: RenderOptions) -> Service:
    """The engine's stable DNS name (`<name>:30000`), which the router's backends file names."""
    return Service(
        metadata=_meta(pod, options),
        spec=ServiceSpec(
            selector=pod.selector(),
            ports=[ServicePort(name=PORT_NAME, port=CONTAINER_PORT, target_port=PORT_NAME)],
        ),
    )


def engine_url(pod: EnginePod) -> str:
    return f"http://{pod.name}:{CONTAINER_PORT}"


def _meta(pod: EnginePod, options: RenderOptions) -> ObjectMeta:
    return ObjectMeta(
        name=pod.name, namespace=options.namespace, labels=pod.labels(),
        annotations=pod.annotations(),
    )
