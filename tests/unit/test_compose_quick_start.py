"""compose/'s quick start reads data that exists (issue 22): its job no longer mounts a ``./data`` that is not
in the repository; it reads the sample tree the ``demo-data`` service writes, or ``SOURCE_DIR`` (required) with
compose/source.yml. The services' commands are run here through the CLI, in-process, up to where Spark
would start."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.sources.tree_check import find_tree

COMPOSE = Path(__file__).resolve().parents[2] / "compose"
runner = CliRunner()


def _services(name: str) -> dict:
    return yaml.safe_load((COMPOSE / name).read_text())["services"]


def test_no_service_mounts_a_directory_missing_from_the_repository():
    for name in ("docker-compose.yml", "source.yml"):
        for service in _services(name).values():
            for volume in service.get("volumes", []):
                if volume.startswith("./"):  # a file of compose/ itself (Prometheus's and Grafana's settings)
                    assert (COMPOSE / volume.split(":")[0]).exists(), (name, volume)
                    continue
                assert volume.startswith(("state:", "${SOURCE_DIR:?")), (name, volume)


def test_the_default_job_reads_the_tree_demo_data_writes(tmp_path, monkeypatch):
    services = _services("docker-compose.yml")
    demo = services["demo-data"]["command"]
    job = services["job"]["command"]
    assert services["job"]["depends_on"]["demo-data"] == {"condition": "service_completed_successfully"}
    state = tmp_path / "state"

    def here(arg: str) -> str:
        return arg.replace("/state", str(state))

    written = runner.invoke(app, [here(a) for a in demo])
    assert written.exit_code == 0, written.output
    source = Path(here(job[job.index("--source") + 1]))
    assert find_tree(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file()).kind == "tree"

    started = []

    def session(*args, **kwargs):
        started.append(True)
        raise RuntimeError("every check passed: Spark would start here")

    monkeypatch.setattr("avro_registry_sink.spark.driver.job.job_session", session)
    args = [here(a) for a in job]
    args[args.index("--sink-uri") + 1] = f"file://{tmp_path / 'out'}"  # no Kafka here; the rest as compose runs it
    result = runner.invoke(app, [*args, "--state-dir", str(tmp_path / "job-state")])
    assert started, result.output


def test_your_own_tree_needs_source_dir():
    job = _services("source.yml")["job"]
    [volume] = job["volumes"]
    assert volume.startswith("${SOURCE_DIR:?") and volume.endswith(":/data:ro")
    assert job["command"][:3] == ["run", "--source", "/data"]


@pytest.mark.parametrize("name", ["docker-compose.yml", "source.yml"])
def test_compose_readme_names_the_files(name):
    assert f"compose/{name}" in (COMPOSE / "README.md").read_text()
