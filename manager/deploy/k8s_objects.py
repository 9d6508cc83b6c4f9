"""The Kubernetes objects gomgr renders, typed: only the fields it sets, named as in Python and
written in Kubernetes' camelCase (the `apps/v1` and `v1` OpenAPI schemas; a test validates the
output against them with kubernetes-validate)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class K8sModel(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    def to_yaml_dict(self) -> dict[str, object]:
        """As `kubectl apply` reads it: camelCase keys, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True)


class ObjectMeta(K8sModel):
    name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class SecretKeySelector(K8sModel):
    name: str
    key: str
    optional: bool | None = None


class EnvVarSource(K8sModel):
    secret_key_ref: SecretKeySelector


class EnvVar(K8sModel):
    name: str
    value: str | None = None
    value_from: EnvVarSource | None = None


class ContainerPort(K8sModel):
    name: str | None = None
    container_port: int
    protocol: Literal["TCP"] = "TCP"


class HTTPGetAction(K8sModel):
    path: str
    port: int | str
    scheme: Literal["HTTP", "HTTPS"] | None = None  # None: HTTP


class Probe(K8sModel):
    http_get: HTTPGetAction
    period_seconds: int
    timeout_seconds: int
    failure_threshold: int


class ResourceRequirements(K8sModel):
    limits: dict[str, str] | None = None
    requests: dict[str, str] | None = None


class VolumeMount(K8sModel):
    name: str
    mount_path: str
    sub_path: str | None = None
    read_only: bool | None = None


class Container(K8sModel):
    name: str
    image: str
    # NOTE: gomgr's images are local tags (`gomgr-engine:latest`) that a kind or minikube
    # cluster is loaded with; `Always`, the default for `:latest`, would look for them in a
    # registry. Pin a tag to roll out a new image.
    image_pull_policy: Literal["IfNotPresent"] = "IfNotPresent"
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None
    ports: list[ContainerPort] | None = None
    resources: ResourceRequirements | None = None
    volume_mounts: list[VolumeMount] | None = None
    startup_probe: Probe | None = None
    readiness_probe: Probe | None = None
    liveness_probe: Probe | None = None


class EmptyDirVolumeSource(K8sModel):
    medium: Literal["Memory"] | None = None
    size_limit: str | None = None


class PersistentVolumeClaimVolumeSource(K8sModel):
    claim_name: str
    read_only: bool | None = None


class ConfigMapVolumeSource(K8sModel):
    name: str


class SecretVolumeSource(K8sModel):
    secret_name: str


class Volume(K8sModel):
    name: str
    empty_dir: EmptyDirVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    config_map: ConfigMapVolumeSource | None = None


class PodSpec(K8sModel):
    init_containers: list[Container] | None = None
    containers: list[Container]
    volumes: list[Volume] | None = None


class PodTemplateSpec(K8sModel):
    metadata: ObjectMeta
    spec: PodSpec


class LabelSelector(K8sModel):
    match_labels: dict[str, str]


class DeploymentSpec(K8sModel):
    replicas: int
    selector: LabelSelector
    template: PodTemplateSpec


class Deployment(K8sModel):
    api_version: Literal["apps/v1"] = "apps/v1"
    kind: Literal["Deployment"] = "Deployment"
    metadata: ObjectMeta
    spec: DeploymentSpec


class ServicePort(K8sModel):
    name: str
    port: int
    target_port: int | str
    protocol: Literal["TCP"] = "TCP"


class ServiceSpec(K8sModel):
    type: Literal["ClusterIP"] = "ClusterIP"
    selector: dict[str, str]
    ports: list[ServicePort]


class Service(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Service"] = "Service"
    metadata: ObjectMeta
    spec: ServiceSpec


class ConfigMap(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["ConfigMap"] = "ConfigMap"
    metadata: ObjectMeta
    data: dict[str, str]
