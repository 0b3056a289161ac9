"""The checkpoint's last committed batch, which a restarted run's backlog metrics count from (issue 35)."""

from __future__ import annotations

from avro_registry_sink.spark.driver.checkpoint_files import last_committed_batch
from avro_registry_sink.storage_fs import StoreFS, parse_storage_uri


def test_the_last_committed_batch_is_the_newest_of_spark_commits(tmp_path):
    store = StoreFS(parse_storage_uri(str(tmp_path), option="checkpoint"), option="checkpoint")
    assert last_committed_batch(store) is None  # a new checkpoint
    for name in ("spark/offsets/0", "spark/offsets/1", "spark/offsets/12", "spark/commits/0", "spark/commits/1",
                 "spark/commits/.1.crc", "spark/commits/.12.tmp"):
        store.write_text(name, "v1\n{}\n")
    assert last_committed_batch(store) == 1  # batch 12 planned, not committed; checksum and temporary files ignored
    store.write_text("spark/commits/12", "v1\n{}\n")
    assert last_committed_batch(store) == 12  # numbers, not names: 12 after 1
