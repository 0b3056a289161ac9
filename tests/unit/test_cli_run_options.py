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


def test_bad_on_incompatible_value_names_the_valid_ones(tmp_path):
    result = runner.invoke(app, ["run", "--source", str(tmp_path), "--on-incompatible", "major",
                                 "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert "on-incompatible" in result.output and '"stop" or "new-major"' in result.output


def test_new_major_against_a_registry_without_data_contracts_is_refused_before_spark(tmp_path, monkeypatch):
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class NoContracts(BaseHTTPRequestHandler):  # a registry without the data-contract routes (Karapace-like)
        def do_GET(self) -> None:
            found = self.path.split("?")[0] == "/subjects"  # the registry API the pre-flight probe asks for
            body = json.dumps([] if found else {"error_code": 404, "message": "HTTP 404 Not Found"}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), NoContracts)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (tmp_path / "tree").mkdir()
        monkeypatch.setenv("AVRO_SINK_ON_INCOMPATIBLE", "new-major")  # the environment's spelling of the option
        result = runner.invoke(app, ["run", "--source", str(tmp_path / "tree"), "--available-now", "--wait-for-data",
                                     "--registry", f"http://127.0.0.1:{server.server_port}",
                                     "--state-dir", str(tmp_path / "state")])
    finally:
        server.shutdown()
    assert result.exit_code == 2, result.output
    assert "--on-incompatible new-major" in result.output and "does not keep them" in result.output
    assert "HTTP 404" in result.output
