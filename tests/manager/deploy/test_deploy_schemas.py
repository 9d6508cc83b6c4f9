"""The rendered manifests validate against Kubernetes' OpenAPI schemas (kubernetes-validate,
which ships them: no cluster, no network), strictly: an unknown field fails.

KServe's InferenceService has no schema there, and its CRD's schema is megabytes (a PodSpec
inlined), so it is not vendored: its predictor is a PodSpec with KServe's replica bounds,
so that pod spec is validated as a Pod's, and the rest of its shape is in the golden files.
"""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from router.__main__ import parse_args
from router.static_backends import load_static_backends
from tests.manager.deploy.conftest import ENGINES_FILE, RenderCli

# NOTE: an old-enough release that the clusters people run accept what validates here.
KUBERNETES_VERSION = "1.29"
KSERVE_ONLY = ("minReplicas", "maxReplicas")


def rendered(render_cli: RenderCli, *args: str) -> list[dict[str, object]]:
    result = render_cli("-f", str(ENGINES_FILE), *args)
    assert result.exit_code == 0, result.output
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


@pytest.mark.parametrize("source", ["pull", "pvc"])
def test_kubernetes_target_validates(render_cli: RenderCli, source: str) -> None:
    documents = rendered(render_cli, "--target", "kubernetes", "--model-source", source)
    kinds = [doc["kind"] for doc in documents]
    assert kinds == ["Deployment", "Service"] * 3 + ["ConfigMap", "Deployment", "Service"]
    for doc in documents:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_kserve_predictor_validates_as_a_pod(render_cli: RenderCli) -> None:
    documents = rendered(render_cli, "--target", "kserve")
    services = [doc for doc in documents if doc["kind"] == "InferenceService"]
    assert len(services) == 3
    for doc in services:
        assert doc["apiVersion"] == "serving.kserve.io/v1beta1"
        spec = doc["spec"]
        assert isinstance(spec, dict) and list(spec) == ["predictor"]
        predictor = dict(spec["predictor"])
        assert predictor["minReplicas"] == predictor["maxReplicas"] == 1
        assert [c["name"] for c in predictor["containers"]] == ["kserve-container"]
        pod_spec = {k: v for k, v in predictor.items() if k not in KSERVE_ONLY}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": doc["metadata"], "spec": pod_spec}
        kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)
    for doc in documents:
        if doc["kind"] != "InferenceService":
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_a_schema_violation_is_caught(render_cli: RenderCli) -> None:
    """The check has teeth: a port as a word fails it."""
    deployment = rendered(render_cli)[0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    container["ports"][0]["containerPort"] = "thirty-thousand"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_image_and_router_key_options(render_cli: RenderCli, tmp_path: Path) -> None:
    """--engine-image replaces gomgr's engine image only; the router's key and TLS files come
    from their Secrets, and the router's own checks accept the command it is given."""
    documents = rendered(
        render_cli, "--engine-image", "registry.example/gomgr-engine:0.1",
        "--router-api-key-secret", "router-key", "--router-tls-secret", "router-tls",
    )
    for doc in documents:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    deployments = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Deployment"}  # type: ignore[index]
    images = {
        name: d["spec"]["template"]["spec"]["containers"][0]["image"]  # type: ignore[index]
        for name, d in deployments.items()
    }
    assert images == {
        "gomgr-smollm2": "registry.example/gomgr-engine:0.1",
        "gomgr-qwen-qwen2-5-7b-instruct": "registry.example/gomgr-engine:0.1",
        "gomgr-llama-8b": "vllm/vllm-openai:latest",
        "gomgr-router": "gomgr:latest",
    }
    pod = deployments["gomgr-router"]["spec"]["template"]["spec"]  # type: ignore[index]
    router = pod["containers"][0]
    assert router["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "router-key", "key": "api-key"}
    assert {"name": "tls", "secret": {"secretName": "router-tls"}} in pod["volumes"]
    assert router["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    # NOTE: the router listens on 0.0.0.0 in its pod: with the Secrets' files in place (here
    # stand-in files) and the key expanded, its own exposure check lets it start.
    argv = router["command"][3:]
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_text("PEM")
        argv[argv.index(f"/etc/gomgr-tls/{name}")] = str(tmp_path / name)
    argv[argv.index("$(GOMGR_ROUTER_API_KEY)")] = "sk-cluster"
    config, _ = parse_args(argv)
    assert config.host == "0.0.0.0" and config.exposure_problem() is None


def test_the_router_reads_its_configmap(render_cli: RenderCli, tmp_path: Path) -> None:
    """The ConfigMap's backends file, as the router's own loader reads `--backends FILE`."""
    config_map = next(d for d in rendered(render_cli) if d["kind"] == "ConfigMap")
    path = tmp_path / "backends.yaml"
    path.write_text(config_map["data"]["backends.yaml"])  # type: ignore[index]
    backends = load_static_backends(path)
    assert [(b.id, b.model, b.base_url, b.kind.value, b.aliases, b.pinned) for b in backends] == [
        ("gomgr-smollm2", "smollm2", "http://gomgr-smollm2:30000", "engine", ("small",), True),
        ("gomgr-qwen-qwen2-5-7b-instruct", "Qwen/Qwen2.5-7B-Instruct",
         "http://gomgr-qwen-qwen2-5-7b-instruct:30000", "engine", (), True),
        ("gomgr-llama-8b", "llama-8b", "http://gomgr-llama-8b:30000", "openai", (), True),
    ]
