"""A schema registry that keeps the rule sets of configs but drops those of versions, as a real HTTP server.

:class:`RuleDroppingProxy` forwards every request to a real registry (the embedded one, or any
Confluent-compatible URL) and removes ``ruleSet`` from the JSON answers about versions and schemas
(``/subjects/...``, ``/schemas/...``); config answers (``/config/...``: ``defaultRuleSet``,
``overrideRuleSet``) pass unchanged. Registrations with a rule set succeed, so the registry looks as if it keeps
data contracts until a version is read back: what a registry that stores config rule sets but not version rule
sets answers.

>>> with RuleDroppingProxy("http://127.0.0.1:8081") as url:  # doctest: +SKIP
...     RegistryClient(RegistryConfig(urls=(url,))).data_contracts_unsupported()
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


def _strip_rule_sets(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_rule_sets(v) for k, v in value.items() if k != "ruleSet"}
    if isinstance(value, list):
        return [_strip_rule_sets(v) for v in value]
    return value


class RuleDroppingProxy:
    """An HTTP proxy on 127.0.0.1 (a free port) in a thread, in front of ``upstream``; a context manager
    answering its URL. ``stripped`` counts the answers it removed a rule set from."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.stripped = 0
        self._client = httpx.Client(base_url=self.upstream, timeout=30.0)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                answer = proxy._client.request(self.command, self.path, content=body, headers=headers)
                content = answer.content
                if self.path.startswith(("/subjects", "/schemas")) and content:
                    try:
                        data = json.loads(content)
                    except ValueError:
                        data = None
                    if data is not None:
                        stripped = _strip_rule_sets(data)
                        if stripped != data:
                            proxy.stripped += 1
                            content = json.dumps(stripped).encode()
                self.send_response(answer.status_code)
                for name, value in answer.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PUT = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="rule-dropping-proxy", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> str:
        self._thread.start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
