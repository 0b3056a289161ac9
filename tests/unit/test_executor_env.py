"""The executor environment's installer (spark/runtime/package.py): uv, told where pip would have looked.

``avro-registry-sink package`` builds the environment end to end in tests/deploy/test_cluster.py (a real
standalone cluster runs the job from it); here, how pip's settings reach uv, which reads neither pip.conf nor
pip's variables."""

from __future__ import annotations

from avro_registry_sink.spark.runtime.package import executor_requirements, uv_environment


def test_pips_index_find_links_and_ca_reach_uv_under_its_names():
    env = uv_environment({"PIP_INDEX_URL": "https://mirror.example/simple",
                          "PIP_EXTRA_INDEX_URL": "https://extra.example/simple",
                          "PIP_FIND_LINKS": "/opt/wheels  /srv/more-wheels", "PIP_CERT": "/etc/ssl/corp.pem",
                          "PATH": "/usr/bin"})
    assert env["UV_INDEX_URL"] == "https://mirror.example/simple"
    assert env["UV_EXTRA_INDEX_URL"] == "https://extra.example/simple"
    assert env["UV_FIND_LINKS"] == "/opt/wheels,/srv/more-wheels"  # pip: spaces; uv: commas
    assert env["SSL_CERT_FILE"] == "/etc/ssl/corp.pem"
    assert env["PATH"] == "/usr/bin"


def test_uvs_own_settings_win_and_empty_pip_settings_are_not_copied():
    env = uv_environment({"PIP_INDEX_URL": "https://mirror.example/simple", "UV_INDEX_URL": "https://uv.example/",
                          "PIP_FIND_LINKS": " ", "SSL_CERT_FILE": "/own.pem", "PIP_CERT": "/pip.pem"})
    assert env["UV_INDEX_URL"] == "https://uv.example/"
    assert env["SSL_CERT_FILE"] == "/own.pem"
    assert "UV_FIND_LINKS" not in env


def test_the_executors_get_the_runtime_requirements_without_pyspark_the_builders_or_extras():
    names = {req.split(">")[0].split("[")[0] for req in executor_requirements()}
    assert not names & {"pyspark", "uv", "venv-pack2", "pytest", "jsonata-python"}, names
    assert {"pyarrow", "fastavro", "confluent-kafka"} <= names
