"""An OTLP/HTTP trace collector on loopback, for the tests of the OpenTelemetry export."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)


class Collector:
    """An OTLP/HTTP trace receiver on loopback that keeps every span it is sent."""

    def __init__(self):
        self.spans: list = []
        spans = self.spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def attributes(span) -> dict:
    out = {}
    for item in span.attributes:
        value = item.value
        kind = value.WhichOneof("value")
        out[item.key] = list(v.string_value for v in value.array_value.values) if kind == "array_value" else getattr(value, kind)
    return out
