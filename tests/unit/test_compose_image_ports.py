"""compose/: the image has what the fast paths need (a JDK with javac, a C compiler, and setup.py in the build
context so pip builds the debezium-json scanner), and every host port moves with an environment variable whose
default is the port it had, documented in compose/README.md. No Docker engine here: the Dockerfile's packages are
checked against this machine's Debian (the image's bookworm) where dpkg knows them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "compose"
PORT = re.compile(r"^127\.0\.0\.1:\$\{([A-Z_]+):-(\d+)\}:(\d+)$")
DEFAULTS = {"KAFKA_PORT": 19092, "REGISTRY_PORT": 18081, "METRICS_PORT": 9464, "SPARK_UI_PORT": 4040,
            "PROMETHEUS_PORT": 9090, "GRAFANA_PORT": 3000}


def _expand(text: str, env: dict[str, str]) -> str:
    """Compose's ``${NAME:-default}`` (the form the file uses for ports)."""
    return re.sub(r"\$\{([A-Z_]+):-([^}]*)\}", lambda m: env.get(m.group(1)) or m.group(2), text)


def _published(env: dict[str, str]) -> dict[str, list[str]]:
    services = yaml.safe_load(_expand((COMPOSE / "docker-compose.yml").read_text(), env))["services"]
    return {name: service.get("ports", []) for name, service in services.items()}


def test_every_host_port_is_a_variable_with_its_old_default():
    raw = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())["services"]
    seen = {}
    for name, service in raw.items():
        for port in service.get("ports", []):
            found = PORT.match(port)
            assert found, (name, port)
            seen[found.group(1)] = int(found.group(2))
    assert seen == DEFAULTS
    assert _published({})["schema-registry"] == ["127.0.0.1:18081:8081"]
    moved = _published({"REGISTRY_PORT": "28081", "KAFKA_PORT": "29092"})
    assert moved["schema-registry"] == ["127.0.0.1:28081:8081"] and moved["kafka"] == ["127.0.0.1:29092:19092"]
    kafka = yaml.safe_load(_expand((COMPOSE / "docker-compose.yml").read_text(), {"KAFKA_PORT": "29092"}))
    # the broker tells host clients the address they can reach
    assert "HOST://127.0.0.1:29092" in kafka["services"]["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]


def test_the_readme_documents_each_port_variable():
    readme = (COMPOSE / "README.md").read_text()
    for name, default in DEFAULTS.items():
        assert re.search(rf"\| `{name}` \| `{default}` \|", readme), name


def test_the_job_service_turns_the_spark_ui_on_where_its_port_is_published():
    job = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())["services"]["job"]
    assert job["environment"]["AVRO_SINK_SPARK_UI_PORT"] == "4040"
    assert job["environment"]["SPARK_LOCAL_IP"] == "0.0.0.0"  # the UI answers outside the container
    assert any(p.endswith(":4040") for p in job["ports"])


def _dockerfile_packages() -> list[str]:
    text = (COMPOSE / "Dockerfile").read_text().replace("\\\n", " ")
    install = re.search(r"apt-get install -y --no-install-recommends ([^&]+)", text)
    assert install is not None
    return install.group(1).split()


def test_the_image_installs_a_jdk_and_a_c_compiler_and_builds_the_scanner():
    packages = _dockerfile_packages()
    assert "openjdk-17-jdk-headless" in packages and "gcc" in packages and "libc6-dev" in packages
    text = (COMPOSE / "Dockerfile").read_text()
    copied = [w for line in text.splitlines() if line.startswith("COPY ") for w in line.split()[1:-1]]
    assert "setup.py" in copied  # ext_modules: without it pip installs no scanner
    allowed = (COMPOSE / "Dockerfile.dockerignore").read_text().splitlines()
    for path in copied:
        assert f"!{path}" in allowed or f"!{path}/" in allowed, path  # in the build context
    assert "native_scan.engine() == native_scan.BUILT" in text  # the build fails without the built scanner


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="no dpkg: not a Debian machine")
def test_the_packages_provide_javac_and_cc_on_debian():
    provided: dict[str, str] = {}
    for package in _dockerfile_packages():
        listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True)
        if listed.returncode != 0:
            pytest.skip(f"{package} is not installed here; dpkg cannot list its files")
        provided[package] = listed.stdout
    assert re.search(r"/bin/javac$", provided["openjdk-17-jdk-headless"], re.M)
    assert re.search(r"^/usr/bin/(x86_64-linux-gnu-)?gcc(-\d+)?$", provided["gcc"], re.M) or \
        "/usr/bin/gcc" in provided["gcc"]
