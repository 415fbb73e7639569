#!/usr/bin/env python3
"""Talks to a running Sluice HTTP front as a real client would, with h11 (a strict HTTP/1.1
implementation nobody here wrote) parsing every response, and checks what the server answers.

    python3 Tests/HTTPClient/check_answers.py PORT [TIMEOUT]

The server must run with a 1 KiB head limit, a 100-byte body limit and a 300 ms head timeout
(the Swift test that runs this starts it so). Prints one line per check and exits 1 if any
failed (2 when h11 is missing). TIMEOUT (seconds, 30 by default) bounds each connect, read and
write: it only detects a hang, so the caller scales it as it scales its own deadlines.
"""

import email.utils
import json
import socket
import sys
import time

try:
    import h11
except ImportError:
    print("h11 is not installed (scripts/install-deps.sh installs it)")
    sys.exit(2)

PORT = int(sys.argv[1])
TIMEOUT = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)
    return condition


class Client:
    """One connection: raw bytes out, responses parsed by h11."""

    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
        self.conn = h11.Connection(h11.CLIENT)

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, method, target, headers=(), body=b""):
        headers = [("Host", "test")] + list(headers)
        if body or method in ("POST", "PUT"):
            headers.append(("Content-Length", str(len(body))))
        self.sock.sendall(self.conn.send(h11.Request(method=method, target=target, headers=headers)))
        if body:
            self.sock.sendall(self.conn.send(h11.Data(data=body)))
        self.sock.sendall(self.conn.send(h11.EndOfMessage()))

    def response(self, raw_request=False):
        """The next response: (status, headers dict, body, every header pair). For a request
        sent raw, h11 is told what was sent so that it reads the answer in step."""
        body = b""
        response = None
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                data = self.sock.recv(65536)
                self.conn.receive_data(data)
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                break
        pairs = [(k.decode().lower(), v.decode()) for k, v in response.headers]
        return response.status_code, dict(pairs), body, pairs

    def next_cycle(self):
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()

    def closed(self):
        """Whether the server closes the connection (read within TIMEOUT; every caller expects it
        closed, so the wait is only for a slow server)."""
        self.sock.settimeout(TIMEOUT)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, socket.timeout):
            return False


def raw_client(request_bytes, method=b"GET"):
    """A connection that sent `request_bytes` itself; h11 reads the answer as the answer to a
    request of `method`."""
    client = Client()
    client.sock.sendall(request_bytes)
    # Tell h11 a request went out, without sending its bytes.
    client.conn.send(h11.Request(method=method, target="/", headers=[("Host", "test"), ("Content-Length", "0")]))
    client.conn.send(h11.EndOfMessage())
    return client


def has_date(headers):
    value = headers.get("date")
    if value is None:
        return False
    parsed = email.utils.parsedate_to_datetime(value)
    return parsed is not None and value.endswith(" GMT") and abs(time.time() - parsed.timestamp()) < 120


def problem(status, headers, body, slug):
    if headers.get("content-type") != "application/problem+json":
        return False
    document = json.loads(body)
    return (document.get("status") == status and document.get("type") == f"urn:sluice:problem:{slug}"
            and isinstance(document.get("title"), str) and isinstance(document.get("detail"), str))


# --- Answers that keep the connection -------------------------------------------------------
c = Client()
c.send("GET", "/healthz")
status, headers, body, _ = c.response()
check(status == 200 and json.loads(body) == {"status": "ok"}, "GET /healthz: 200 {\"status\":\"ok\"}")
check(has_date(headers), "a 200 carries a Date in IMF-fixdate within a minute of now")
check(headers.get("content-type") == "application/json", "GET /healthz: Content-Type application/json")
c.next_cycle()

c.send("HEAD", "/healthz")
status, headers, body, _ = c.response()
check(status == 200 and body == b"" and headers.get("content-length") == "15", "HEAD /healthz: 200, no body, the GET's length")
c.next_cycle()

c.send("POST", "/healthz")
status, headers, body, _ = c.response()
check(status == 405 and problem(405, headers, body, "method-not-allowed") and headers.get("allow") == "GET, HEAD",
      "POST /healthz: 405 problem with Allow: GET, HEAD")
