"""manifests/: Kubernetes objects valid against the schemas kubernetes-validate ships (offline), the deployment
facts the runbook relies on, Dockerfiles clean under hadolint, alert rules and the dashboard naming real metrics.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from lerobot_policy_remote.server.cli import parse_manifest
from lerobot_policy_remote.testing.procs import VENV_BIN

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "manifests" / "k8s"
K8S_VERSION = "1.34.0"  # a schema set the package ships (no network needed)
METRIC = re.compile(r"\blerobot_policy_server_[a-z_]+")


def k8s_docs() -> list[dict]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def find(kind: str, name: str) -> dict:
    return next(d for d in k8s_docs() if d["kind"] == kind and d["metadata"]["name"] == name)


def served_metric_names() -> set[str]:
    from lerobot_policy_remote.server.metrics import ServerMetrics

    text = ServerMetrics("manifest-test").render().decode()
    return {m.group(0) for m in METRIC.finditer(text)}


ROBOT_METRIC = re.compile(r"\blerobot_(?:robot|exporter)_[a-z_0-9]+")


def exported_robot_metric_names() -> set[str]:
    """What `lerobot-fleet exporter` serves with one robot heard."""
    from lerobot_fleet.verbs.exporter import ExporterMetrics, RobotTelemetryCollector

    from lerobot_policy_remote.wire.codec import encode
    from lerobot_policy_remote.wire.keys import ServiceKeys
    from lerobot_policy_remote.wire.messages import RobotTelemetry

    c = RobotTelemetryCollector()
    c.add(
        ServiceKeys.for_service("m", "main", "t").robot("r1", "telemetry"),
        encode(RobotTelemetry("r1", "STREAMING", action_order="checked")),
    )
    return {m.group(0) for m in ROBOT_METRIC.finditer(ExporterMetrics(c).render().decode())}


@pytest.mark.parametrize("doc", k8s_docs(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_kubernetes_schema(doc):
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_validator_rejects_a_broken_object():
    """Proves the check above can fail (and that it runs offline against the pinned schema)."""
    bad = copy.deepcopy(find("StatefulSet", "policy-server-0"))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pathh"] = "/healthz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_two_router_mesh_with_a_service_each():
    for name in ("router-a", "router-b"):
        svc, dep = find("Service", name), find("Deployment", name)
        assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[0] == "router" and "--inventory" in args and "--tls-ca" in args
    b_args = find("Deployment", "router-b")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert b_args[b_args.index("--connect") + 1].startswith("tls/router-a.")


@pytest.mark.parametrize("replica", ["policy-server-0", "policy-server-1"])
def test_policy_servers_drain_before_they_are_killed(replica):
    sts = find("StatefulSet", replica)
    pod = sts["spec"]["template"]
    c = pod["spec"]["containers"][0]
    cfg = yaml.safe_load(find("ConfigMap", "policy-server")["data"]["server.yaml"])
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert c[probe]["httpGet"]["path"] == "/healthz"
    assert pod["spec"]["terminationGracePeriodSeconds"] > cfg["drain_timeout_s"]
    live = c["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] > cfg["drain_timeout_s"], (
        "liveness would kill a draining replica"
    )
    assert cfg["health_host"] == "0.0.0.0"
    ann = pod["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and int(ann["prometheus.io/port"]) == cfg["health_port"]
    pdb = find("PodDisruptionBudget", "policy-server")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert f"--replica_id={replica}" in c["args"] and sts["spec"]["replicas"] == 1


def test_each_policy_server_pod_sees_only_its_own_key():
    """No pod mounts another replica's private key (one Secret per replica, one pod per Secret)."""
    mounted: dict[str, set[str]] = {}
    for d in k8s_docs():
        if d["kind"] == "StatefulSet" and d["metadata"]["name"].startswith("policy-server"):
            vols = d["spec"]["template"]["spec"]["volumes"]
            mounted[d["metadata"]["name"]] = {v["secret"]["secretName"] for v in vols if "secret" in v}
            assert d["spec"]["replicas"] == 1
    assert mounted == {f"policy-server-{n}": {"fleet-ca", f"policy-server-{n}-tls"} for n in (0, 1)}
    for d in k8s_docs():
        if d["kind"] == "Secret" and d["metadata"]["name"].startswith("policy-server-"):
            assert set(d["stringData"]) == {"tls.crt", "tls.key"}, "a server Secret holds one replica's key"


