"""The tutorials (docs/tutorials/), every step run as written: a storage tree, a canal-json topic and a
debezium-json topic, each from the demo's data through the job (file sink and embedded registry), ``status``,
``history`` and ``diff`` (the storage tree's step into Kafka is the tour's, run and read back by
tests/spark/test_docs_runnable.py). A file of its own, so that
the suite's two workers can run it beside the other pages (tests/spark/test_docs_runnable.py)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.support.docs_pages import PageRun, blocks, page_runner

TUTORIALS = sorted({name for name, _, _ in blocks() if name.startswith("tutorials/")})


@pytest.fixture(scope="module")
def run_page(tmp_path_factory) -> Callable[[str], PageRun]:
    return page_runner(tmp_path_factory)


def test_every_tutorial_step_is_runnable():
    # every fenced bash block of a tutorial is marked runnable (test_docs_runnable checks none is left unlisted)
    assert TUTORIALS == ["tutorials/canal-json-topic.md", "tutorials/debezium-json-topic.md",
                         "tutorials/storage-tree.md"]
    assert all(sum(1 for name, _, _ in blocks() if name == page) >= 4 for page in TUTORIALS)


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("page", TUTORIALS)
def test_a_tutorial_runs_as_written(page, run_page):
    ran = run_page(page)
    assert ran.returncode == 0, ran.failure()
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
    # what each page says its steps show: the run's status, and the ALTER's second version of shop_orders-value
    assert re.search(r"shop_orders-value", ran.stdout), ran.stdout[-3000:]
    assert "channel" in ran.stdout, ran.stdout[-3000:]  # diff 1 2 names the column the ALTER added

