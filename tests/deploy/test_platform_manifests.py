"""platform/ holds deployment files that no CI machine can run (no cluster, no container engine), so
they are read here as a cluster and Docker Compose would read them, offline.

Every Kubernetes manifest is validated against the API's own JSON schemas (kubernetes-validate,
which bundles them) for the oldest Kubernetes the manifests support and the newest the validator
knows, strictly: a misspelt or misplaced field is refused, as ``kubectl apply`` would refuse it.
The kustomization is built in Python (it uses only ``namespace``, ``resources`` and ``images``, and a
test keeps it that way; where ``kubectl`` is installed, the build is compared with its own). The
compose file is validated against the Compose Specification schema that check-jsonschema vendors.

Then what platform/README.md promises of them: the secrets come only from the Secret, every variable
set is a setting Gatehouse reads, the probes and the ServiceMonitor reach URLs Gatehouse serves with
the Host and bearer they will really send, the Ingress is configured like every other nginx in front
of Gatehouse (platform/nginx/gatehouse-proxy.conf), migrations run once and before the servers, and
the pods run as the image's non-root user on a read-only root filesystem.
"""

from __future__ import annotations

import copy
import functools
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured
from django.core.management import get_commands, load_command_class
from django.http.request import validate_host
from django.urls import resolve

from config.health import health, health_ready
from config.security import secret_key_validate
from core.env import env_fernet_key
from core.metrics import metrics_view

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = ROOT / "platform"
KUBERNETES = PLATFORM / "kubernetes"
SERVICEMONITOR_COMPONENT = KUBERNETES / "components" / "servicemonitor"
SECRET_TEMPLATE = KUBERNETES / "secret.example.yaml"
COMPOSE = PLATFORM / "compose.yaml"
SHARED_PROXY_CONF = PLATFORM / "nginx" / "gatehouse-proxy.conf"

# 1.30 is the first release whose kubelet runs a preStop `sleep` action by default (the web pods'
# drain); the newest is what the validator bundles, so a field removed since then fails too.
KUBERNETES_VERSIONS = ("1.30", "1.37")
# The fields of a kustomization that kustomize_build below implements.
KUSTOMIZE_FIELDS = {"apiVersion", "kind", "namespace", "resources", "images"}
# Not in the kustomization on purpose (platform/README.md): the Secret is made with kubectl.
NOT_APPLIED = {SECRET_TEMPLATE.name}

# Settings whose value is a secret: only the Secret holds them, the pods read them as NAME_FILE.
SECRET_SETTINGS = {"SECRET_KEY", "DATA_SOURCE_ENCRYPTION_KEY", "METRICS_TOKEN", "DATABASE_URL", "REDIS_URL"}
# Variables a manifest sets for Kubernetes' own use, not read by Gatehouse.
KUBERNETES_ONLY_VARIABLES = {"POD_IP"}
SAMPLE_POD_IP = "10.42.3.17"

# Each directive of gatehouse-proxy.conf, and the ingress-nginx annotation that sets the same.
PROXY_DIRECTIVE_ANNOTATIONS = {
    "proxy_http_version": "nginx.ingress.kubernetes.io/proxy-http-version",
    "proxy_buffering": "nginx.ingress.kubernetes.io/proxy-buffering",
    "proxy_request_buffering": "nginx.ingress.kubernetes.io/proxy-request-buffering",
    "proxy_read_timeout": "nginx.ingress.kubernetes.io/proxy-read-timeout",
    "proxy_send_timeout": "nginx.ingress.kubernetes.io/proxy-send-timeout",
    "proxy_next_upstream": "nginx.ingress.kubernetes.io/proxy-next-upstream",
    "proxy_next_upstream_tries": "nginx.ingress.kubernetes.io/proxy-next-upstream-tries",
    "client_max_body_size": "nginx.ingress.kubernetes.io/proxy-body-size",
}
# Directives ingress-nginx applies by itself: keep-alive to the pods (Connection ""), Host,
# X-Forwarded-For (the client's address, one hop) and no cache.
PROXY_DIRECTIVES_INGRESS_NGINX_HAS = {"proxy_set_header", "proxy_cache"}
_NGINX_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def _kustomization(directory: Path) -> dict[str, Any]:
    return yaml.safe_load((directory / "kustomization.yaml").read_text())


