"""`run` refuses bad options with exit status 2 before starting Spark."""

from __future__ import annotations

from typer.testing import CliRunner

from avro_registry_sink.cli import app

runner = CliRunner()


def test_missing_source_directory_is_refused_before_spark(tmp_path):
    result = runner.invoke(app, ["run", "--source", str(tmp_path / "absent"), "--available-now",
                                 "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert "does not exist" in result.output and "absent" in result.output


def test_unknown_source_scheme_names_the_valid_forms(tmp_path):
    result = runner.invoke(app, ["run", "--source", "foo://x", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "canal-json+kafka://" in result.output and "debezium-json+file://" in result.output


def test_bad_encoding_option_names_the_valid_values(tmp_path):
    result = runner.invoke(app, ["run", "--source", str(tmp_path), "--avro-bigint-unsigned-handling-mode", "Long",
                                 "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert "avro-bigint-unsigned-handling-mode" in result.output and '"long" or "string"' in result.output