check(has_date(headers), "a 405 carries a Date")
c.next_cycle()

c.send("GET", "/no-such-path")
status, headers, body, _ = c.response()
check(status == 404 and problem(404, headers, body, "not-found"), "GET /no-such-path: 404 problem")
c.next_cycle()

c.send("POST", "/echo", body=b"hello")
status, headers, body, _ = c.response()
check(status == 200 and body == b"hello", "POST /echo: the body back")
c.next_cycle()

c.send("POST", "/tap/check-key")
status, headers, body, _ = c.response()
check(status == 200 and "ratelimit" in headers and "ratelimit-policy" in headers, "POST /tap: 200 with RateLimit fields")
c.next_cycle()
c.send("POST", "/tap/check-key")
status, headers, body, _ = c.response()
check(status == 429 and problem(429, headers, body, "throttled") and "retry-after" in headers,
      "POST /tap again: 429 problem with Retry-After")
c.next_cycle()

# Pipelining: three requests in one write, three answers in order.
pipelined = b"".join(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 1\r\n\r\n" + bytes([ord("a") + i]) for i in range(3))
p = raw_client(pipelined, method=b"POST")
bodies = []
for i in range(3):
    status, headers, body, _ = p.response()
    bodies.append(body)
    p.next_cycle()
    if i < 2:
        p.conn.send(h11.Request(method="POST", target="/", headers=[("Host", "test"), ("Content-Length", "0")]))
        p.conn.send(h11.EndOfMessage())
check(bodies == [b"a", b"b", b"c"], f"three pipelined requests answered in order ({bodies})")

# A chunked body is read as one.
ch = raw_client(b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n", method=b"POST")
status, headers, body, _ = ch.response()
check(status == 200 and body == b"abcde", "a chunked body is decoded")

# Expect: 100-continue: the server says 100 before the client sends the body.
e = Client()
e.send_raw(b"POST /echo HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
interim = e.sock.recv(4096)
check(interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), "Expect: 100-continue gets 100 Continue before the body")
e.sock.sendall(b"xyz")
rest = interim[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
while b"xyz" not in rest:
    data = e.sock.recv(4096)
    if not data:
        break
    rest += data
check(rest.startswith(b"HTTP/1.1 200 ") and rest.endswith(b"xyz"), "then 200 with the body")

# --- Errors that close the connection -----------------------------------------------------
def refused(name, request_bytes, status, slug, method=b"GET", wait=0.0):
    client = raw_client(request_bytes, method=method)
    if wait:
        time.sleep(wait)
    got, headers, body, _ = client.response()
    check(got == status and problem(status, headers, body, slug), f"{name}: {status} problem {slug} (got {got})")
    check(headers.get("connection") == "close" and has_date(headers), f"{name}: Date and Connection: close")
    check(client.closed(), f"{name}: the server closed the connection")


refused("a bare LF", b"GET / HTTP/1.1\nHost: test\n\n", 400, "bare-lf")
refused("two Content-Length", b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        400, "duplicate-content-length", method=b"POST")
refused("Content-Length and chunked", b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400, "content-length-and-transfer-encoding", method=b"POST")
refused("a NUL in a field value", b"GET / HTTP/1.1\r\nHost: test\r\nIdempotency-Key: \"a\x00b\"\r\n\r\n", 400, "bad-field-value")
refused("no Host", b"GET / HTTP/1.1\r\n\r\n", 400, "missing-host")
refused("a body over the limit", b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 101\r\n\r\n", 413, "body-too-large", method=b"POST")
refused("a head over the limit", b"GET / HTTP/1.1\r\nHost: test\r\nX: " + b"a" * 1100 + b"\r\n\r\n", 431, "header-fields-too-large")
refused("an unknown method", b"BREW /pot HTTP/1.1\r\nHost: test\r\n\r\n", 501, "unknown-method")
refused("gzip then chunked", b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501,
        "unsupported-transfer-encoding", method=b"POST")
refused("a head that takes too long", b"GET /healthz HTTP/1.1\r\nHost: test\r\n", 408, "request-timeout", wait=0.4)

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