def _image_name(image: str) -> str:
    return re.split(r"[:@]", image, maxsplit=1)[0]


def _containers(node: Any) -> Iterator[dict[str, Any]]:
    """Every container and init container anywhere in a resource, as kustomize's image transformer
    finds them."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in {"containers", "initContainers"} and isinstance(value, list):
                yield from value
            else:
                yield from _containers(value)
    elif isinstance(node, list):
        for item in node:
            yield from _containers(item)


def kustomize_build(directory: Path) -> list[dict[str, Any]]:
    """``kustomize build`` of a kustomization that uses only KUSTOMIZE_FIELDS."""
    kustomization = _kustomization(directory)
    built = [
        copy.deepcopy(document)
        for name in kustomization["resources"]
        for document in _documents(directory / name)
    ]
    for resource in built:
        if "namespace" in kustomization:
            resource["metadata"]["namespace"] = kustomization["namespace"]
        for container in _containers(resource):
            for image in kustomization.get("images", []):
                if _image_name(container["image"]) == image["name"]:
                    container["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    return built


@functools.cache
def _built() -> list[dict[str, Any]]:
    """The base's build, read once; a test that changes a resource changes a copy."""
    return kustomize_build(KUBERNETES)


def _one(kind: str, name: str) -> dict[str, Any]:
    [found] = [r for r in _built() if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


def _pod_spec(resource: dict[str, Any]) -> dict[str, Any] | None:
    if resource["kind"] in {"Deployment", "Job"}:
        return resource["spec"]["template"]["spec"]
    if resource["kind"] == "CronJob":
        return resource["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return None


# Every workload that runs a pod: the checks that loop over pods check these four, no fewer.
POD_OWNERS = {
    "Job/gatehouse-migrate",
    "Deployment/gatehouse-web",
    "Deployment/gatehouse-worker",
    "CronJob/gatehouse-purge",
}


def _pod_specs() -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for resource in _built():
        spec = _pod_spec(resource)
        if spec is not None:
            specs.append((f"{resource['kind']}/{resource['metadata']['name']}", spec))
    assert {label for label, _ in specs} == POD_OWNERS
    return specs


def _all_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def _config() -> dict[str, str]:
    return _one("ConfigMap", "gatehouse-config")["data"]


def _web_container() -> dict[str, Any]:
    [container] = _one("Deployment", "gatehouse-web")["spec"]["template"]["spec"]["containers"]
    return container


def _documented_settings() -> set[str]:
    """The variables of docs/settings.md's tables (tests/project/test_docs_settings.py keeps them equal to
    what Gatehouse reads)."""
    names = set()
    for row in re.finditer(r"^\|(?P<first>[^|]*)\|", (ROOT / "docs" / "settings.md").read_text(), re.M):
        names |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", row["first"]))
    return names


def _is_setting(name: str, documented: set[str]) -> bool:
    # Every setting may be given as NAME_FILE (core.env reads both forms).
    return name in documented or (name.endswith("_FILE") and name.removesuffix("_FILE") in documented)


def _kubelet_expand(value: str, environment: dict[str, str]) -> str:
    """The kubelet's ``$(NAME)`` expansion of an env value (unknown names are left as written)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: environment.get(m[1], m[0]), value)


def _web_environment() -> dict[str, str]:
    """The web container's environment as the kubelet builds it: envFrom first, then env in order."""
    environment = dict(_config())
    for variable in _web_container()["env"]:
        if "value" in variable:
            environment[variable["name"]] = _kubelet_expand(variable["value"], environment)
        elif variable["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}:
            environment[variable["name"]] = SAMPLE_POD_IP
    return environment


def _kubernetes_resources() -> list[tuple[str, dict[str, Any]]]:
    """Every resource the API server would validate: the built set and the Secret template."""
    return [
        *((f"{r['kind']}/{r['metadata']['name']}", r) for r in _built()),
        *((f"{SECRET_TEMPLATE.name}", r) for r in _documents(SECRET_TEMPLATE)),
    ]


# Kubernetes: the schemas


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(
    ("label", "resource"), _kubernetes_resources(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_manifest_is_valid_for_the_supported_kubernetes_versions(label, resource, version):
    kubernetes_validate.validate(resource, version, strict=True)


def test_the_validator_refuses_an_unknown_field_and_a_wrong_type():
    deployment = _one("Deployment", "gatehouse-web")
    misspelt = copy.deepcopy(deployment)
    misspelt["spec"]["template"]["spec"]["containers"][0]["imagePulPolicy"] = "Always"
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "seventy-five"

    with pytest.raises(kubernetes_validate.ValidationError, match="imagePulPolicy"):
        kubernetes_validate.validate(misspelt, KUBERNETES_VERSIONS[0], strict=True)
    with pytest.raises(kubernetes_validate.ValidationError, match="seventy-five"):
        kubernetes_validate.validate(wrong_type, KUBERNETES_VERSIONS[0], strict=True)


# Kubernetes: the kustomization


def test_the_kustomization_lists_every_manifest_but_the_secret_template():
    kustomization = _kustomization(KUBERNETES)
    on_disk = {path.name for path in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}

    assert set(kustomization["resources"]) == on_disk - NOT_APPLIED
    assert not NOT_APPLIED & set(kustomization["resources"])
    component = _kustomization(SERVICEMONITOR_COMPONENT)
    assert component["kind"] == "Component"
    assert set(component["resources"]) == {p.name for p in SERVICEMONITOR_COMPONENT.glob("*.yaml")} - {
        "kustomization.yaml"
    }


def test_the_kustomization_uses_only_what_the_python_build_implements():
    assert set(_kustomization(KUBERNETES)) <= KUSTOMIZE_FIELDS


def test_the_build_has_the_expected_resources_in_one_namespace():
    built = _built()
    [image] = _kustomization(KUBERNETES)["images"]

    assert sorted((r["kind"], r["metadata"]["name"]) for r in built) == sorted(
        [
            ("ConfigMap", "gatehouse-config"),
            ("Job", "gatehouse-migrate"),
            ("Deployment", "gatehouse-web"),
            ("Service", "gatehouse-web"),
            ("Ingress", "gatehouse"),
            ("HorizontalPodAutoscaler", "gatehouse-web"),
            ("PodDisruptionBudget", "gatehouse-web"),
            ("Deployment", "gatehouse-worker"),
            ("CronJob", "gatehouse-purge"),
        ]
    )
    assert {r["metadata"]["namespace"] for r in built} == {"gatehouse"}
    images = {container["image"] for resource in built for container in _containers(resource)}
    assert images == {f"{image['newName']}:{image['newTag']}"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its kustomize) is not installed")
def test_the_python_build_is_what_kubectl_kustomize_builds():
    output = subprocess.run(
        ["kubectl", "kustomize", str(KUBERNETES)], capture_output=True, text=True, check=True, timeout=60
    ).stdout

    def key(resource: dict[str, Any]) -> str:
        return f"{resource['kind']}/{resource['metadata']['name']}"

    theirs = {key(r): r for r in yaml.safe_load_all(output) if r}
    ours = {key(r): r for r in _built()}
    assert ours == theirs


# Kubernetes: secrets and settings


def test_the_secret_settings_are_given_only_by_the_secret():
    [template] = _documents(SECRET_TEMPLATE)
    config = _config()
    mount = {Path(config[f"{name}_FILE"]).parent for name in SECRET_SETTINGS}

    assert set(template["stringData"]) == SECRET_SETTINGS
    assert not SECRET_SETTINGS & set(config)
    assert mount == {Path("/run/secrets/gatehouse")}
    for name in SECRET_SETTINGS:
        assert Path(config[f"{name}_FILE"]).name == name
    for label, spec in _pod_specs():
        volumes = {v["name"]: v for v in spec["volumes"]}
        for container in _all_containers(spec):
            assert not SECRET_SETTINGS & {v["name"] for v in container.get("env", [])}, label
            [secret_mount] = [m for m in container["volumeMounts"] if Path(m["mountPath"]) in mount]
            assert volumes[secret_mount["name"]]["secret"]["secretName"] == template["metadata"]["name"], (
                label
            )
            assert secret_mount["readOnly"] is True
    # No secret's placeholder, nor any other value of the Secret, is written anywhere else.
    text = "\n".join(p.read_text() for p in KUBERNETES.rglob("*.yaml") if p != SECRET_TEMPLATE)
    assert not [value for value in template["stringData"].values() if value in text]


def test_the_secret_templates_placeholders_stop_gatehouse_at_start(monkeypatch):
    [template] = _documents(SECRET_TEMPLATE)
    values = template["stringData"]

    with pytest.raises(ImproperlyConfigured):
        secret_key_validate(key=values["SECRET_KEY"])
    monkeypatch.setenv("DATA_SOURCE_ENCRYPTION_KEY", values["DATA_SOURCE_ENCRYPTION_KEY"])
    with pytest.raises(ImproperlyConfigured):
        env_fernet_key("DATA_SOURCE_ENCRYPTION_KEY")


def test_every_variable_the_manifests_set_is_a_gatehouse_setting():
    documented = _documented_settings()
    assert {"PUBLIC_URL", "REDIS_URL", "TRUSTED_PROXY_COUNT"} <= documented
    names = set(_config())
    for _, spec in _pod_specs():
        for container in _all_containers(spec):
            names |= {v["name"] for v in container.get("env", [])}

    unknown = {n for n in names - KUBERNETES_ONLY_VARIABLES if not _is_setting(n, documented)}

    assert not unknown, f"not settings Gatehouse reads (docs/settings.md): {sorted(unknown)}"


def test_every_pod_reads_the_configmap_and_writes_only_to_its_own_volumes():
    config = _config()
    writable = {"/tmp", config["AUDIT_SPOOL_DIR"]}  # noqa: S108 (paths inside the pod)
    for label, spec in _pod_specs():
        empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
        for container in _all_containers(spec):
            assert container["envFrom"] == [{"configMapRef": {"name": "gatehouse-config"}}], label
            mounted = {m["mountPath"] for m in container["volumeMounts"] if m["name"] in empty_dirs}
            assert writable <= mounted, label


def test_the_pods_run_as_the_images_user_on_a_read_only_root():
    [user] = re.findall(r"^USER (\d+):(\d+)$", (PLATFORM / "Containerfile").read_text(), re.M)
    for label, spec in _pod_specs():
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True, label
        assert (str(context["runAsUser"]), str(context["runAsGroup"])) == user, label
        assert spec["automountServiceAccountToken"] is False, label
        for container in _all_containers(spec):
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            }, label
            assert {"requests", "limits"} <= set(container["resources"]), label


def test_the_web_metrics_are_kept_per_pod_in_an_emptydir():
    spec = _one("Deployment", "gatehouse-web")["spec"]["template"]["spec"]
    directory = _web_environment()["PROMETHEUS_MULTIPROC_DIR"]
    [mount] = [m for m in _web_container()["volumeMounts"] if m["mountPath"] == directory]

    assert "emptyDir" in {v["name"]: v for v in spec["volumes"]}[mount["name"]]
    assert "PROMETHEUS_MULTIPROC_DIR" not in _config()


# Kubernetes: what the pods run


def _manage_py_commands() -> list[tuple[str, list[str]]]:
    found = []
    for label, spec in _pod_specs():
        for container in _all_containers(spec):
            command = container["command"]
            if command[:2] == ["python", "manage.py"]:
                found.append((f"{label}/{container['name']}", command[2:]))
    return found


@pytest.mark.parametrize(
    ("label", "arguments"), _manage_py_commands(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_command_is_a_management_command_with_those_options(label, arguments):
    name, *options = arguments
    app = get_commands()[name]
    parser = load_command_class(app, name).create_parser("manage.py", name)

    parser.parse_args(options)


def test_the_commands_are_the_servers_the_worker_and_the_migration():
    commands = dict(_manage_py_commands())
    web = _web_container()["command"]

    assert web[0] == "daphne"
    assert web[-1] == "config.asgi:application"
    assert "--proxy-headers" not in web
    assert commands["Deployment/gatehouse-worker/worker"][0] == "jobs_worker"
    assert commands["Job/gatehouse-migrate/migrate"] == ["migrate", "--noinput"]
    assert commands["CronJob/gatehouse-purge/purge"] == ["purge"]


def test_migrations_run_in_the_job_once_and_the_servers_wait_for_them():
    job = _one("Job", "gatehouse-migrate")
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert "parallelism" not in job["spec"] or job["spec"]["parallelism"] == 1
    for name in ("gatehouse-web", "gatehouse-worker"):
        spec = _one("Deployment", name)["spec"]["template"]["spec"]
        [wait] = spec["initContainers"]
        assert wait["command"] == ["python", "manage.py", "migrate", "--check", "--noinput"]
        assert not [c for c in spec["containers"] if "migrate" in c["command"]], name


# Kubernetes: probes, Service, metrics


@pytest.mark.django_db
def test_the_probes_reach_the_health_views_with_the_host_the_kubelet_sends(client, settings):
    container = _web_container()
    [port] = container["ports"]
    settings.ALLOWED_HOSTS = _web_environment()["ALLOWED_HOSTS"].split(",")
    expected = {"startupProbe": health, "livenessProbe": health, "readinessProbe": health_ready}

    for probe, view in expected.items():
        get = container[probe]["httpGet"]
        assert get["port"] == port["name"]
        assert resolve(get["path"]).func is view, probe
        response = client.get(get["path"], HTTP_HOST=f"{SAMPLE_POD_IP}:{port['containerPort']}")
        assert response.status_code == 200, (probe, response.content[:200])


def test_the_web_pods_allow_their_own_address_and_the_public_host():
    allowed = _web_environment()["ALLOWED_HOSTS"].split(",")
    public_host = re.sub(r"^https?://([^/:]+).*$", r"\1", _config()["PUBLIC_URL"])

    assert validate_host(SAMPLE_POD_IP, allowed)
    assert validate_host(public_host, allowed)
    assert not validate_host("evil.example.net", allowed)


def test_the_service_and_the_servicemonitor_find_the_web_pods():
    service = _one("Service", "gatehouse-web")
    pod_labels = _one("Deployment", "gatehouse-web")["spec"]["template"]["metadata"]["labels"]
    [port] = service["spec"]["ports"]
    [monitor] = [
        d
        for name in _kustomization(SERVICEMONITOR_COMPONENT)["resources"]
        for d in _documents(SERVICEMONITOR_COMPONENT / name)
    ]
    [endpoint] = monitor["spec"]["endpoints"]

    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert port["targetPort"] == _web_container()["ports"][0]["name"]
    assert monitor["kind"] == "ServiceMonitor"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert endpoint["port"] == port["name"]
    assert resolve(endpoint["path"]).func is metrics_view


@pytest.mark.django_db
def test_the_servicemonitor_sends_the_bearer_that_opens_metrics(client, settings):
    [monitor] = _documents(SERVICEMONITOR_COMPONENT / "servicemonitor.yaml")
    [endpoint] = monitor["spec"]["endpoints"]
    [template] = _documents(SECRET_TEMPLATE)
    credentials = endpoint["authorization"]["credentials"]
    assert endpoint["authorization"]["type"] == "Bearer"
    assert credentials == {"name": template["metadata"]["name"], "key": "METRICS_TOKEN"}

    # A scrape as Prometheus makes it: from another pod, naming this one by its address.
    token = "a-metrics-token-for-this-test"
    settings.ALLOWED_HOSTS = _web_environment()["ALLOWED_HOSTS"].split(",")
    settings.GATEHOUSE = {**settings.GATEHOUSE, "METRICS_TOKEN": token, "TRUSTED_PROXY_COUNT": 1}
    scrape = {"REMOTE_ADDR": "10.42.9.9", "HTTP_HOST": f"{SAMPLE_POD_IP}:8000"}
    assert client.get(endpoint["path"], **scrape).status_code == 403
    assert client.get(endpoint["path"], **scrape, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200


# Kubernetes: shutting down, scaling, the Ingress


def test_the_web_pods_drain_before_sigterm_within_their_grace():
    spec = _one("Deployment", "gatehouse-web")["spec"]["template"]["spec"]
    drain = _web_container()["lifecycle"]["preStop"]["sleep"]["seconds"]

    # Long enough for ingress-nginx to drop the pod and for ordinary calls to finish, and room
    # after it for Daphne to exit before SIGKILL.
    assert drain >= 30
    assert spec["terminationGracePeriodSeconds"] >= drain + 10


def test_the_worker_may_finish_a_question_before_it_is_killed(settings):
    spec = _one("Deployment", "gatehouse-worker")["spec"]["template"]["spec"]

    assert spec["terminationGracePeriodSeconds"] > settings.GATEHOUSE["DATA_AGENT_QUESTION_TIMEOUT_SECONDS"]


def test_the_autoscaler_owns_the_web_replicas_and_disruptions_take_one_at_a_time():
    deployment = _one("Deployment", "gatehouse-web")
    hpa = _one("HorizontalPodAutoscaler", "gatehouse-web")
    pdb = _one("PodDisruptionBudget", "gatehouse-web")

    assert "replicas" not in deployment["spec"]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "gatehouse-web",
    }
    assert 1 < hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
    assert pdb["spec"]["maxUnavailable"] == 1


def _proxy_directives() -> dict[str, str]:
    directives: dict[str, str] = {}
    for line in SHARED_PROXY_CONF.read_text().splitlines():
        statement = line.split("#", 1)[0].strip()
        if statement:
            name, _, value = statement.rstrip(";").partition(" ")
            directives.setdefault(name, value.strip())
    return directives


def _annotation_value(directive: str, value: str) -> str:
    if directive in {"proxy_read_timeout", "proxy_send_timeout"}:
        number, unit = re.fullmatch(r"(\d+)([smhd]?)", value).groups()  # type: ignore[union-attr]
        return str(int(number) * _NGINX_SECONDS[unit or "s"])
    return value


def test_the_ingress_proxies_as_the_shared_nginx_settings_do():
    directives = _proxy_directives()
    annotations = _one("Ingress", "gatehouse")["metadata"]["annotations"]
    assert {"proxy_buffering", "proxy_read_timeout"} <= directives.keys()

    # A directive added to gatehouse-proxy.conf must be carried over here, or said to be built in.
    assert directives.keys() <= PROXY_DIRECTIVE_ANNOTATIONS.keys() | PROXY_DIRECTIVES_INGRESS_NGINX_HAS
    for directive, annotation in PROXY_DIRECTIVE_ANNOTATIONS.items():
        assert annotations[annotation] == _annotation_value(directive, directives[directive]), directive


def test_the_ingress_serves_the_public_host_through_the_web_service():
    ingress = _one("Ingress", "gatehouse")
    public_host = re.sub(r"^https?://([^/:]+).*$", r"\1", _config()["PUBLIC_URL"])
    [rule] = ingress["spec"]["rules"]
    [path] = rule["http"]["paths"]

    assert rule["host"] == public_host
    assert [public_host] == ingress["spec"]["tls"][0]["hosts"]
    assert (path["path"], path["pathType"]) == ("/", "Prefix")
    assert path["backend"]["service"] == {"name": "gatehouse-web", "port": {"name": "http"}}
