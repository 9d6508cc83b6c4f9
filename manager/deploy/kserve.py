"""`--target kserve`: a KServe InferenceService per engine, its predictor a custom container.

Typed like manager/deploy/k8s_objects.py: `serving.kserve.io/v1beta1`, only the fields gomgr
sets. The predictor is a pod spec (KServe inlines PodSpec) with KServe's replica bounds; its
container must be called `kserve-container`. RawDeployment mode by default: a Deployment and
a Service `<name>-predictor` on port 80, no Knative needed.
"""

from __future__ import annotations

from typing import Literal

from manager.deploy.engine_pods import EnginePod
from manager.deploy.k8s_objects import K8sModel, ObjectMeta, PodSpec
from manager.deploy.options import RenderOptions
from manager.deploy.pod_spec import engine_pod_spec

CONTAINER_NAME = "kserve-container"
PORT_NAME = "http1"
DEPLOYMENT_MODE = "serving.kserve.io/deploymentMode"


class PredictorSpec(PodSpec):
    """KServe inlines a PodSpec in its predictor, beside the replica bounds."""

    min_replicas: int
    max_replicas: int


class InferenceServiceSpec(K8sModel):
    predictor: PredictorSpec


class InferenceService(K8sModel):
    api_version: Literal["serving.kserve.io/v1beta1"] = "serving.kserve.io/v1beta1"
    kind: Literal["InferenceService"] = "InferenceService"
    metadata: ObjectMeta
    spec: InferenceServiceSpec


def inference_service(pod: EnginePod, options: RenderOptions) -> InferenceService:
    spec = engine_pod_spec(pod, options, CONTAINER_NAME, PORT_NAME)
    return InferenceService(
        metadata=ObjectMeta(
            name=pod.name, namespace=options.namespace, labels=pod.labels(),
            annotations={**pod.annotations(), DEPLOYMENT_MODE: "RawDeployment"},
        ),
        spec=InferenceServiceSpec(
            predictor=PredictorSpec(
                **dict(spec), min_replicas=pod.replicas, max_replicas=pod.replicas
            )
        ),
    )


def predictor_url(pod: EnginePod) -> str:
    """The Service KServe makes for a raw deployment's predictor (port 80)."""
    return f"http://{pod.name}-predictor"
