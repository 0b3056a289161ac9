"""Storage URIs in TiCDC's and Hadoop's forms: parsing, refusals, Hadoop settings, local driver-side access."""

from __future__ import annotations

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.storage_fs import parse_storage_uri

S3 = "s3://cdc-bucket/tidb/prod?endpoint=http://127.0.0.1:9000&access-key=AKIA&secret-access-key=s3cr3t"


@pytest.mark.parametrize(
    ("text", "store", "hadoop"),
    [
        (S3, "s3", "s3a://cdc-bucket/tidb/prod"),
        ("s3a://cdc-bucket/tidb", "s3", "s3a://cdc-bucket/tidb"),
        ("gcs://bkt/prefix", "gcs", "gs://bkt/prefix"),
        ("gs://bkt/prefix", "gcs", "gs://bkt/prefix"),
        ("azure://container/p?account-name=acct", "azure", "abfss://container@acct.dfs.core.windows.net/p"),
        ("azblob://container/p?account-name=acct&account-key=k", "azure",
         "abfss://container@acct.dfs.core.windows.net/p"),
        ("abfss://container@acct.dfs.core.windows.net/p", "azure", "abfss://container@acct.dfs.core.windows.net/p"),
        ("hdfs://nn:8020/data/cdc", "hdfs", "hdfs://nn:8020/data/cdc"),
        ("file:///data/cdc", "file", "file:///data/cdc"),
        ("/data/cdc", "file", "file:///data/cdc"),
    ],
)
def test_store_and_hadoop_uri(text, store, hadoop):
    uri = parse_storage_uri(text)
    assert uri.store == store
    assert uri.hadoop_uri() == hadoop


def test_ticdc_s3_parameters_become_per_bucket_s3a_settings():
    uri = parse_storage_uri(S3 + "&region=eu-west-1&session-token=tok&sse=aws:kms&sse-kms-key-id=k1")
    conf = uri.hadoop_conf()
    p = "fs.s3a.bucket.cdc-bucket."
    assert conf[p + "endpoint"] == "http://127.0.0.1:9000"
    assert conf[p + "endpoint.region"] == "eu-west-1"
    assert conf[p + "access.key"] == "AKIA" and conf[p + "secret.key"] == "s3cr3t"
    assert conf[p + "session.token"] == "tok"
    assert conf[p + "aws.credentials.provider"] == "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    assert conf[p + "path.style.access"] == "true"  # TiCDC's default for a custom endpoint
    assert conf[p + "connection.ssl.enabled"] == "false"
    assert conf[p + "encryption.algorithm"] == "SSE-KMS" and conf[p + "encryption.key"] == "k1"


def test_force_path_style_follows_ticdc():
    assert parse_storage_uri("s3://b/p").hadoop_conf()["fs.s3a.bucket.b.path.style.access"] == "false"  # AWS
    explicit = parse_storage_uri("s3://b/p?force-path-style=true").hadoop_conf()
    assert explicit["fs.s3a.bucket.b.path.style.access"] == "true"
    alibaba = parse_storage_uri("s3://b/p?endpoint=https://oss.example&provider=alibaba").hadoop_conf()
    assert alibaba["fs.s3a.bucket.b.path.style.access"] == "false"


def test_names_are_normalised_as_ticdc_does_and_sink_parameters_are_ignored():
    uri = parse_storage_uri("s3://b/p?Access_Key=a&SECRET_ACCESS_KEY=s&protocol=canal-json&flush-interval=5s")
    assert uri.parameters == {"access-key": "a", "secret-access-key": "s"}


def test_credentials_never_shown():
    uri = parse_storage_uri(S3)
    assert "AKIA" not in str(uri) and "s3cr3t" not in str(uri)
    assert "***" in str(uri) and "endpoint=http://127.0.0.1:9000" in str(uri)
    assert "AKIA" not in repr(uri.filesystem())


@pytest.mark.parametrize(
    ("text", "parameter", "words"),
    [
        ("s3://b/p?acess-key=q&secret-access-key=y", "acess-key", "did you mean 'access-key'"),
        ("s3://b/p?access-key=x", "secret-access-key", "gives access-key but not secret-access-key"),
        ("s3://b/p?secret-access-key=x", "access-key", "gives secret-access-key but not access-key"),
        ("s3://b/p?endpoint=127.0.0.1:9000", "endpoint", "scheme not found in endpoint"),
        ("s3://b/p?force-path-style=maybe", "force-path-style", "expected true or false"),
        ("s3:///p", "bucket", "specify the bucket"),
        ("azure://c/p", "account-name", "account-name"),
        ("file:///x?region=us", "region", "takes no parameters"),
    ],
)
def test_bad_uris_are_refused_by_parameter(text, parameter, words, monkeypatch):
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT", raising=False)
    with pytest.raises(ConfigError) as err:
        parse_storage_uri(text, option="source")
    assert err.value.context.get("parameter") == parameter
    assert words in str(err.value)
    assert "--source" in str(err.value)
    assert "=x" not in str(err.value).replace("maybe", "")  # credentials are never echoed


def test_errors_do_not_echo_credentials():
    with pytest.raises(ConfigError) as err:
        parse_storage_uri("s3://b/p?access-key=AKIAXYZ&regoin=x")
    assert "AKIAXYZ" not in str(err.value) and "did you mean 'region'" in str(err.value)


def test_unknown_scheme_lists_the_valid_ones():
    with pytest.raises(ConfigError, match=r"valid schemes: .*s3.*"):
        parse_storage_uri("ftp://host/x")


def test_relative_paths_of_spark_listings():
    assert parse_storage_uri(S3).relative("s3a://cdc-bucket/tidb/prod/shop/t/1/CDC000001.csv") == "shop/t/1/CDC000001.csv"
    assert parse_storage_uri("/data/in").relative("file:/data/in/shop/t/meta/schema_1_0000000001.json") == (
        "shop/t/meta/schema_1_0000000001.json")
    with pytest.raises(ConfigError):
        parse_storage_uri("/data/in").relative("file:/elsewhere/x")


def test_local_store_lists_reads_and_writes_atomically(tmp_path):
    store = parse_storage_uri(str(tmp_path / "ck")).filesystem()
    store.make_dirs()
    store.write_text("dead-letter/batch-1.jsonl", "one\n")
    store.write_text("dead-letter/batch-1.jsonl", "two\n")  # replaced whole
    store.write_text("job.json", "{}")
    assert store.read_text("dead-letter/batch-1.jsonl") == "two\n"
    assert store.list_files() == ["dead-letter/batch-1.jsonl", "job.json"]  # no temporary files left
    assert store.exists("job.json") and not store.exists("nope.json")
    with pytest.raises(FileNotFoundError):
        store.read_bytes("nope.json")
    store.delete("job.json")
    store.delete("job.json")
    assert store.list_files() == ["dead-letter/batch-1.jsonl"]