def test_the_fleet_image_default_is_mtls_with_the_inventory():
    text = (ROOT / "manifests" / "docker" / "Dockerfile.fleet").read_text()
    cmd = next(line for line in text.splitlines() if line.startswith("CMD"))
    assert (
        "tls/0.0.0.0:7447" in cmd
        and "--inventory" in text.split("CMD", 1)[1]
        and "tcp/0.0.0.0" not in text.split("CMD", 1)[1]
    )


def test_server_config_map_is_a_valid_server_manifest(tmp_path):
    cfg = tmp_path / "server.yaml"
    cfg.write_text(find("ConfigMap", "policy-server")["data"]["server.yaml"])
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    m = parse_manifest(
        ["--manifest", str(cfg), f"--zenoh.tls_root_ca_certificate={ca}", "--replica_id=policy-server-0"]
    )
    assert len(m.zenoh.connect_endpoints) == 2 and all(e.startswith("tls/") for e in m.zenoh.connect_endpoints)


def test_secrets_cover_every_mount():
    secrets = {d["metadata"]["name"] for d in k8s_docs() if d["kind"] == "Secret"}
    for d in k8s_docs():
        if d["kind"] in ("Deployment", "StatefulSet"):
            for v in d["spec"]["template"]["spec"]["volumes"]:
                if "secret" in v:
                    assert v["secret"]["secretName"] in secrets


@pytest.mark.parametrize(
    "dockerfile",
    [p for p in sorted((ROOT / "manifests" / "docker").glob("Dockerfile.*")) if p.suffix != ".dockerignore"],
    ids=lambda p: p.name,
)
def test_dockerfile_lint(dockerfile):
    res = subprocess.run([str(VENV_BIN / "hadolint"), str(dockerfile)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\n")
    assert subprocess.run([str(VENV_BIN / "hadolint"), str(bad)], capture_output=True, timeout=60).returncode != 0


def test_alert_rules_name_real_metrics_and_runbook_sections():
    rules = yaml.safe_load((ROOT / "manifests" / "prometheus" / "alerts.yaml").read_text())["groups"][0]["rules"]
    served = served_metric_names()
    runbook = (ROOT / "docs" / "runbook.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.+)$", runbook, re.M)}
    assert len(rules) >= 8
    for r in rules:
        assert r["alert"] and r["labels"]["severity"] in ("critical", "warning", "info")
        for name in METRIC.findall(r["expr"]):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert name in served or base in served, f"{r['alert']}: {name} is not a server metric"
        assert r["annotations"]["runbook"].split("#")[1] in anchors, r["annotations"]["runbook"]


def test_dashboard_panels_query_real_metrics():
    dash = json.loads((ROOT / "manifests" / "grafana" / "policy-server-dashboard.json").read_text())
    served = served_metric_names()
    exported = exported_robot_metric_names()
    used = set()
    for p in dash["panels"]:
        assert p["targets"], p["title"]
        for t in p["targets"]:
            for name in METRIC.findall(t["expr"]):
                used.add(name)
                assert name in served or re.sub(r"_bucket$", "", name) in served, f"{p['title']}: {name}"
            for name in ROBOT_METRIC.findall(t["expr"]):
                used.add(name)
                assert name in exported, f"{p['title']}: {name} is not served by lerobot-fleet exporter"
    for key in ("staleness_seconds", "state", "rtt_seconds", "network_seconds"):  # the robots' panels
        assert f"lerobot_robot_{key}" in used
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    for key in (
        "active_sessions",
        "server_load",
        "errors_total",
        "queue_wait_seconds_bucket",
        "inference_seconds_bucket",
    ):
        assert f"lerobot_policy_server_{key}" in used
