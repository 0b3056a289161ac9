"""Spark's web UI: off by default (DEFAULT_CONF), on with AVRO_SINK_SPARK_UI_PORT (the port, 0 for a free one),
a bad value refused naming the variable. tests/spark/test_spark_ui.py starts a session with it and reads the UI."""

from __future__ import annotations

import pytest

from avro_registry_sink.spark.runtime.session import DEFAULT_CONF, SPARK_UI_ENV, spark_ui_conf


def test_the_ui_is_off_unless_the_variable_gives_a_port(monkeypatch):
    monkeypatch.delenv(SPARK_UI_ENV, raising=False)
    assert DEFAULT_CONF["spark.ui.enabled"] == "false" and spark_ui_conf() == {}
    monkeypatch.setenv(SPARK_UI_ENV, "4040")
    assert spark_ui_conf() == {"spark.ui.enabled": "true", "spark.ui.port": "4040"}
    monkeypatch.setenv(SPARK_UI_ENV, "0")
    assert spark_ui_conf()["spark.ui.port"] == "0"


@pytest.mark.parametrize("value", ["yes", "-1", "70000", "40 40"])
def test_a_value_that_is_no_port_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv(SPARK_UI_ENV, value)
    with pytest.raises(ValueError, match=rf"AVRO_SINK_SPARK_UI_PORT='{value}' is not a port: give 0-65535"):
        spark_ui_conf()
