"""Spark's web UI with AVRO_SINK_SPARK_UI_PORT: a session started as the CLI and the notebook start theirs
(``local_session``) says the UI's URL on stderr (a JSON line off a terminal) and the UI answers there while the
session runs. A JVM of its own, in a subprocess: the suite's session keeps the UI off."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark]

SCRIPT = """
import urllib.request
from avro_registry_sink.spark.runtime.session import local_session

spark = local_session(master="local[1]")
assert spark.range(10).count() == 10
with urllib.request.urlopen(spark.sparkContext.uiWebUrl + "/jobs/", timeout=30) as page:
    print(page.status, "Spark Jobs" in page.read().decode())
spark.stop()
"""


def test_the_ui_is_on_where_the_variable_says_and_its_url_is_printed():
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVRO_SINK_")}
    env.update(AVRO_SINK_SPARK_UI_PORT="0", PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               NO_PROXY="*", no_proxy="*")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["200", "True"], done.stdout
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    [ui] = [e for e in events if e.get("event") == "spark-ui"]
    assert ui["url"].startswith("http://") and not ui["url"].endswith(":4040")  # port 0: a free port
