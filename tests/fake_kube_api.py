"""A fake Kubernetes API server for tests: answers recorded JSON by ``METHOD /path`` or ``METHOD /path|text`` (only requests whose query holds text; a file under ``fixtures``, a
dict, a bare status code, or an empty string to echo the request body) and records every request; any other path
answers 404 as the API server does."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class FakeApi:
    """Serves recorded JSON by path and records every request (method, path, query, headers, body)."""

    def __init__(self, routes: dict[str, Any], fixtures: Path | None = None) -> None:
        self.routes = routes
        self.requests: list[dict[str, Any]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                api.requests.append(
                    {"method": self.command, "path": url.path, "query": urllib.parse.parse_qs(url.query),
                     "headers": dict(self.headers), "body": body}
                )  # fmt: skip
                key = f"{self.command} {url.path}"
                # "METHOD path|text": a route for the requests whose decoded query contains text (first match wins).
                query = urllib.parse.unquote(url.query)
                key = next((k for k in api.routes if k.startswith(f"{key}|") and k.split("|", 1)[1] in query), key)
                if key not in api.routes:
                    self.send_response(404)
                    self.end_headers()
                    self.wfile.write(b'{"kind":"Status","code":404}')
                    return
                route = api.routes[key]
                if isinstance(route, int):  # a status code alone: the API's Status answer for it
                    self.send_response(route)
                    self.end_headers()
                    self.wfile.write(json.dumps({"kind": "Status", "code": route}).encode())
                    return
                if isinstance(route, str) and route and fixtures is not None:
                    data = (fixtures / route).read_bytes()
                elif isinstance(route, dict):
                    data = json.dumps(route).encode()
                else:
                    data = body
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(data)

            do_GET = _answer  # noqa: N815
            do_PATCH = _answer  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeApi:
        # serve_forever polls for shutdown every poll_interval (0.5 s by default): each test would wait that long.
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
