#!/usr/bin/env python3
"""Hostile-client probes against sluice-echo (Python 3 standard library only, Linux: /proc).

Each probe starts its own sluice-echo on a free port, keeps a CONTROL connection open that sends
PING every 10 ms (in a separate monitor process, so the probe's own load does not skew it), samples
the server's RSS and open descriptors every 50 ms, runs its hostile clients, closes them, waits for
the server to settle and checks the result. A probe that attacks HTTP gets an HTTP port, and a
second control connection that sends `GET /healthz` every 10 ms. See README.md next to this file.

    python3 Tests/Hostile/hostile.py --binary PATH [--quick] [--only NAME[,NAME...]] [--list]
"""

import argparse
import collections
import datetime
import json
import math
import os
import random
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "out")
MiB = 1 << 20
KiB = 1 << 10
HOST = "127.0.0.1"

# Limits every probe is held to (a probe may state its own on top).
CONTROL_P99_MS = 50.0       # the control connection's PING p99 while the probe runs
CONTROL_WORST_MS = 1000.0   # ... and its worst PING (HTTP probes: the same for GET /healthz)
SETTLE_S = 15.0             # how long "after" waits for descriptors and RSS to settle
STOP_GRACE_S = 15.0         # how long the final SIGTERM may take

# HTTP probes.
HTTP_RISE_MIB = 64          # http-pipelining: the most the RSS peak may rise over "before"
HTTP_BUDGET_MIB = 64        # http-nonreading: the server's --connection-buffers-mib
HTTP_OVERHEAD_MIB = 32      # ... and what its connections may hold beyond that budget
HTTP_RETURN_MIB = 16        # after the clients close, RSS comes back to within this of "before"
HTTP_RETURN_S = 15.0        # ... within this long
FRAMING_READ_S = 2.0        # http-framing: how long a case's responses are read (or until close)
REFUSAL_STATUSES = (400, 413, 431, 501, 505)    # a refused request's status


# --------------------------------------------------------------------------------------------
# /proc

def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def cpu_seconds(pid):
    """utime + stime of the process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def mib(value):
    return None if value is None else round(value / MiB, 1)


def percentile(values, fraction):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


# --------------------------------------------------------------------------------------------
# The monitor: a separate process with the control connection and the /proc sampler.

def monitor_main(pid, port, http_port=None):
    """Runs in its own process: PING every 10 ms on one connection, /proc samples every 50 ms;
    with `http_port`, also `GET /healthz` every 10 ms on one keep-alive HTTP connection.
    stdin: `phase NAME` starts a phase, `stop` (or EOF) ends; then one JSON line on stdout."""
    state = {"phase": "main"}
    lock = threading.Lock()
    latencies = []      # (phase, seconds)
    samples = []        # (phase, rss, fds)
    stop = threading.Event()
    info = {"broken": None, "unexpected": 0, "pending_ms": 0.0}
    health_latencies = []   # (phase, seconds)
    health_info = {"broken": None, "unexpected": 0, "pending_ms": 0.0, "statuses": collections.Counter()}
    started = time.monotonic()

    def health(sock):
        """GET /healthz every 10 ms on `sock`, one at a time (the next is sent once the answer
        is in): what a load balancer's health check sees while the probe runs."""
        request = b"GET /healthz HTTP/1.1\r\nHost: control\r\n\r\n"
        buffer = b""
        while not stop.is_set() and health_info["broken"] is None:
            phase = state["phase"]
            sent_at = time.monotonic()
            try:
                sock.sendall(request)
            except socket.timeout:
                pass
            except OSError as error:
                health_info["broken"] = f"send: {error} after {time.monotonic() - started:.1f}s"
                break
            response = None
            while not stop.is_set():
                try:
                    parsed = parse_response(buffer)
                except ValueError as error:
                    health_info["broken"] = f"{error} after {time.monotonic() - started:.1f}s"
                    break
                if parsed is not None:
                    response, taken = parsed
                    buffer = buffer[taken:]
                    break
                try:
                    data = sock.recv(65536)
                except socket.timeout:
                    continue
                except OSError as error:
                    health_info["broken"] = f"recv: {error} after {time.monotonic() - started:.1f}s"
                    break
                if not data:
                    health_info["broken"] = f"closed by the server after {time.monotonic() - started:.1f}s"
                    break
                buffer += data
            elapsed = time.monotonic() - sent_at
            if response is not None:
                health_info["statuses"][response.status] += 1
                if response.status != 200:
                    health_info["unexpected"] += 1
                with lock:
                    health_latencies.append((phase, elapsed))
                if response.close:
                    health_info["broken"] = (f"the server answered {response.status} with Connection: close "
                                             f"after {time.monotonic() - started:.1f}s")
                    break
            elif health_info["broken"] is None:
                health_info["pending_ms"] = elapsed * 1000
            delay = sent_at + 0.01 - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def sampler():
        while not stop.is_set():
            rss, fds = rss_bytes(pid), fd_count(pid)
            if rss is None or fds is None:
                break
            with lock:
                samples.append((state["phase"], rss, fds))
            stop.wait(0.05)

    def commands():
        for line in sys.stdin:
            command = line.strip()
            if command.startswith("phase "):
                state["phase"] = command[6:]
            elif command == "stop":
                break
        stop.set()

    sock = socket.create_connection((HOST, port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(0.05)
    health_thread = None
    if http_port:
        health_sock = socket.create_connection((HOST, http_port), timeout=5)
        health_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        health_sock.settimeout(0.05)
        health_thread = threading.Thread(target=health, args=(health_sock,), daemon=True)
        health_thread.start()
    threading.Thread(target=sampler, daemon=True).start()
    threading.Thread(target=commands, daemon=True).start()
    print("ready", flush=True)
    buffer = b""
    sequence = 0
    while not stop.is_set() and info["broken"] is None:
        sequence += 1
        want = b"c%d PONG" % sequence
        phase = state["phase"]
        sent_at = time.monotonic()
        try:
            sock.sendall(b"c%d PING\n" % sequence)
        except socket.timeout:
            pass
        except OSError as error:
            info["broken"] = f"send: {error} after {time.monotonic() - started:.1f}s"
            break
        answered = False
        while not stop.is_set():
            newline = buffer.find(b"\n")
            if newline >= 0:
                line, buffer = buffer[:newline], buffer[newline + 1:]
                if line == want:
                    answered = True
                    break
                info["unexpected"] += 1
                continue
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError as error:
                info["broken"] = f"recv: {error} after {time.monotonic() - started:.1f}s"
                break
            if not data:
                info["broken"] = f"closed by the server after {time.monotonic() - started:.1f}s"
                break
            buffer += data
        elapsed = time.monotonic() - sent_at
        if answered:
            with lock:
                latencies.append((phase, elapsed))
        elif info["broken"] is None:
            info["pending_ms"] = elapsed * 1000
        delay = sent_at + 0.01 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    stop.wait()
    if health_thread is not None:
        health_thread.join(2)

    def latency_summary(values):
        return {
            "worst_ms": round((max(values) if values else 0.0) * 1000, 1),
            "p99_ms": round((percentile(values, 0.99) or 0) * 1000, 1),
            "p50_ms": round((percentile(values, 0.50) or 0) * 1000, 2),
        }

    def summary(lat, smp):
        values = [x for _, x in lat]
        result = {"pings": len(values), **latency_summary(values)}
        result.update(rss_peak=max((r for _, r, _ in smp), default=None),
                      fds_peak=max((f for _, _, f in smp), default=None))
        return result

    with lock:
        result = summary(latencies, samples)
        phases = {}
        for name in dict.fromkeys([p for p, _ in latencies] + [p for p, _, _ in samples]):
            phases[name] = summary([x for x in latencies if x[0] == name], [s for s in samples if s[0] == name])
            if http_port:
                phases[name]["healthz"] = latency_summary([x for p, x in health_latencies if p == name])
        health_values = [x for _, x in health_latencies]
    result.update(info)
    result["phases"] = phases
    # A PING still unanswered at the end counts as that long a wait.
    result["worst_ms"] = round(max(result["worst_ms"], info["pending_ms"]), 1)
    if http_port:
        result["health"] = {"requests": len(health_values), **latency_summary(health_values),
                            "broken": health_info["broken"], "unexpected": health_info["unexpected"],
                            "statuses": {str(k): v for k, v in health_info["statuses"].items()}}
        result["health"]["worst_ms"] = round(max(result["health"]["worst_ms"], health_info["pending_ms"]), 1)
    print(json.dumps(result), flush=True)


class Monitor:
    def __init__(self, pid, port, http_port=None):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--monitor", str(pid), str(port), str(http_port or 0)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.proc.kill()
            raise RuntimeError("the control connection could not be opened")
        self.http = bool(http_port)
        self.result = None

    def phase(self, name):
        try:
            self.proc.stdin.write(f"phase {name}\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def stop(self):
        if self.result is not None:
            return self.result
        try:
            out, _ = self.proc.communicate("stop\n", timeout=30)
            self.result = json.loads(out.strip().splitlines()[-1])
        except Exception as error:  # noqa: BLE001 - report, do not crash the run
            self.proc.kill()
            self.result = {"broken": f"monitor: {error}", "pings": 0, "worst_ms": None, "p99_ms": None,
                           "rss_peak": None, "fds_peak": None, "phases": {}}
            if self.http:
                self.result["health"] = {"broken": f"monitor: {error}", "requests": 0, "worst_ms": None,
                                         "p99_ms": None}
        return self.result


# --------------------------------------------------------------------------------------------
# The server

def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, args, log_path, nofile=None, http=False):
        """`http`: serve HTTP on a free port too (`http_port`); else `--http-port 0`."""
        self.args = list(args)
        self.log_path = log_path
        self.nofile = nofile
        self.http_port = None
        for _ in range(3):
            self.port = free_port()
            if http:
                self.http_port = free_port()
            log = open(log_path, "ab")
            limit = nofile

            def preexec():
                if limit is not None:
                    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                    value = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
                    resource.setrlimit(resource.RLIMIT_NOFILE, (value, value))

            self.proc = subprocess.Popen(
                [binary, "--port", str(self.port), "--http-port", str(self.http_port or 0), *self.args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=preexec)
            log.close()
            if self.wait_ready(10):
                self.pid = self.proc.pid
                return
            self.kill()
        raise RuntimeError(f"sluice-echo did not answer PING{' and GET /healthz' if http else ''}; log: {log_path}")

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        line_ready = False
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if not line_ready:
                    with Conn(self.port, timeout=1) as c:
                        line_ready = c.request(b"ready", b"PING", timeout=1) == b"ready PONG"
                if line_ready and self.http_port is None:
                    return True
                if line_ready:
                    with HTTPConn(self.http_port, timeout=1) as c:
                        if c.roundtrip(http_bytes(b"GET", b"/healthz"), timeout=1).status == 200:
                            return True
            except (OSError, EOFError, TimeoutError, ValueError):
                time.sleep(0.05)
        return False

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout=STOP_GRACE_S):
        """SIGTERM; returns (exit code, seconds) or (None, timeout) after a SIGKILL."""
        if self.proc.poll() is not None:
            return self.proc.returncode, 0.0
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
            return code, time.monotonic() - started
        except subprocess.TimeoutExpired:
            self.kill()
            return None, timeout

    def log_tail(self, lines=5):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 4096))
                text = f.read().decode("utf-8", "replace").splitlines()
            return " | ".join(text[-lines:])
        except OSError:
            return ""


# --------------------------------------------------------------------------------------------
# Client helpers

class Conn:
    """A blocking client connection with line reading."""

    def __init__(self, port, timeout=5.0, rcvbuf=None, sndbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if sndbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect((HOST, port))
        except OSError:
            self.sock.close()
            raise
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        self.extra = []

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def readline(self, timeout=5.0):
        """The next line without its LF; raises EOFError when the server closed, TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line, self.buffer = self.buffer[:newline], self.buffer[newline + 1:]
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no reply line")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                raise TimeoutError("no reply line") from None
            except ConnectionResetError:
                raise EOFError("connection reset") from None
            if not data:
                raise EOFError("closed by the server")
            self.buffer += data

    def read_until(self, predicate, timeout=5.0):
        """Lines up to and including the first one `predicate` accepts."""
        deadline = time.monotonic() + timeout
        lines = []
        while True:
            line = self.readline(max(0.0, deadline - time.monotonic()))
            lines.append(line)
            if predicate(line):
                return lines

    def request(self, rid, text, timeout=5.0):
        """Sends `<rid> <text>` and returns the reply to rid; other lines go to `extra`."""
        self.send(rid + b" " + text + b"\n")
        prefix = rid + b" "
        lines = self.read_until(lambda l: l.startswith(prefix), timeout)
        self.extra.extend(lines[:-1])
        return lines[-1]

    def exchange(self, rid, text, timeout=5.0):
        """Like request, but returns every line up to and including the reply to rid."""
        reply = self.request(rid, text, timeout)
        lines, self.extra = self.extra + [reply], []
        return lines

    def wait_closed(self, timeout):
        """Reads until the server closes; returns (closed, bytes read)."""
        deadline = time.monotonic() + timeout
        data = b""
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                return True, data
            if not chunk:
                return True, data
            data += chunk
        return False, data

    def close(self, reset=False):
        if self.sock.fileno() < 0:
            return
        if reset:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            except OSError:
                pass
        self.sock.close()


def stats(port, timeout=5.0):
    """STATS from a fresh connection, as a dict of ints (that connection is counted)."""
    with Conn(port, timeout=timeout) as c:
        reply = c.request(b"st", b"STATS", timeout=timeout)
    fields = {}
    for part in reply.decode("utf-8", "replace").split()[2:]:
        if "=" in part:
            name, value = part.split("=", 1)
            try:
                fields[name] = int(value)
            except ValueError:
                pass
    return fields


# --------------------------------------------------------------------------------------------
# HTTP client helpers

def as_bytes(value):
    return value if isinstance(value, bytes) else str(value).encode()


def http_bytes(method, target, fields=(), body=b"", version=b"HTTP/1.1", host=b"hostile"):
    """One request's bytes: the request line, `Host` (none when `host` is None), `fields`
    ((name, value) pairs), `Content-Length` when there is a body, then the body."""
    lines = [b"%s %s %s" % (as_bytes(method), as_bytes(target), as_bytes(version))]
    if host is not None:
        lines.append(b"Host: " + as_bytes(host))
    lines.extend(as_bytes(name) + b": " + as_bytes(value) for name, value in fields)
    if body:
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + as_bytes(body)


def pay_bytes(idem, account, amount=1):
    """`POST /pay` for `account` with `Idempotency-Key: "<idem>"`."""
    body = b'{"key":"%s","amount":%d}' % (as_bytes(account), amount)
    return http_bytes(b"POST", b"/pay", [(b"Idempotency-Key", b'"' + as_bytes(idem) + b'"'),
                                         (b"Content-Type", b"application/json")], body)


class HTTPResponse:
    def __init__(self, version, status, reason, fields, body):
        self.version, self.status, self.reason, self.fields, self.body = version, status, reason, fields, body

    def field(self, name):
        """The first value of field `name` (any case), or None."""
        name = name.lower()
        return next((v for k, v in self.fields if k == name), None)

    def values(self, name):
        name = name.lower()
        return [v for k, v in self.fields if k == name]

    @property
    def close(self):
        """The response says `Connection: close`."""
        return any(option.strip().lower() == "close" for v in self.values("connection") for option in v.split(","))

    @property
    def problem(self):
        """A problem's slug (`urn:sluice:problem:<slug>`), or None."""
        try:
            kind = json.loads(self.body).get("type", "")
        except (ValueError, AttributeError):
            return None
        return kind.rsplit(":", 1)[-1] if kind.startswith("urn:sluice:problem:") else kind or None

    def summary(self):
        problem = self.problem
        return f"{self.status}" + (f" {problem}" if problem else "") + (" close" if self.close else "")


def parse_response(data, head=False, eof=False):
    """The response at the front of `data`: (HTTPResponse, bytes it took), or None while it is
    incomplete. A response to HEAD (`head`), a 1xx, 204 or 304 has no body; else Content-Length
    or a chunked coding frames it, or it runs to the close (`eof`: the server has closed).
    Raises ValueError when `data` does not start with a status line."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        if len(data) >= 5 and not data.startswith(b"HTTP/"):
            raise ValueError(f"not a status line: {data[:60]!r}")
        return None
    lines = data[:end].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not a status line: {lines[0][:60]!r}")
    fields = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields.append((name.strip().lower().decode("latin-1"), value.strip().decode("latin-1")))
    response = HTTPResponse(parts[0].decode(), int(parts[1]), parts[2].decode("latin-1") if len(parts) > 2 else "",
                            fields, b"")
    start = end + 4
    coding = response.field("transfer-encoding")
    length = response.field("content-length")
    if head or 100 <= response.status < 200 or response.status in (204, 304):
        return response, start
    if coding is not None and coding.lower().split(",")[-1].strip() == "chunked":
        body, position = [], start
        while True:
            line_end = data.find(b"\r\n", position)
            if line_end < 0:
                return None
            size = int(data[position:line_end].split(b";")[0], 16)
            if size == 0:
                trailer_end = data.find(b"\r\n\r\n", line_end)
                if trailer_end < 0 and data[line_end:line_end + 4] != b"\r\n\r\n":
                    return None
                response.body = b"".join(body)
                return response, (trailer_end if trailer_end >= 0 else line_end) + 4
            if len(data) < line_end + 2 + size + 2:
                return None
            body.append(data[line_end + 2:line_end + 2 + size])
            position = line_end + 2 + size + 2
    if length is not None:
        if len(data) < start + int(length):
            return None
        response.body = data[start:start + int(length)]
        return response, start + int(length)
    if eof:
        response.body = data[start:]
        return response, len(data)
    return None


class HTTPConn(Conn):
    """A blocking HTTP/1.1 client connection: raw bytes out, one response at a time in.
    `ended` becomes "closed" or "reset" when the server closes."""

    def __init__(self, port, **kw):
        super().__init__(port, **kw)
        self.ended = None

    def read_response(self, head=False, timeout=5.0):
        """The next response (`head`: to a HEAD request, so without a body). Raises EOFError
        when the server closes before a whole one, TimeoutError, ValueError for bytes that are
        not a response."""
        deadline = time.monotonic() + timeout
        while True:
            parsed = parse_response(self.buffer, head, eof=self.ended is not None)
            if parsed is not None:
                response, taken = parsed
                self.buffer = self.buffer[taken:]
                return response
            if self.ended is not None:
                raise EOFError(f"{self.ended} by the server" + (f" after {len(self.buffer)} bytes of a response"
                                                                 if self.buffer else ""))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no response")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                raise TimeoutError("no response") from None
            except ConnectionResetError:
                self.ended = "reset"
                continue
            if not data:
                self.ended = "closed"
                continue
            self.buffer += data

    def roundtrip(self, data, head=False, timeout=5.0):
        """Sends `data` (one request) and returns its response."""
        self.send(data)
        return self.read_response(head=head, timeout=timeout)

    def read_responses(self, timeout, head_first=False):
        """Every response until the server closes or `timeout` passes (`head_first`: the first
        is to a HEAD). Returns (responses, ending): "closed", "reset", "open" (still open when
        the time was up) or "garbage: ..." (bytes that are not a response)."""
        deadline = time.monotonic() + timeout
        responses = []
        while True:
            try:
                responses.append(self.read_response(head=head_first and not responses,
                                                     timeout=max(0.0, deadline - time.monotonic())))
            except EOFError:
                return responses, self.ended + (f" mid-response ({len(self.buffer)} bytes)" if self.buffer else "")
            except TimeoutError:
                return responses, "open"
            except ValueError as error:
                return responses, f"garbage: {error}"


def http_connections(http_port, timeout=5.0):
    """The server's open HTTP connections by /metrics (the asking connection is counted)."""
    with HTTPConn(http_port, timeout=timeout) as c:
        response = c.roundtrip(http_bytes(b"GET", b"/metrics"), timeout=timeout)
    for line in response.body.split(b"\n"):
        if line.startswith(b"sluice_http_connections "):
            return int(float(line.split()[1]))
    return None


def pipeline_unread(socks, source, stall_s, duration, cap=None, tick=None):
    """Sends on every (non-blocking) socket and never reads, until the server has taken nothing
    on it for `stall_s`, it has sent `cap` bytes, or `duration` has passed. `source(i)` gives
    the next requests for socket i (a list of bytes); `tick()` runs at least every 200 ms.
    Returns per socket: bytes sent, whole requests sent, and how it ended ("stalled", "cap",
    "deadline", or "send: <error>" when the server closed it)."""
    count = len(socks)
    pending = [memoryview(b"")] * count
    offset = [0] * count
    ends = [[] for _ in range(count)]       # where each request of the pending block ends
    sent = [0] * count
    requests = [0] * count
    progress = [time.monotonic()] * count
    ended = [None] * count
    poller = select.poll()
    index_of = {s.fileno(): i for i, s in enumerate(socks)}
    for s in socks:
        poller.register(s, select.POLLOUT)
    deadline = time.monotonic() + duration

    def refill(i):
        block = source(i)
        position, marks = 0, []
        for request in block:
            position += len(request)
            marks.append(position)
        pending[i], offset[i], ends[i] = memoryview(b"".join(block)), 0, marks

    def retire(i, how):
        ended[i] = how
        poller.unregister(socks[i].fileno())

    while any(e is None for e in ended) and time.monotonic() < deadline:
        for fd, _ in poller.poll(200):
            i = index_of[fd]
            if ended[i] is not None:
                continue
            if offset[i] >= len(pending[i]):
                requests[i] += len(ends[i])
                refill(i)
            try:
                n = socks[i].send(pending[i][offset[i]:offset[i] + (64 << 10)])
                offset[i] += n
                sent[i] += n
                progress[i] = time.monotonic()
            except BlockingIOError:
                pass
            except OSError as error:
                retire(i, f"send: {error.strerror or error}")
        now = time.monotonic()
        for i in range(count):
            if ended[i] is None and (now - progress[i] > stall_s or (cap is not None and sent[i] >= cap)):
                retire(i, "stalled" if now - progress[i] > stall_s else "cap")
        if tick is not None:
            tick()
    for i in range(count):
        if ended[i] is None:
            retire(i, "deadline")
        requests[i] += sum(1 for e in ends[i] if e <= offset[i])
    return {"sent": sent, "requests": requests, "ended": ended}


def close_reset(conns):
    """Closes connections with a reset (SO_LINGER 0), as a client that gives up would."""
    for c in conns:
        c.close(reset=True)


def wait_rss_return(pid, before, limit_mib, timeout=HTTP_RETURN_S):
    """Polls RSS until it is within `limit_mib` of `before`, or `timeout`. Returns (RSS, seconds
    it took or None)."""
    started = time.monotonic()
    while True:
        rss = rss_bytes(pid)
        if rss is None:
            return None, None
        if (rss - before) / MiB <= limit_mib:
            return rss, time.monotonic() - started
        if time.monotonic() - started > timeout:
            return rss, None
        time.sleep(0.25)


class ReplyCounter(threading.Thread):
    """Reads a connection's replies in a thread, tallying them by status until `expected`
    lines arrived, the server closed, or stop(). `keep` keeps each reply line by its id.
    It waits with poll() and leaves the socket's timeout alone: another thread may be sending
    on it, and a socket's timeout applies to both directions."""

    def __init__(self, sock, expected=None, keep=False):
        super().__init__(daemon=True)
        self.sock = sock
        self.expected = expected
        self.keep = keep
        self.count = 0
        self.tally = collections.Counter()
        self.replies = {}
        self.closed = False
        self.halt = threading.Event()
        self.done = threading.Event()

    def run(self):
        rest = b""
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        try:
            while not self.halt.is_set():
                if self.expected is not None and self.count >= self.expected:
                    break
                if not poller.poll(200):
                    continue
                try:
                    data = self.sock.recv(1 << 20)
                except (socket.timeout, BlockingIOError):
                    continue
                except OSError:
                    self.closed = True
                    break
                if not data:
                    self.closed = True
                    break
                lines = (rest + data).split(b"\n")
                rest = lines.pop()
                self.count += len(lines)
                for line in lines:
                    parts = line.split(b" ", 3)
                    status = parts[1] if len(parts) > 1 else b"?"
                    if status == b"ERR" and len(parts) > 2:
                        status = b"ERR " + parts[2]
                    self.tally[status.decode("utf-8", "replace")] += 1
                    if self.keep:
                        self.replies[parts[0]] = line
        finally:
            self.done.set()

    def stop(self):
        self.halt.set()
        self.done.wait(5)


def drive(conns, payloads, expected_each, deadline, at=None):
    """Sends payloads[i] on conns[i] and reads the replies of every connection from one poll()
    loop until each got `expected_each` lines, closed, or the deadline passed. `at`:
    (seconds, action) runs the action once, that long after the start."""
    started = time.monotonic()
    states = {}
    poller = select.poll()
    for c, payload in zip(conns, payloads):
        c.sock.setblocking(False)
        states[c.sock.fileno()] = {"sock": c.sock, "out": memoryview(payload), "pos": 0, "count": 0, "rest": b""}
        poller.register(c.sock.fileno(), select.POLLIN | select.POLLOUT)
    tally = collections.Counter()
    errors = []
    finished_counts = []
    open_count = len(states)
    while open_count and time.monotonic() < deadline:
        if at is not None and time.monotonic() - started >= at[0]:
            at[1]()
            at = None
        for fd, events in poller.poll(100):
            st = states[fd]
            if st is None:
                continue
            finished = False
            if events & (select.POLLIN | select.POLLERR | select.POLLHUP):
                try:
                    data = st["sock"].recv(1 << 20)
                except BlockingIOError:
                    data = None
                except OSError as error:
                    errors.append(f"recv: {error}")
                    data, finished = None, True
                if data == b"":
                    errors.append("closed by the server")
                    finished = True
                elif data:
                    lines = (st["rest"] + data).split(b"\n")
                    st["rest"] = lines.pop()
                    st["count"] += len(lines)
                    for line in lines:
                        parts = line.split(b" ", 3)
                        status = parts[1] if len(parts) > 1 else b"?"
                        if status == b"ERR" and len(parts) > 2:
                            status = b"ERR " + parts[2]
                        tally[status.decode("utf-8", "replace")] += 1
                    if st["count"] >= expected_each:
                        finished = True
            if not finished and events & select.POLLOUT and st["pos"] < len(st["out"]):
                try:
                    st["pos"] += st["sock"].send(st["out"][st["pos"]:st["pos"] + (256 << 10)])
                except BlockingIOError:
                    pass
                except OSError as error:
                    errors.append(f"send: {error}")
                    finished = True
                if st["pos"] >= len(st["out"]) and not finished:
                    poller.modify(fd, select.POLLIN)
            if finished:
                poller.unregister(fd)
                finished_counts.append(st["count"])
                states[fd] = None
                open_count -= 1
    if at is not None:          # everything finished before its time
        at[1]()
    replies = sum(finished_counts) + sum(st["count"] for st in states.values() if st is not None)
    return {"replies": replies, "tally": tally, "errors": errors}


def short_tally(tally):
    return ",".join(f"{k}:{v}" for k, v in sorted(tally.items(), key=lambda kv: -kv[1]))


# --------------------------------------------------------------------------------------------
# Probe context and runner

class Skip(Exception):
    pass


class Context:
    def __init__(self, config, server, monitor):
        self.config = config
        self.quick = config.quick
        self.server = server
        self.port = server.port
        self.http_port = server.http_port   # None unless the probe asked for HTTP
        self.pid = server.pid
        self.monitor = monitor
        self.notes = []
        self.failures = []
        self.details = {}
        self.conns = []
        self.expect_exit = False      # the probe stops the server itself
        self.check_control = True     # hold the control PING to the common limits
        self.settle_s = SETTLE_S
        self.skip_reason = None       # set: SKIPPED, the measurement is kept in the notes
        self.rss_rise_limit_mib = None  # set: the peak RSS may rise this much over "before"
        self.phase_rise_limits_mib = {}  # phase name -> the most its peak may rise over "before"

    def n(self, full, quick):
        return quick if self.quick else full

    def note(self, text):
        self.notes.append(text)

    def fail(self, text):
        self.failures.append(text)

    def check(self, condition, text):
        if not condition:
            self.fail(text)
        return condition

    def connect(self, **kw):
        c = Conn(self.port, **kw)
        self.conns.append(c)
        return c

    def connect_http(self, **kw):
        c = HTTPConn(self.http_port, **kw)
        self.conns.append(c)
        return c

    def connect_many(self, count, timeout=5):
        """Opens up to `count` connections, one at a time; stops at the first that fails.
        Returns the connections opened and, if one failed, (its index, the error)."""
        conns = []
        for i in range(count):
            try:
                conns.append(self.connect(timeout=timeout))
            except OSError as error:
                return conns, (i, error)
        return conns, None

    def close_all(self):
        for c in self.conns:
            c.close()
        self.conns.clear()

    def sample(self):
        return rss_bytes(self.pid), fd_count(self.pid)


PROBES = []


def probe(number, name, title, requires=None, measure_without=False, args=(), nofile=None, http=False):
    """`http`: the server also serves HTTP on a free port (`ctx.http_port`), and the monitor
    keeps a second control connection sending `GET /healthz`."""
    def register(function):
        PROBES.append(dict(number=number, name=name, title=title, requires=requires,
                           measure_without=measure_without, args=args if callable(args) else list(args), nofile=nofile,
                           http=http, function=function))
        return function
    return register


def run_probe(spec, config, log_dir):
    row = {"number": spec["number"], "probe": spec["name"], "title": spec["title"], "status": None,
           "rss_mib": {}, "fds": {}, "control": {}, "health": {}, "notes": [], "failures": [], "details": {}}
    started = time.monotonic()
    missing = spec["requires"] and spec["requires"] not in config.server_options
    if missing and not spec["measure_without"]:
        row["status"] = "SKIPPED"
        row["notes"].append(f"sluice-echo has no {spec['requires']}")
        row["seconds"] = 0.0
        return row
    args = spec["args"](config) if callable(spec["args"]) else list(spec["args"])
    if missing:
        args = [a for a in args if not a.startswith(spec["requires"])]
    nofile = spec["nofile"](config) if callable(spec["nofile"]) else spec["nofile"]
    row["details"]["server_args"] = args
    log_path = os.path.join(log_dir, f"{spec['number']:02d}-{spec['name']}.log")
    server = monitor = None
    try:
        server = Server(config.binary, args, log_path, nofile=nofile, http=spec["http"])
        monitor = Monitor(server.pid, server.port, server.http_port)
        time.sleep(0.3)
        ctx = Context(config, server, monitor)
        if missing:
            ctx.skip_reason = f"sluice-echo has no {spec['requires']}"
        before = ctx.sample()
        try:
            spec["function"](ctx)
        except Skip as reason:
            ctx.skip_reason = str(reason)
        except Exception as error:  # noqa: BLE001 - a probe error is a failure, not a crash
            ctx.fail(f"probe error: {type(error).__name__}: {error}")
            row["details"]["traceback"] = traceback.format_exc()
        finally:
            ctx.close_all()
        after = (None, None)
        connections_after = http_after = None
        if server.alive() and not ctx.expect_exit:
            after, connections_after, http_after = settle(ctx, before)
        control = monitor.stop()
        peak_rss = max(x for x in (control.get("rss_peak"), before[0], after[0]) if x is not None)
        peak_fds = max(x for x in (control.get("fds_peak"), before[1], after[1]) if x is not None)
        row["rss_mib"] = {"before": mib(before[0]), "peak": mib(peak_rss), "after": mib(after[0])}
        row["fds"] = {"before": before[1], "peak": peak_fds, "after": after[1]}
        row["control"] = {k: control.get(k) for k in ("pings", "worst_ms", "p99_ms", "p50_ms", "broken", "unexpected")}
        health = control.get("health") or {}
        row["health"] = health
        phases = control.get("phases", {})
        row["details"]["phases"] = phases
        if len(phases) > 1:
            row["details"]["rss_rise_by_phase_mib"] = {
                name: mib((p.get("rss_peak") or before[0]) - before[0]) for name, p in phases.items()}
        for name, limit in ctx.phase_rise_limits_mib.items():
            peak = phases.get(name, {}).get("rss_peak")
            if peak is not None and (peak - before[0]) / MiB > limit:
                ctx.fail(f"during {name}: RSS rose {(peak - before[0]) / MiB:.0f} MiB (limit {limit} MiB)")
        if ctx.rss_rise_limit_mib is not None:
            rise = (peak_rss - before[0]) / MiB
            ctx.note(f"RSS peak +{rise:.0f} MiB (limit {ctx.rss_rise_limit_mib})")
            ctx.check(rise <= ctx.rss_rise_limit_mib,
                      f"RSS rose {rise:.0f} MiB (limit {ctx.rss_rise_limit_mib} MiB)")
        # The checks every probe gets.
        if not ctx.expect_exit:
            if not server.alive():
                ctx.fail(f"server exited (code {server.proc.returncode}): {server.log_tail()}")
            else:
                if after[1] is not None and before[1] is not None and after[1] > before[1]:
                    ctx.fail(f"descriptors did not return to baseline ({before[1]} -> {after[1]})")
                if connections_after is not None and connections_after != 2:
                    ctx.fail(f"STATS connections={connections_after} after the clients left (expected 2)")
                if ctx.http_port is not None:
                    row["details"]["http_connections_after"] = http_after
                    if http_after != 2:
                        ctx.fail(f"/metrics sluice_http_connections={http_after} after the clients left "
                                 f"(expected 2: the health control and the asking connection)")
            if control.get("broken"):
                ctx.fail(f"control connection broken: {control['broken']}")
            if ctx.check_control and control.get("worst_ms") is not None:
                if control["p99_ms"] > CONTROL_P99_MS or control["worst_ms"] > CONTROL_WORST_MS:
                    ctx.fail(f"control PING p99 {control['p99_ms']} ms / worst {control['worst_ms']} ms "
                             f"(limits {CONTROL_P99_MS:.0f} / {CONTROL_WORST_MS:.0f})")
            if health.get("broken"):
                ctx.fail(f"health control connection broken: {health['broken']}")
            if ctx.check_control and health.get("worst_ms") is not None:
                if health["p99_ms"] > CONTROL_P99_MS or health["worst_ms"] > CONTROL_WORST_MS:
                    ctx.fail(f"control GET /healthz p99 {health['p99_ms']} ms / worst {health['worst_ms']} ms "
                             f"(limits {CONTROL_P99_MS:.0f} / {CONTROL_WORST_MS:.0f})")
            if health.get("unexpected"):
                ctx.fail(f"control GET /healthz: {health['unexpected']} answers were not 200 ({health.get('statuses')})")
            code, seconds = server.stop()
            row["details"]["final_exit"] = {"code": code, "seconds": round(seconds, 2)}
            if code != 0:
                ctx.fail(f"final SIGTERM: exit code {code} after {seconds:.1f}s")
        row["notes"] = ctx.notes
        row["failures"] = ctx.failures
        row["details"].update(ctx.details)
        if ctx.skip_reason:
            row["status"] = "SKIPPED"
            row["notes"].insert(0, ctx.skip_reason + "; measured anyway:")
            if ctx.failures:
                row["notes"].append("would FAIL: " + "; ".join(ctx.failures))
            row["failures"] = []
        else:
            row["status"] = "FAIL" if ctx.failures else "PASS"
    except Exception as error:  # noqa: BLE001
        row["status"] = "FAIL"
        row["failures"].append(f"harness error: {type(error).__name__}: {error}")
        row["details"]["traceback"] = traceback.format_exc()
    finally:
        if monitor is not None:
            monitor.stop()
        if server is not None:
            server.kill()
        trim_log(log_path)
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


def settle(ctx, before):
    """Polls until descriptors are back to `before`, STATS counts only the control connection
    (and the asking one), with HTTP /metrics counts only the health control (and the asking
    one), and RSS holds still for a second; or until the deadline. Returns ((RSS, fds),
    STATS connections, HTTP connections or None)."""
    deadline = time.monotonic() + ctx.settle_s
    last_rss, stable_since, connections, http_open = None, None, None, None
    while True:
        rss, fds = ctx.sample()
        if rss is None:
            return (None, None), None, None
        try:
            connections = stats(ctx.port, timeout=2).get("connections")
        except (OSError, EOFError, TimeoutError):
            connections = None
        if ctx.http_port is not None:
            try:
                http_open = http_connections(ctx.http_port, timeout=2)
            except (OSError, EOFError, TimeoutError, ValueError):
                http_open = None
        now = time.monotonic()
        if last_rss is not None and abs(rss - last_rss) < MiB:
            stable_since = stable_since or now
        else:
            stable_since = None
        last_rss = rss
        settled = (fds <= before[1] and connections == 2 and (ctx.http_port is None or http_open == 2)
                   and stable_since and now - stable_since >= 1.0)
        if settled or now > deadline:
            return (rss, fds), connections, http_open
        time.sleep(0.25)


def trim_log(path, keep=200):
    """A log over 1 MiB keeps its first and last `keep` lines (and says how many it dropped)."""
    try:
        if os.path.getsize(path) <= MiB:
            return
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
        dropped = len(lines) - 2 * keep
        with open(path, "wb") as f:
            f.write(b"\n".join(lines[:keep]))
            f.write(b"\n... %d lines dropped ...\n" % dropped)
            f.write(b"\n".join(lines[-keep:]))
    except OSError:
        pass


# --------------------------------------------------------------------------------------------
# Probes

@probe(1, "oversized", "oversized lines, binary garbage, NUL bytes, invalid UTF-8")
def probe_oversized(ctx):
    chunks = ctx.n(32, 8)          # MiB per overlong line
    parallel = ctx.n(8, 4)
    errors = []

    def overlong(index):
        try:
            c = ctx.connect(timeout=30)
            block = b"A" * MiB
            for _ in range(chunks):
                c.send(block)
            c.send(b"\n")
            lines = c.exchange(b"o%d" % index, b"PING", timeout=30)
            if sorted(lines) != sorted([b"- ERR line-too-long", b"o%d PONG" % index]):
                errors.append(f"{chunks} MiB line: replies {lines[:4]!r}")
        except (OSError, EOFError, TimeoutError) as error:
            errors.append(f"{chunks} MiB line: {error}")

    threads = [threading.Thread(target=overlong, args=(i,)) for i in range(parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for e in errors[:3]:
        ctx.fail(e)
    ctx.note(f"{parallel}x{chunks} MiB lines ok" if not errors else f"{len(errors)} overlong failures")

    max_line = 8192
    c = ctx.connect(timeout=10)
    # Several overlong lines back to back in one write, then the boundary: exactly --max-line
    # bytes (with CR LF) passes, one more is too long.
    c.send((b"B" * 9000 + b"\n") * 5)
    lines = c.exchange(b"b1", b"PING")
    ctx.check(lines.count(b"- ERR line-too-long") == 5 and lines[-1] == b"b1 PONG",
              f"5 overlong lines in one write: {[l[:30] for l in lines]!r}")
    head = b"b2 ECHO "
    text = b"x" * (max_line - len(head))
    reply = c.request(b"b2", b"ECHO " + text + b"\r")
    ctx.check(reply == b"b2 OK " + text, f"a line of exactly {max_line} bytes + CR LF: {reply[:40]!r}")
    c.send(head + text + b"y\n")
    lines = c.exchange(b"b3", b"PING")
    ctx.check(lines == [b"- ERR line-too-long", b"b3 PONG"],
              f"a line of {max_line + 1} bytes: {[l[:40] for l in lines]!r}")

    # Crafted garbage, each followed by a PING that marks the end of its replies.
    cases = [
        (b"\x00\x00\x00", lambda r: r == [b"- ERR malformed"]),
        (b"", lambda r: r == [b"- ERR malformed"]),
        (b"\r", lambda r: r == [b"- ERR malformed"]),
        (b"g1 ECHO \xc3\x28", lambda r: r == [b"- ERR malformed"]),
        (b"g2 ECHO \xff\xfe\xfd", lambda r: r == [b"- ERR malformed"]),
        (b"g3 ECHO \xed\xa0\x80", lambda r: r == [b"- ERR malformed"]),      # a UTF-16 surrogate
        (b"g4 ECHO \xc0\xaf", lambda r: r == [b"- ERR malformed"]),          # overlong encoding
        (b"\xff\xfe g5 PING", lambda r: r == [b"- ERR malformed"]),
        (b"x" * 33 + b" PING", lambda r: r == [b"- ERR malformed"]),
        (b"g6 PI\x00NG", lambda r: r == [b"g6 ERR unknown-verb"]),
        (b"g7", lambda r: r == [b"g7 ERR unknown-verb"]),
        (b"g8 TAP " + b"k" * 200, lambda r: r == [b"g8 ERR usage TAP"]),
        (b"g9 TAP k\x01y", lambda r: r == [b"g9 ERR usage TAP"]),
        (b"g10 PAY a b -5", lambda r: len(r) == 1 and r[0].startswith(b"g10 ERR ")),
        (b"g11 PAGE k 99999999999999999999999", lambda r: len(r) == 1 and r[0].startswith(b"g11 ERR ")),
        (b"g12 LIMIT k 0", lambda r: r == [b"g12 ERR bad-cost"]),
        (b"g13 SEARCH k a\rb", lambda r: r == [b"g13 ERR usage SEARCH"]),
        (b"g14 ECHO a\x00b", lambda r: len(r) == 1 and r[0].startswith(b"g14 ")),
        (b"g15 CANCEL k \xff", lambda r: r == [b"- ERR malformed"]),
    ]
    bad = []
    for index, (line, ok) in enumerate(cases):
        c.send(line + b"\n")
        replies = c.exchange(b"m%d" % index, b"PING")[:-1]
        if not ok(replies):
            bad.append(f"{line[:24]!r} -> {[r[:40] for r in replies]!r}")
    for b in bad:
        ctx.fail("garbage " + b)
    # A bare CR inside ECHO's text is refused: written back, it would end a line early for a
    # client that also ends lines at a CR.
    reply = c.request(b"g16", b"ECHO a\rb")
    ctx.check(reply == b"g16 ERR usage ECHO", f"ECHO with a CR in its text: {reply!r}")

    # Random bytes: every LF-terminated piece is one line and gets exactly one reply.
    rng = random.Random(1)
    size = ctx.n(4 * MiB, MiB)
    garbage = rng.randbytes(size)
    expected = garbage.count(b"\n") + 1
    c2 = ctx.connect(timeout=30)
    c2.send(garbage + b"\n")
    lines = c2.exchange(b"gz", b"PING", timeout=30)
    replies = len(lines) - 1
    others = [l for l in lines[:-1] if not (l.startswith(b"- ERR ") or b" ERR " in l)]
    ctx.check(replies == expected, f"random garbage: {expected} lines, {replies} replies")
    ctx.note(f"{size // MiB} MiB random: {expected} lines, {replies} replies, {len(others)} non-ERR")
    ctx.rss_rise_limit_mib = 64


@probe(2, "pipelining", "one connection pipelines SEARCH + PAY without reading",
       requires="--max-in-flight", measure_without=True)
def probe_pipelining(ctx):
    count = ctx.n(300_000, 30_000)
    before, _ = ctx.sample()
    payload = b"".join(b"s%d SEARCH sk%d q%d\n" % (i, i, i) for i in range(count))
    payload += b"".join(b"p%d PAY pk%d i%d 100\n" % (i, i, i) for i in range(count))
    c = ctx.connect(timeout=5)
    c.sock.setblocking(False)
    view = memoryview(payload)
    sent, last_progress, started = 0, time.monotonic(), time.monotonic()
    poller = select.poll()
    poller.register(c.sock, select.POLLOUT)
    peak = before
    while sent < len(payload):
        if poller.poll(200):
            try:
                n = c.sock.send(view[sent:sent + (1 << 20)])
                sent += n
                last_progress = time.monotonic()
            except BlockingIOError:
                pass
            except OSError as error:
                ctx.note(f"send failed: {error}")
                break
        peak = max(peak, ctx.sample()[0] or 0)
        if time.monotonic() - last_progress > 3.0 or time.monotonic() - started > 120:
            break
    lines_sent = payload[:sent].count(b"\n")
    stalled = sent < len(payload)
    # Let what was read finish and its replies pile up unread.
    end = time.monotonic() + 3
    while time.monotonic() < end:
        peak = max(peak, ctx.sample()[0] or 0)
        time.sleep(0.05)
    rise = (peak - before) / MiB
    ctx.note(f"{lines_sent}/{2 * count} lines sent" + (" (server stopped reading)" if stalled else "")
             + f"; RSS +{rise:.0f} MiB")
    ctx.details.update(lines_sent=lines_sent, stalled=stalled, rss_rise_mib=round(rise, 1))
    ctx.check(rise <= 64, f"one pipelining connection raised RSS by {rise:.0f} MiB (limit 64)")
    c.close(reset=True)


@probe(3, "nonreading", "connections that send big ECHOs and never read")
def probe_nonreading(ctx):
    count = ctx.n(200, 50)
    text = b"x" * 8000
    line = b"e ECHO " + text + b"\n"
    block = line * 8
    stream = block * 2
    before, _ = ctx.sample()
    socks = []
    for _ in range(count):
        c = ctx.connect(timeout=5, rcvbuf=4096)
        c.sock.setblocking(False)
        socks.append(c.sock)
    position = [0] * count
    sent = [0] * count
    progress = [time.monotonic()] * count
    done = [False] * count
    cap = 64 * MiB
    poller = select.poll()
    index_of = {s.fileno(): i for i, s in enumerate(socks)}
    for s in socks:
        poller.register(s, select.POLLOUT)
    deadline = time.monotonic() + ctx.n(90, 45)
    closed_by_server = 0
    peak = [0, 0]
    sample = unread_sample(ctx, peak)
    while not all(done) and time.monotonic() < deadline:
        sample()
        for fd, _ in poller.poll(200):
            i = index_of[fd]
            if done[i]:
                continue
            try:
                n = socks[i].send(stream[position[i]:position[i] + len(block)])
                position[i] = (position[i] + n) % len(block)
                sent[i] += n
                progress[i] = time.monotonic()
            except BlockingIOError:
                pass
            except OSError:
                done[i] = True
                closed_by_server += 1
                poller.unregister(fd)
        now = time.monotonic()
        for i in range(count):
            if not done[i] and (now - progress[i] > 2.0 or sent[i] >= cap):
                done[i] = True
                poller.unregister(socks[i].fileno())
    time.sleep(1.0)
    held, _ = ctx.sample()
    per_connection = (held - before) / count
    ctx.details.update(sent_mib_per_connection=round(sum(sent) / count / MiB, 1),
                       rss_per_connection_kib=round(per_connection / KiB))
    ctx.note(f"{count} conns, {sum(sent) / count / MiB:.1f} MiB sent each, RSS +{per_connection / KiB:.0f} KiB/conn")
    if closed_by_server:
        ctx.note(f"{closed_by_server} closed by the server")
    # The bytes the server has not read sit in the kernel's socket buffers, host memory the
    # control connections share: read their latencies against it.
    report_tcp_memory(ctx, peak)
    ctx.check(per_connection <= 256 * KiB,
              f"a non-reading connection pins {per_connection / KiB:.0f} KiB (limit 256)")
    for s in socks:
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass


@probe(4, "slowloris", "one byte a second, --line-timeout-s 3", requires="--line-timeout-s",
       args=["--line-timeout-s", "3"])
def probe_slowloris(ctx):
    count = ctx.n(20, 10)
    line = b"s1 ECHO " + b"a" * 100 + b"\n"
    loris = [ctx.connect(timeout=5) for _ in range(count)]
    honest = ctx.connect(timeout=5)
    first_byte = [None] * count
    closed_at = [None] * count
    received = [b""] * count
    poller = select.poll()
    for i, c in enumerate(loris):
        c.sock.setblocking(False)
        poller.register(c.sock, select.POLLIN)
    index_of = {c.sock.fileno(): i for i, c in enumerate(loris)}
    started = time.monotonic()
    tick = 0
    honest_ok = True
    while time.monotonic() - started < 15 and any(t is None for t in closed_at):
        now = time.monotonic()
        for i, c in enumerate(loris):
            if closed_at[i] is None and tick < len(line) - 1:
                try:
                    c.sock.send(line[tick:tick + 1])
                    if first_byte[i] is None:
                        first_byte[i] = now
                except OSError:
                    closed_at[i] = closed_at[i] or now
        try:
            if honest.request(b"h%d" % tick, b"PING", timeout=2) != b"h%d PONG" % tick:
                honest_ok = False
        except (OSError, EOFError, TimeoutError):
            honest_ok = False
        tick += 1
        while time.monotonic() < now + 1.0:
            for fd, _ in poller.poll(50):
                i = index_of[fd]
                try:
                    data = loris[i].sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    received[i] += data
                else:
                    closed_at[i] = closed_at[i] or time.monotonic()
                    poller.unregister(fd)
    delays = [c - f for c, f in zip(closed_at, first_byte) if c is not None and f is not None]
    open_left = sum(1 for c in closed_at if c is None)
    ctx.details["close_after_first_byte_s"] = [round(d, 2) for d in delays]
    ctx.check(open_left == 0, f"{open_left}/{count} slow connections still open after 15 s")
    if delays:
        ctx.note(f"closed {min(delays):.1f}-{max(delays):.1f} s after the first byte")
        ctx.check(min(delays) >= 2.5 and max(delays) <= 4.5,
                  f"closed {min(delays):.1f}-{max(delays):.1f} s after the first byte (expected about 3)")
    replies = collections.Counter(r for r in received)
    ctx.details["slow_replies"] = {repr(k): v for k, v in replies.items()}
    if all(r == b"" for r in received):
        ctx.note("no '- ERR line-timeout' written before closing")
    else:
        wrong = [r for r in received if r not in (b"", b"- ERR line-timeout\n")]
        ctx.check(not wrong, f"slow connection got {wrong[0][:60]!r}" if wrong else "")
        ctx.note(f"{sum(1 for r in received if r)}/{count} got '- ERR line-timeout'")
    ctx.check(honest_ok, "a connection sending a full PING every second was disturbed")


@probe(5, "idle", "thousands of idle connections, then closed",
       nofile=lambda config: config.idle_count + 1024)
def probe_idle(ctx):
    count = ctx.config.idle_count
    before = fd_count(ctx.pid)
    conns, failed = ctx.connect_many(count)
    if failed:
        ctx.fail(f"connect {failed[0] + 1}/{count}: {failed[1]}")
    deadline = time.monotonic() + 15
    while fd_count(ctx.pid) < before + len(conns) and time.monotonic() < deadline:
        time.sleep(0.1)
    accepted = fd_count(ctx.pid) - before
    ctx.check(accepted >= len(conns), f"server holds {accepted} of {len(conns)} connections")
    connections = stats(ctx.port).get("connections")
    ctx.check(connections == len(conns) + 2, f"STATS connections={connections} with {len(conns)} open")
    bad = 0
    for i in range(0, len(conns), 50):
        try:
            if conns[i].request(b"i%d" % i, b"PING") != b"i%d PONG" % i:
                bad += 1
        except (OSError, EOFError, TimeoutError):
            bad += 1
    ctx.check(bad == 0, f"{bad} idle connections did not answer PING")
    time.sleep(2)
    ctx.note(f"{len(conns)} idle conns held, {accepted} fds")
    ctx.close_all()


@probe(6, "churn", "connect / PING / close cycles")
def probe_churn(ctx):
    cycles = ctx.n(20_000, 2_000)
    failures = collections.Counter()
    started = time.monotonic()
    for i in range(cycles):
        kind = i % 4
        try:
            c = Conn(ctx.port, timeout=5)
        except OSError as error:
            failures[f"connect: {error.__class__.__name__}"] += 1
            continue
        try:
            if kind == 0:       # polite: PING, read PONG, close
                if c.request(b"k", b"PING") != b"k PONG":
                    failures["no PONG"] += 1
                c.close()
            elif kind == 1:     # PING, read PONG, reset
                if c.request(b"k", b"PING") != b"k PONG":
                    failures["no PONG"] += 1
                c.close(reset=True)
            elif kind == 2:     # PING and leave without reading
                c.send(b"k PING\n")
                c.close()
            else:               # connect and reset at once
                c.close(reset=True)
        except (OSError, EOFError, TimeoutError) as error:
            failures[f"{error.__class__.__name__}"] += 1
            c.close()
    elapsed = time.monotonic() - started
    ctx.note(f"{cycles} cycles in {elapsed:.1f}s (polite/reset/unread/instant)")
    ctx.check(not failures, f"churn failures: {dict(failures)}")


@probe(7, "fdlimit", "descriptor exhaustion: server at ulimit -n 256, 400 connections", nofile=256)
def probe_fdlimit(ctx):
    count = 400
    log = ctx.server.log_path
    lines_before = count_lines(log)
    conns, failed = ctx.connect_many(count)
    if failed:
        ctx.note(f"connect stopped at {failed[0]}: {failed[1]}")
    time.sleep(1.0)
    fds_full = fd_count(ctx.pid)
    cpu0, t0 = cpu_seconds(ctx.pid), time.monotonic()
    time.sleep(3.0)
    cpu = (cpu_seconds(ctx.pid) - cpu0) / (time.monotonic() - t0)
    episode_lines = count_lines(log) - lines_before
    ctx.details.update(cpu_fraction=round(cpu, 3), log_lines=episode_lines, fds_when_full=fds_full)
    ctx.note(f"{len(conns)} conns, server fds {fds_full}; CPU {cpu * 100:.0f}% of a core, "
             f"{episode_lines} log lines")
    ctx.check(cpu < 0.05, f"server CPU {cpu * 100:.0f}% of a core while out of descriptors (limit 5%)")
    ctx.check(episode_lines <= 2, f"{episode_lines} log lines in one exhaustion episode (limit 2)")
    if episode_lines:
        with open(log, "rb") as f:
            sample = f.read(1 << 16).decode("utf-8", "replace").splitlines()
        ctx.details["log_sample"] = sample[-3:]
    ctx.close_all()
    deadline = time.monotonic() + 10
    recovered = None
    while time.monotonic() < deadline:
        try:
            with Conn(ctx.port, timeout=1) as c:
                if c.request(b"r", b"PING", timeout=1) == b"r PONG":
                    recovered = time.monotonic() - (deadline - 10)
                    break
        except (OSError, EOFError, TimeoutError):
            time.sleep(0.1)
    ctx.check(recovered is not None, "server does not accept again after the connections closed")
    if recovered is not None:
        ctx.note(f"accepts again {recovered:.1f}s after close")


@probe(8, "maxconn", "--max-connections 20: 30 more connections, the rest refused at once", requires="--max-connections",
       args=["--max-connections", "20"])
def probe_maxconn(ctx):
    limit = 20
    accepted, refused, wrong = [], [], []
    for i in range(limit + 10):
        c = ctx.connect(timeout=5)
        try:
            line = c.readline(0.3)           # a refusal comes unasked
            if line == b"- ERR too-many-connections":
                closed, rest = c.wait_closed(1.0)
                refused.append(closed)
                if rest:
                    wrong.append(rest[:60])
            else:
                wrong.append(line[:60])
            continue
        except TimeoutError:
            pass
        except EOFError:
            wrong.append(b"closed without a line")
            continue
        try:
            reply = c.request(b"a%d" % i, b"PING", timeout=2)
            if reply == b"a%d PONG" % i:
                accepted.append(c)
            elif reply.startswith(b"- ERR too-many-connections"):
                refused.append(c.wait_closed(1.0)[0])
            else:
                wrong.append(reply[:60])
        except (OSError, EOFError, TimeoutError) as error:
            wrong.append(str(error).encode())
    ctx.note(f"{len(accepted)} accepted, {len(refused)} refused (control holds 1)")
    ctx.check(len(accepted) == limit - 1, f"{len(accepted)} accepted beside the control (expected {limit - 1})")
    ctx.check(len(refused) == 11, f"{len(refused)} refused (expected 11)")
    ctx.check(all(refused), f"{refused.count(False)} refused connections were not closed within 1 s")
    ctx.check(not wrong, f"unexpected: {wrong[:3]!r}")
    for c in accepted[:5]:
        c.close()
    deadline = time.monotonic() + 3
    again = False
    while time.monotonic() < deadline and not again:
        try:
            with Conn(ctx.port, timeout=1) as c:
                again = c.request(b"n", b"PING", timeout=1) == b"n PONG"
        except (OSError, EOFError, TimeoutError):
            pass
        if not again:
            time.sleep(0.1)
    ctx.check(again, "no new connection accepted after 5 closed")


TABLE_MIB = 16


# The tables a flood of unique keys can fill, by verb: TAP fills its throttle table and its
# per-key tap counts (--tap-tally-mib), the others one table each.
FLOOD_TABLES = {"TAP": 2, "LIMIT": 1, "PAGE": 1, "SEARCH": 1, "PAY": 1}


@probe(9, "flood", "1M-key floods of TAP, LIMIT, PAGE, SEARCH, PAY (replies read)",
       args=[f"--{t}-table-mib={TABLE_MIB}" for t in ("tap", "pay", "search", "limit", "page")]
       + [f"--tap-tally-mib={TABLE_MIB}"])
def probe_flood(ctx):
    keys = ctx.n(1_000_000, 100_000)
    # --max-in-flight caps each connection's pending requests; a client that wants to fill the
    # tables opens many connections.
    per_conn_count = ctx.n(256, 64)
    budget = sum(FLOOD_TABLES.values()) * TABLE_MIB + 64
    templates = {
        "TAP": lambda i: b"t%d TAP tk%d\n" % (i, i),
        "LIMIT": lambda i: b"l%d LIMIT lk%d\n" % (i, i),
        "PAGE": lambda i: b"g%d PAGE gk%d 1\n" % (i, i),
        "SEARCH": lambda i: b"s%d SEARCH sk%d q\n" % (i, i),
        "PAY": lambda i: b"p%d PAY pk%d i%d 100\n" % (i, i, i),
    }
    flooded = 0
    for verb, make in templates.items():
        ctx.monitor.phase(verb)
        flooded += FLOOD_TABLES[verb]
        ctx.phase_rise_limits_mib[verb] = flooded * TABLE_MIB + 64   # the tables flooded so far + 64
        share = keys // per_conn_count
        conns = [ctx.connect(timeout=10) for _ in range(per_conn_count)]
        # Another client's request for its own key, sent once the flood is under way: what it
        # gets back shows whether the flood reaches other clients' work (reported, not judged).
        victim = ctx.connect(timeout=10)
        payloads = [b"".join(make(i * share + j) for j in range(share)) for i in range(per_conn_count)]
        started = time.monotonic()
        result = drive(conns, payloads, share, deadline=time.monotonic() + 300,
                       at=(1.0, lambda: victim.send(make(0).replace(b"k0", b"k-victim", 1).replace(b" ", b"v ", 1))))
        elapsed = time.monotonic() - started
        got, tally = result["replies"], result["tally"]
        ctx.details[verb] = {"replies": got, "seconds": round(elapsed, 1), "tally": dict(tally),
                             "connections": per_conn_count}
        ctx.check(not result["errors"], f"{verb}: {result['errors'][:1]}")
        ctx.check(got == share * per_conn_count, f"{verb}: {got} replies to {share * per_conn_count} requests")
        try:
            victim_reply = victim.readline(10).split(b" ", 1)[1].decode("utf-8", "replace")
        except (OSError, EOFError, TimeoutError, IndexError) as error:
            victim_reply = f"no reply ({error})"
        ctx.details[verb]["victim"] = victim_reply
        conns.append(victim)
        for c in conns:
            c.close()
        ctx.conns = [c for c in ctx.conns if c not in conns]
        ctx.note(f"{verb} {elapsed:.0f}s {short_tally(tally)}; other client's {verb}: "
                 f"{victim_reply.split(' ')[0]}")
    ctx.monitor.phase("after")
    ctx.rss_rise_limit_mib = budget     # the tables' budgets + 64 MiB


@probe(10, "payquota", "one account floods PAY past its quota; another still pays",
       requires="--pay-records-per-key",
       args=lambda config: ["--pay-records-per-key", str(config.pay_quota), "--pay-latency-ms", "1",
                            f"--pay-table-mib={TABLE_MIB}"])
def probe_payquota(ctx):
    quota = ctx.config.pay_quota
    count = ctx.n(100_000, 5_000)
    c = ctx.connect(timeout=10)
    counter = ReplyCounter(c.sock, expected=count)
    counter.start()
    for start in range(0, count, 20_000):
        c.sock.sendall(b"".join(b"a%d PAY acct-a idem-%d 100\n" % (i, i)
                                for i in range(start, min(count, start + 20_000))))
    counter.done.wait(120)
    counter.stop()
    tally = counter.tally
    charged = tally.get("OK", 0)
    busy = tally.get("ERR busy", 0)
    ctx.note(f"acct-a: {count} new idem -> {short_tally(tally)}")
    ctx.check(counter.count == count, f"{counter.count} replies to {count} PAYs")
    ctx.check(charged <= quota, f"acct-a charged {charged} times with a quota of {quota}")
    ctx.check(busy > 0, "acct-a was never refused (no ERR busy)")
    with Conn(ctx.port) as other:
        reply = other.request(b"b1", b"PAY acct-b idem-1 100")
        ctx.check(reply.startswith(b"b1 OK charge="), f"acct-b's new PAY: {reply!r}")
        replay = other.request(b"b2", b"PAY acct-a idem-0 100")
        ctx.note(f"acct-a replay of idem-0: {replay[3:].decode('utf-8', 'replace')}")
    payments = stats(ctx.port).get("payments")
    ctx.details.update(tally=dict(tally), payments=payments)


@probe(11, "paylease", "a payment slower than its lease, duplicated on other connections",
       args=["--pay-latency-ms", "3000"])
def probe_paylease(ctx):
    request = b"PAY lease-k idem-1 250"
    a = ctx.connect(timeout=10)
    a.send(b"a1 " + request + b"\n")
    time.sleep(1.5)
    b = ctx.connect(timeout=10)
    b.send(b"b1 " + request + b"\n")
    time.sleep(0.5)
    with Conn(ctx.port) as leaving:        # a duplicate whose client leaves at once
        leaving.send(b"c1 " + request + b"\n")
    replies = {}
    for name, c, rid in ((b"a", a, b"a1"), (b"b", b, b"b1")):
        try:
            replies[name] = c.read_until(lambda l: l.startswith(rid + b" "), 8)[-1]
        except (OSError, EOFError, TimeoutError) as error:
            replies[name] = repr(error).encode()
    d = ctx.connect(timeout=10)
    replies[b"d"] = d.request(b"d1", request)
    payments = stats(ctx.port).get("payments")

    def charge(line):
        for part in line.split():
            if part.startswith(b"charge="):
                return part[7:]
        return None

    charges = {k: charge(v) for k, v in replies.items()}
    ctx.details.update(replies={k.decode(): v.decode("utf-8", "replace") for k, v in replies.items()},
                       payments=payments)
    ctx.note(" / ".join(v.decode("utf-8", "replace") for v in replies.values()) + f"; payments={payments}")
    ctx.check(None not in charges.values(), "a duplicate got no charge")
    ctx.check(len(set(charges.values())) == 1, f"charge ids differ: {charges}")
    ctx.check(b"replayed=true" in replies[b"d"], f"the later duplicate was not replayed: {replies[b'd']!r}")
    ctx.check(payments == 1, f"STATS payments={payments} (expected 1)")


@probe(12, "sigterm", "SIGTERM during a PAY storm with duplicates",
       args=["--pay-latency-ms", "200", "--shutdown-grace-s", "2"])
def probe_sigterm(ctx):
    grace = 2.0
    ctx.expect_exit = True
    ctx.check_control = False
    # Payments are drawn from a window that moves 1,000 pairs a second, so every connection
    # sends duplicates of payments still in flight (200 ms) when SIGTERM lands.
    storm_started = time.monotonic()
    connections = 4
    sent_ids = {}
    counters, conns, stop = [], [], threading.Event()
    for _ in range(connections):
        c = ctx.connect(timeout=5)
        counter = ReplyCounter(c.sock, keep=True)
        counter.start()
        counters.append(counter)
        conns.append(c)
    sent_after_term = collections.Counter()
    term_at = []

    def storm(index, c):
        rng = random.Random(index)
        n = 0
        while not stop.is_set():
            batch = []
            base = int((time.monotonic() - storm_started) * 1000)
            for _ in range(100):
                pair = base + rng.randrange(300)
                key, idem = b"k%d" % (pair % 50), b"i%d" % pair
                rid = b"c%d-%d" % (index, n)
                n += 1
                sent_ids[rid] = (key, idem)
                batch.append(b"%s PAY %s %s 100\n" % (rid, key, idem))
            try:
                c.sock.sendall(b"".join(batch))
            except OSError:
                return
            if term_at:
                sent_after_term[index] += len(batch)
            time.sleep(0.01)

    threads = [threading.Thread(target=storm, args=(i, c), daemon=True) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    term_at.append(time.monotonic())
    ctx.server.proc.send_signal(signal.SIGTERM)
    try:
        code = ctx.server.proc.wait(grace + 10)
    except subprocess.TimeoutExpired:
        code = None
    exit_s = time.monotonic() - term_at[0]
    stop.set()
    for t in threads:
        t.join(5)
    for counter in counters:
        counter.done.wait(5)
        counter.stop()
    charges = collections.defaultdict(set)
    tally = collections.Counter()
    for counter in counters:
        for rid, line in counter.replies.items():
            parts = line.split()
            status = parts[1] if len(parts) > 1 else b"?"
            if status == b"ERR" and len(parts) > 2:
                status = b"ERR " + parts[2]
            if any(p == b"replayed=true" for p in parts):
                status += b"+replayed"
            tally[status.decode()] += 1
            for part in parts:
                if part.startswith(b"charge=") and rid in sent_ids:
                    charges[sent_ids[rid]].add(part[7:])
    doubles = {k: v for k, v in charges.items() if len(v) > 1}
    replied = sum(tally.values())
    ctx.details.update(exit_code=code, exit_seconds=round(exit_s, 2), tally=dict(tally),
                       requests=len(sent_ids), charged_pairs=len(charges),
                       double_charged=[f"{k[0].decode()}/{k[1].decode()}: {sorted(x.decode() for x in v)}"
                                       for k, v in list(doubles.items())[:10]])
    ctx.note(f"exit {code} in {exit_s:.1f}s; {len(sent_ids)} sent, {replied} replies: {short_tally(tally)}")
    ctx.check(code == 0, f"exit code {code} after SIGTERM")
    ctx.check(code is not None and exit_s <= grace + 3, f"exit took {exit_s:.1f}s (grace {grace:.0f}s)")
    ctx.check(not doubles, f"{len(doubles)} (key, idem) pairs got more than one charge id")
    ctx.check(len(charges) > 0, "no charge at all before the shutdown")


HTTP_PAY_ACCOUNTS = 8       # http-pipelining: POST /pay cycles over this many accounts


class CPUMeter:
    """CPU used from its creation on, in cores: the server's and this script's (the client's own
    load skews the control connections on a small machine)."""

    def __init__(self, pid):
        self.pid = pid
        self.started = time.monotonic()
        self.server = cpu_seconds(pid)
        self.own = sum(os.times()[:2])

    def read(self):
        elapsed = max(1e-6, time.monotonic() - self.started)
        return {"seconds": round(elapsed, 1),
                "server_cores": round((cpu_seconds(self.pid) - self.server) / elapsed, 2),
                "client_cores": round((sum(os.times()[:2]) - self.own) / elapsed, 2)}


def tcp_memory_pages():
    """The host's TCP buffer memory in pages (/proc/net/sockstat), to compare with
    net.ipv4.tcp_mem: under its pressure threshold and above, every connection slows."""
    try:
        with open("/proc/net/sockstat") as f:
            for line in f:
                if line.startswith("TCP:"):
                    fields = line.split()
                    return int(fields[fields.index("mem") + 1])
    except (OSError, ValueError):
        return None
    return None


def tcp_mem_limits():
    """net.ipv4.tcp_mem: (low, pressure, high) in pages, or None."""
    try:
        with open("/proc/sys/net/ipv4/tcp_mem") as f:
            return tuple(int(x) for x in f.read().split())
    except (OSError, ValueError):
        return None


def unread_sample(ctx, peak):
    """A tick for pipeline_unread: keeps the RSS peak seen (peak[0]) and the host's TCP memory
    peak (peak[1], pages)."""
    def tick():
        rss = rss_bytes(ctx.pid)
        if rss is not None and rss > peak[0]:
            peak[0] = rss
        pages = tcp_memory_pages()
        if pages is not None and pages > peak[1]:
            peak[1] = pages
    return tick


def report_tcp_memory(ctx, peak):
    """Notes the host's TCP memory peak when it reached net.ipv4.tcp_mem's pressure threshold:
    then the kernel, not only the server, slows every connection (the control ones too)."""
    limits = tcp_mem_limits()
    ctx.details["tcp_mem_peak_pages"] = peak[1]
    ctx.details["tcp_mem_limits_pages"] = limits
    if limits and peak[1] >= limits[1]:
        ctx.note(f"host TCP memory reached {peak[1]} pages (tcp_mem pressure {limits[1]}, max {limits[2]})")


@probe(13, "http-pipelining", "one connection per route pipelines requests without reading", http=True)
def probe_http_pipelining(ctx):
    duration = ctx.n(60, 10)
    echo = http_bytes(b"POST", b"/echo", [(b"Content-Type", b"application/octet-stream")], b"x" * (4 * KiB))
    fixed = {
        "tap": http_bytes(b"POST", b"/tap/same"),
        "echo": echo,
        "metrics": http_bytes(b"GET", b"/metrics"),
        "healthz": http_bytes(b"GET", b"/healthz"),
    }
    names = list(fixed) + ["pay"]
    pays = [0]

    def source(i):
        if names[i] != "pay":
            return [fixed[names[i]]] * 64
        block = [pay_bytes(b"pipelined-%d" % n, b"pipeline-%d" % (n % HTTP_PAY_ACCOUNTS))
                 for n in range(pays[0], pays[0] + 64)]
        pays[0] += 64
        return block

    before, _ = ctx.sample()
    peak = [before, 0]
    conns = [ctx.connect_http(timeout=5, rcvbuf=4096) for _ in names]
    for c in conns:
        c.sock.setblocking(False)
    started = time.monotonic()
    ctx.monitor.phase("send")
    cpu = CPUMeter(ctx.pid)
    result = pipeline_unread([c.sock for c in conns], source, stall_s=3.0, duration=duration,
                             tick=unread_sample(ctx, peak))
    ctx.details["cpu_while_sending"] = cpu.read()
    ctx.monitor.phase("hold")
    # The connections stay open, unread, for the rest of the attack (and at least 3 s, while
    # what was read is answered and the answers pile up).
    end = max(started + duration, time.monotonic() + 3)
    while time.monotonic() < end:
        unread_sample(ctx, peak)()
        time.sleep(0.05)
    held, _ = ctx.sample()
    poller = select.poll()
    for c in conns:
        poller.register(c.sock, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
    hung_up = {fd for fd, _ in poller.poll(0)}
    closed_in_hold = [n for n, c in zip(names, conns) if c.sock.fileno() in hung_up]
    ctx.monitor.phase("close")
    close_reset(conns)
    returned, took = wait_rss_return(ctx.pid, before, HTTP_RETURN_MIB)
    ctx.monitor.phase("after")
    by_route = {name: {"sent_bytes": result["sent"][i], "requests": result["requests"][i],
                       "ended": result["ended"][i]} for i, name in enumerate(names)}
    ctx.details.update(routes=by_route, rss_held_mib=mib(held - before),
                       rss_after_close_mib=mib(returned - before) if returned is not None else None,
                       returned_in_s=round(took, 1) if took is not None else None)
    ctx.note("sent " + ", ".join(f"{n} {by_route[n]['sent_bytes'] // KiB} KiB/{by_route[n]['requests']} req"
                                 + ("" if by_route[n]["ended"] == "stalled" else f" ({by_route[n]['ended']})")
                                 for n in names))
    rise_after = (returned - before) / MiB if returned is not None else float("inf")
    ctx.note(f"RSS held +{(held - before) / MiB:.0f} MiB; returned after close: +{rise_after:.0f} MiB "
             f"(limit {HTTP_RETURN_MIB})")
    ctx.check(took is not None, f"RSS after close stayed {rise_after:.0f} MiB over before for "
                                f"{HTTP_RETURN_S:.0f}s (limit {HTTP_RETURN_MIB} MiB)")
    closed = [n for n in names if by_route[n]["ended"].startswith("send")]
    if closed:
        ctx.note(f"closed by the server while sending: {', '.join(closed)}")
    ctx.details["closed_by_the_server_while_held"] = closed_in_hold
    if closed_in_hold:
        ctx.note(f"closed by the server while held unread (--http-idle-timeout-s, 60 by default): "
                 f"{', '.join(closed_in_hold)}")
    report_tcp_memory(ctx, peak)
    ctx.rss_rise_limit_mib = HTTP_RISE_MIB


@probe(14, "http-nonreading", "connections pipeline 4 KiB POST /echo and never read", http=True,
       args=["--connection-buffers-mib", str(HTTP_BUDGET_MIB)],
       nofile=lambda config: config.http_nonreading_count + 1024)
def probe_http_nonreading(ctx):
    count = ctx.config.http_nonreading_count
    request = http_bytes(b"POST", b"/echo", [(b"Content-Type", b"application/octet-stream")], b"x" * (4 * KiB))
    block = [request] * 8
    before, _ = ctx.sample()
    peak = [before, 0]
    conns = []
    ctx.monitor.phase("connect")
    for i in range(count):
        try:
            conns.append(ctx.connect_http(timeout=5, rcvbuf=4096))
        except OSError as error:
            ctx.fail(f"connect {i + 1}/{count}: {error}")
            break
    for c in conns:
        c.sock.setblocking(False)
    ctx.monitor.phase("send")
    cpu = CPUMeter(ctx.pid)
    result = pipeline_unread([c.sock for c in conns], lambda i: block, stall_s=2.0, duration=ctx.n(90, 45),
                             cap=64 * MiB, tick=unread_sample(ctx, peak))
    ctx.details["cpu_while_sending"] = cpu.read()
    ctx.monitor.phase("hold")
    time.sleep(1.0)
    held, _ = ctx.sample()
    ctx.monitor.phase("close")
    close_reset(conns)
    returned, took = wait_rss_return(ctx.pid, before, HTTP_RETURN_MIB)
    ctx.monitor.phase("after")
    ended = collections.Counter(e.split(":")[0] for e in result["ended"])
    sent = sum(result["sent"])
    n = max(1, len(conns))
    ctx.details.update(connections=len(conns), sent_mib_per_connection=round(sent / n / MiB, 2),
                       requests_per_connection=round(sum(result["requests"]) / n, 1), ended=dict(ended),
                       rss_held_mib=mib(held - before), rss_held_per_connection_kib=round((held - before) / n / KiB),
                       rss_after_close_mib=mib(returned - before) if returned is not None else None,
                       returned_in_s=round(took, 1) if took is not None else None)
    rise_after = (returned - before) / MiB if returned is not None else float("inf")
    ctx.note(f"{len(conns)} conns, {sent / n / KiB:.0f} KiB / {sum(result['requests']) / n:.0f} requests sent each "
             f"({short_tally(ended)}); RSS held +{(held - before) / MiB:.0f} MiB "
             f"({(held - before) / n / KiB:.0f} KiB/conn)")
    ctx.note(f"returned after close: +{rise_after:.0f} MiB (limit {HTTP_RETURN_MIB})")
    ctx.check(took is not None, f"RSS after close stayed {rise_after:.0f} MiB over before for "
                                f"{HTTP_RETURN_S:.0f}s (limit {HTTP_RETURN_MIB} MiB)")
    report_tcp_memory(ctx, peak)
    ctx.rss_rise_limit_mib = HTTP_BUDGET_MIB + HTTP_OVERHEAD_MIB


def framing_cases():
    """The request-smuggling cases: (name, expectation, bytes, whether the first response is to
    a HEAD). Each case's smuggled request is its own `POST /pay` for the account `canary`.
    Expectations: "refuse": every response is a problem (400/413/431/501/505) with Date and
    Connection: close, and the server closes; "one": exactly one response, to the outer request
    (2xx or 4xx, not 201); "one-close": that, and Connection: close and the server closes."""
    cases = []
    host = b"Host: hostile\r\n"

    def add(name, expect, build, head=False):
        cases.append((name, expect, build(pay_bytes(b"smuggled-" + name.encode(), b"canary")), head))

    def post_echo(fields, body):
        return b"POST /echo HTTP/1.1\r\n" + host + fields + b"\r\n" + body

    # A body on a method that has no use for one is still its body: one response, to it.
    for method in (b"HEAD", b"GET", b"TRACE", b"DELETE", b"OPTIONS"):
        add("body-on-" + method.decode().lower(), "one",
            lambda s, m=method: m + b" /healthz HTTP/1.1\r\n" + host + b"Content-Length: %d\r\n\r\n" % len(s) + s,
            head=method == b"HEAD")
    # What follows a request that closes the connection is never read.
    add("connection-close", "one-close",
        lambda s: b"GET /healthz HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n" + s)
    # Content-Length that one parser reads differently from another.
    add("cl-space-before-colon", "refuse", lambda s: post_echo(b"Content-Length : %d\r\n" % len(s), s))
    add("cl-minus-zero", "refuse", lambda s: post_echo(b"Content-Length: -0\r\n", s))
    add("cl-plus", "refuse", lambda s: post_echo(b"Content-Length: +%d\r\n" % len(s), s))
    add("cl-two-different", "refuse", lambda s: post_echo(b"Content-Length: 0\r\nContent-Length: %d\r\n" % len(s), s))
    add("cl-two-equal", "refuse",
        lambda s: post_echo(b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(s), len(s)), s))
    add("cl-list", "refuse", lambda s: post_echo(b"Content-Length: %d, %d\r\n" % (len(s), len(s)), s))
    add("cl-wraps-64-bits", "refuse", lambda s: post_echo(b"Content-Length: %d\r\n" % ((1 << 64) + len(s)), s))
    add("cl-over-max-body", "refuse", lambda s: post_echo(b"Content-Length: %d\r\n" % (MiB + 1), s))
    # Content-Length and Transfer-Encoding together (CL.TE and TE.CL).
    add("cl-then-te", "refuse",
        lambda s: post_echo(b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % (5 + len(s)), b"0\r\n\r\n" + s))
    add("te-then-cl", "refuse",
        lambda s: post_echo(b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % (5 + len(s)), b"0\r\n\r\n" + s))
    # Transfer-Encoding another parser reads as chunked (or not): the empty chunked body then
    # the smuggled request.
    for name, field in (("te-identity", b"Transfer-Encoding: identity"),
                        ("te-space-before-colon", b"Transfer-Encoding : chunked"),
                        ("te-vertical-tab", b"Transfer-Encoding: \x0bchunked"),
                        ("te-chunked-twice", b"Transfer-Encoding: chunked, chunked"),
                        ("te-gzip-chunked", b"Transfer-Encoding: gzip, chunked"),
                        ("te-xchunked", b"Transfer-Encoding: xchunked"),
                        ("te-split-gzip-chunked", b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked"),
                        ("te-split-chunked-identity", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity"),
                        ("te-obs-fold", b"Transfer-Encoding:\r\n chunked"),
                        ("te-obs-fold-after-field", b"X-Pad: a\r\n Transfer-Encoding: chunked")):
        add(name, "refuse", lambda s, f=field: post_echo(f + b"\r\n", b"0\r\n\r\n" + s))
    add("te-http10", "refuse",
        lambda s: b"POST /echo HTTP/1.0\r\n" + host + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + s)
    # Line ends: a bare LF or CR hides a field from a parser that ends lines only at CRLF.
    add("bare-lf-line-ends", "refuse",
        lambda s: b"POST /echo HTTP/1.1\nHost: hostile\nContent-Length: %d\n\n" % len(s) + s)
    add("bare-lf-in-field", "refuse",
        lambda s: post_echo(b"X-Pad: a\nTransfer-Encoding: chunked\r\nContent-Length: %d\r\n" % (5 + len(s)),
                            b"0\r\n\r\n" + s))
    add("bare-cr-in-field", "refuse",
        lambda s: post_echo(b"X-Pad: a\rTransfer-Encoding: chunked\r\nContent-Length: %d\r\n" % (5 + len(s)),
                            b"0\r\n\r\n" + s))
    # Chunk sizes another parser reads differently (17 hex digits wrap to 5 in 64 bits).
    for name, size in (("chunk-size-0x", b"0x5"), ("chunk-size-leading-space", b" 5"),
                       ("chunk-size-trailing-space", b"5 "), ("chunk-size-negative", b"-5"),
                       ("chunk-size-17-hex-digits", b"10000000000000005")):
        add(name, "refuse", lambda s, z=size: post_echo(b"Transfer-Encoding: chunked\r\n",
                                                        z + b"\r\nhello\r\n0\r\n\r\n" + s))
    add("chunk-data-longer-than-size", "refuse",
        lambda s: post_echo(b"Transfer-Encoding: chunked\r\n", b"5\r\nhello, world\r\n0\r\n\r\n" + s))
    add("trailer-transfer-encoding", "refuse",
        lambda s: post_echo(b"Transfer-Encoding: chunked\r\n", b"0\r\nTransfer-Encoding: chunked\r\n\r\n" + s))
    # Field values and the head's shape.
    add("nul-in-field", "refuse", lambda s: b"GET /healthz HTTP/1.1\r\n" + host + b"X-Pad: a\x00b\r\n\r\n" + s)
    add("idempotency-key-nul", "refuse", lambda s: pay_bytes(b"order\x00-A", b"canary") + s)
    add("host-twice", "refuse", lambda s: b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" + s)
    add("no-host", "refuse", lambda s: b"GET /healthz HTTP/1.1\r\n\r\n" + s)
    add("leading-empty-line", "refuse", lambda s: b"\r\nGET /healthz HTTP/1.1\r\n" + host + b"\r\n" + s)
    add("unknown-method", "refuse", lambda s: b"SMUGGLE /healthz HTTP/1.1\r\n" + host + b"\r\n" + s)
    add("unknown-version", "refuse", lambda s: b"GET /healthz HTTP/2.0\r\n" + host + b"\r\n" + s)
    add("head-too-large", "refuse",
        lambda s: b"GET /healthz HTTP/1.1\r\n" + host + b"X-Pad: " + b"a" * (17 * KiB) + b"\r\n\r\n" + s)
    return cases


def judge_framing(expect, responses, ending):
    """What is wrong with a framing case's responses (an empty list: nothing)."""
    wrong = []
    if any(r.status == 201 for r in responses):
        wrong.append("a 201: a payment ran")
    if "mid-response" in ending or ending.startswith("garbage"):
        wrong.append(ending)
    if expect == "refuse":
        if not responses:
            wrong.append("no response")
        for r in responses:
            if r.status not in REFUSAL_STATUSES:
                wrong.append(f"status {r.status}")
            if not (r.field("content-type") or "").startswith("application/problem+json"):
                wrong.append(f"Content-Type {r.field('content-type')}")
            if r.field("date") is None:
                wrong.append("no Date")
            if not r.close:
                wrong.append("no Connection: close")
        if ending == "open":
            wrong.append(f"not closed after {FRAMING_READ_S:.0f}s")
        wrong = list(dict.fromkeys(wrong))     # one mention of each fault, however many responses
    else:
        if len(responses) != 1:
            wrong.append(f"{len(responses)} responses (expected 1)")
        if responses:
            first = responses[0]
            if not (200 <= first.status < 300 or 400 <= first.status < 500) or first.status == 201:
                wrong.append(f"status {first.status}")
            if first.field("date") is None:
                wrong.append("no Date")
            if expect == "one-close" and (not first.close or ending == "open"):
                wrong.append("no Connection: close" if not first.close else f"not closed after {FRAMING_READ_S:.0f}s")
    return wrong


@probe(15, "http-framing", "request smuggling: ambiguous framing, bad fields, bad keys", http=True)
def probe_http_framing(ctx):
    table, failed, any_201 = [], [], []

    def run(name, data, head=False):
        """Sends `data` on a fresh connection; every response until close or FRAMING_READ_S."""
        c = HTTPConn(ctx.http_port, timeout=5)
        send_error = None
        try:
            try:
                c.send(data)
            except OSError as error:          # the server may refuse before the last byte
                send_error = f"send: {error}"
            responses, ending = c.read_responses(FRAMING_READ_S, head_first=head)
        finally:
            c.close()
        if any(r.status == 201 for r in responses):
            any_201.append(name)
        return responses, ending, send_error

    def record(name, expect, data, responses, ending, wrong):
        shown = " / ".join(r.summary() for r in responses) or "none"
        table.append(f"{name:<28} {expect:<9} {shown:<52} {ending:<7} {'ok' if not wrong else 'FAIL: ' + '; '.join(wrong)}")
        if wrong:
            failed.append({"case": name, "expect": expect, "sent": repr(data[:400]), "wrong": wrong, "ending": ending,
                           "responses": [{"status": r.status, "fields": r.fields, "body": repr(r.body[:300])}
                                         for r in responses]})
            ctx.fail(f"{name}: {'; '.join(wrong)} (got {shown}, {ending})")

    cases = framing_cases()
    for name, expect, data, head in cases:
        responses, ending, send_error = run(name, data, head)
        wrong = judge_framing(expect, responses, ending)
        record(name, expect, data, responses, ending + (f" ({send_error})" if send_error and wrong else ""), wrong)

    # Control bytes percent-encoded in a key: 400 bad-key.
    for code in (b"%00", b"%0d", b"%0a", b"%7f"):
        name = "tap-key-" + code.decode()
        data = http_bytes(b"POST", b"/tap/key" + code + b"x")
        responses, ending, _ = run(name, data)
        wrong = []
        if len(responses) != 1 or responses[0].status != 400 or responses[0].problem != "bad-key":
            wrong.append("expected exactly one 400 bad-key")
        if responses and not (responses[0].field("content-type") or "").startswith("application/problem+json"):
            wrong.append(f"Content-Type {responses[0].field('content-type')}")
        record(name, "bad-key", data, responses, ending, wrong)

    # A NUL in Idempotency-Key: two keys that differ after it are two refusals, no payment.
    payments_before = stats(ctx.port).get("payments")
    for suffix in (b"A", b"B"):
        name = "pay-idempotency-nul-" + suffix.decode()
        data = pay_bytes(b"order\x00-" + suffix, b"canary")
        responses, ending, _ = run(name, data)
        wrong = [] if [r.status for r in responses] == [400] else ["expected exactly one 400"]
        record(name, "400", data, responses, ending, wrong)
    time.sleep(0.3)     # a payment that ran would be done (--pay-latency-ms 20)
    payments_after_nul = stats(ctx.port).get("payments")
    ctx.check(payments_after_nul == payments_before,
              f"STATS payments {payments_before} -> {payments_after_nul} after two Idempotency-Keys with a NUL")

    payments = stats(ctx.port).get("payments")
    ctx.check(payments == 0, f"STATS payments={payments} after the cases (expected 0: a smuggled request ran)")
    ctx.check(not any_201, f"a 201 answered {', '.join(any_201)}")
    # The canary is real: the same request sent openly is charged, and counted.
    with HTTPConn(ctx.http_port, timeout=5) as c:
        control = c.roundtrip(pay_bytes(b"open-canary", b"canary"))
    time.sleep(0.1)
    payments_control = stats(ctx.port).get("payments")
    ctx.check(control.status == 201 and payments_control == (payments or 0) + 1,
              f"the canary sent openly: {control.summary()}, STATS payments {payments} -> {payments_control}")
    total = len(table)
    ctx.details.update(cases=table, failed_cases=failed, payments=payments)
    ctx.note(f"{total - len(failed)}/{total} cases as expected; STATS payments={payments}; "
             f"the canary sent openly: {control.status}")


class Resp:
    """A tiny blocking RESP2 (Redis) client: enough for PING, KEYS and HEXISTS."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buffer = b""

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.sock.close()

    def call(self, *args):
        args = [as_bytes(a) for a in args]
        self.sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        return self.read()

    def _take(self, count):
        while len(self.buffer) < count:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("redis closed the connection")
            self.buffer += data
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def _line(self):
        while b"\r\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("redis closed the connection")
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(f"redis: {rest.decode()}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            return None if int(rest) < 0 else self._take(int(rest) + 2)[:-2]
        if kind == b"*":
            return None if int(rest) < 0 else [self.read() for _ in range(int(rest))]
        raise RuntimeError(f"redis: unexpected reply {line[:60]!r}")


def start_redis(directory, log_path, persistent=False, port=None):
    """A throwaway redis-server in `directory`. Returns (process, port).
    `persistent`: an append-only file synced on every write (`--appendonly yes --appendfsync
    always`), so a restart in the same directory gets every acknowledged write back; otherwise
    no persistence at all, and a restart starts empty. `port`: listen there (a restart after
    a kill; tried for a few seconds), else on a free port."""
    persistence = ["--appendonly", "yes", "--appendfsync", "always"] if persistent else ["--appendonly", "no"]
    for _ in range(3 if port is None else 10):
        chosen = port or free_port()
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(["redis-server", "--port", str(chosen), "--bind", HOST, "--save", "",
                                     *persistence, "--dir", directory],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with Resp(chosen, timeout=1) as r:
                    if r.call("PING") == "PONG":
                        return proc, chosen
            except (OSError, EOFError, RuntimeError):
                time.sleep(0.05)
        proc.kill()
        proc.wait()
        if port is not None:
            time.sleep(0.5)
    raise RuntimeError(f"redis-server did not answer PING; log: {log_path}")


def restart_redis(proc, directory, log_path, port, persistent=False, down_s=0.0):
    """SIGKILLs `proc` (no shutdown, no final save) and, `down_s` later, starts a redis-server
    on the same port and directory: with `persistent` it loads its append-only file back, else
    it starts empty. Returns the new process."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    time.sleep(down_s)
    return start_redis(directory, log_path, persistent=persistent, port=port)[0]


DRAIN_ACCOUNTS = 20         # http-drain: accounts per trial, each paying on both instances
DRAIN_TERM_AFTER_S = 0.5    # ... SIGTERM this long after the payments are sent
DRAIN_EXIT_S = 15.0         # ... both instances exit 0 within this long
DRAIN_STATUSES = (201, 409, 503)


@probe(16, "http-drain", "SIGTERM mid-payment on two instances sharing Redis (needs redis-server)",
       requires="--redis")
def probe_http_drain(ctx):
    if shutil.which("redis-server") is None:
        raise Skip("redis-server is not on PATH")
    trials = ctx.n(20, 3)
    instance_args = ["--instances", "2", "--pay-latency-ms", "3000", "--drain-timeout-s", "1", "--loops", "2"]
    base = os.path.splitext(ctx.server.log_path)[0]
    directory = tempfile.mkdtemp(prefix="hostile-redis-")
    rows, totals = [], collections.Counter()
    records_seen = records_at_term = 0
    try:
        for trial in range(trials):
            redis, redis_port = start_redis(directory, base + "-redis.log")
            instances = []
            try:
                url = f"redis://{HOST}:{redis_port}/0"
                for letter in "ab":
                    instances.append(Server(ctx.config.binary, ["--redis", url, *instance_args],
                                            f"{base}-{letter}.log", http=True))
                results = []
                lock = threading.Lock()

                def pay(account, instance):
                    outcome = {"account": account, "instance": instance, "status": None, "charge": None}
                    try:
                        with HTTPConn(instances[instance].http_port, timeout=DRAIN_EXIT_S) as c:
                            response = c.roundtrip(pay_bytes(b"drain-%d-%d" % (trial, account), b"drain-%d" % account,
                                                             10 + account), timeout=DRAIN_EXIT_S)
                        outcome["status"] = response.status
                        if response.status == 201:
                            outcome["charge"] = json.loads(response.body)["charge"]
                    except (OSError, EOFError, TimeoutError, ValueError) as error:
                        outcome["error"] = f"{type(error).__name__}: {error}"
                    with lock:
                        results.append(outcome)

                threads = [threading.Thread(target=pay, args=(account, instance), daemon=True)
                           for account in range(DRAIN_ACCOUNTS) for instance in (0, 1)]
                for t in threads:
                    t.start()
                time.sleep(DRAIN_TERM_AFTER_S)
                # The payments' records as SIGTERM lands: the pattern below finds them (they
                # are running), so "none left running" after the drain is not vacuous.
                with Resp(redis_port) as r:
                    at_term = len(r.call("KEYS", "sluice:{pay:*}:r") or [])
                term_at = time.monotonic()
                for server in instances:
                    server.proc.send_signal(signal.SIGTERM)
                exits = []
                for server in instances:
                    try:
                        code = server.proc.wait(max(0.0, term_at + DRAIN_EXIT_S - time.monotonic()))
                        exits.append((code, round(time.monotonic() - term_at, 2)))
                    except subprocess.TimeoutExpired:
                        server.kill()
                        exits.append((None, DRAIN_EXIT_S))
                for t in threads:
                    t.join(DRAIN_EXIT_S)
                # Every record the drain left must have its result: a running one (no `result`
                # field) would block its (account, idem) until its lease ran out.
                with Resp(redis_port) as r:
                    keys = r.call("KEYS", "sluice:{pay:*}:r") or []
                    running = [k.decode() for k in keys if r.call("HEXISTS", k, "result") == 0]
            finally:
                for server in instances:
                    server.kill()
                redis.kill()
                redis.wait()
            records_seen += len(keys)
            statuses = collections.Counter(str(o["status"]) if o["status"] else "error" for o in results)
            totals.update(statuses)
            charges = collections.defaultdict(set)
            for o in results:
                if o["charge"]:
                    charges[o["account"]].add(o["charge"])
            doubles = {a: sorted(c) for a, c in charges.items() if len(c) > 1}
            wrong = []
            if any(code != 0 for code, _ in exits):
                wrong.append(f"exit {[code for code, _ in exits]} (expected 0, 0 within {DRAIN_EXIT_S:.0f}s)")
            unanswered = [o for o in results if o["status"] not in DRAIN_STATUSES]
            missing = len(threads) - len(results)
            if unanswered or missing:
                shown = [f"drain-{o['account']}@{'ab'[o['instance']]}: {o.get('error') or o['status']}"
                         for o in unanswered[:4]]
                wrong.append(f"{len(unanswered) + missing}/{len(threads)} not answered 201/409/503: {shown}")
            if doubles:
                wrong.append(f"{len(doubles)} accounts charged twice: {dict(list(doubles.items())[:3])}")
            if running:
                wrong.append(f"{len(running)} records left running: {running[:3]}")
            records_at_term += at_term
            rows.append({"trial": trial, "exits": exits, "statuses": dict(statuses), "records_at_term": at_term,
                         "records": len(keys),
                         "running": running, "double_charged": doubles, "wrong": wrong,
                         "errors": [o.get("error") for o in results if o.get("error")][:5]})
            if wrong:
                ctx.fail(f"trial {trial}: " + "; ".join(wrong))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        for suffix in ("-a.log", "-b.log", "-redis.log"):
            trim_log(base + suffix)
    passed = sum(1 for row in rows if not row["wrong"])
    slowest = max((s for row in rows for _, s in row["exits"]), default=None)
    ctx.details.update(trials=rows, statuses=dict(totals), records_at_term=records_at_term,
                       records_after=records_seen)
    ctx.note(f"{passed}/{trials} trials clean; {DRAIN_ACCOUNTS * 2 * trials} payments: {short_tally(totals)}; "
             f"slowest exit {slowest}s; Redis records at SIGTERM {records_at_term}, after the drain "
             f"{records_seen}, none may be running")
    ctx.check(records_at_term > 0, "no payment record in Redis at SIGTERM (the key pattern finds nothing)")


# --------------------------------------------------------------------------------------------
# Exactly-once under store faults (17-19): two instances share a store Redis (`--redis`); the
# simulated processor keeps its ledger of charges in a Redis of its own (`--processor-ledger`:
# judged) or in each instance's memory ("without a ledger": reported, but owner-pause judges it).

PAY_RETRY_S = 0.05          # pay-until-charged: a client tries again this long after an ERR or a broken connection
PAY_SETTLE_S = 5.0          # ... its thread is waited for this long past its deadline


def charge_id(text):
    """The charge id (`charge=`) in a reply, or None."""
    for part in text.split():
        if part.startswith("charge="):
            return part[7:]
    return None


def reply_kind(text):
    """A reply's kind for the tallies: `OK` with its flags (not the charge id), `ERR <code>`,
    or the name of the error a connection failed with."""
    parts = text.split()
    if not parts:
        return "empty"
    if parts[0] == "OK":
        return " ".join(["OK"] + [p for p in parts[1:] if not p.startswith("charge=")])
    if parts[0] == "ERR":
        return " ".join(parts[:2])
    return parts[0].rstrip(":")


def pay_until_charged(port, account, idem, amount, deadline):
    """A client on one instance: `PAY <account> <idem> <amount>` until it gets `OK charge=`,
    again PAY_RETRY_S after an `ERR` reply or a connection error (then on a new connection),
    until `deadline` (time.monotonic()). Returns {"charge": its id, or None when it never got
    one (unsettled), "replies": [(time.monotonic(), the reply without its id, or the error)]}."""
    outcome = {"charge": None, "replies": []}
    request = ("PAY %s %s %d" % (account, idem, amount)).encode()
    conn = None
    attempt = 0
    try:
        while time.monotonic() < deadline:
            attempt += 1
            rid = b"p%d" % attempt
            try:
                if conn is None:
                    conn = Conn(port, timeout=max(0.1, deadline - time.monotonic()))
                line = conn.request(rid, request, timeout=max(0.0, deadline - time.monotonic()))
                text = line[len(rid) + 1:].decode("utf-8", "replace")
            except (OSError, EOFError, TimeoutError) as error:
                text = f"{type(error).__name__}: {error}"
                if conn is not None:
                    conn.close()
                    conn = None
            outcome["replies"].append((time.monotonic(), text))
            if text.startswith("OK charge="):
                outcome["charge"] = charge_id(text)
                break
            time.sleep(PAY_RETRY_S)
    finally:
        if conn is not None:
            conn.close()
    return outcome


class PayClients:
    """Pay-until-charged clients, each in a thread on one instance; `outcomes` gets each one's
    outcome with its pair ((account, idem)) and its label (the instance's letter first)."""

    def __init__(self):
        self.outcomes = []
        self.threads = []
        self.lock = threading.Lock()

    def start(self, pair, label, port, amount, deadline):
        def run():
            outcome = pay_until_charged(port, pair[0], pair[1], amount, deadline)
            outcome.update(pair=pair, client=label)
            with self.lock:
                self.outcomes.append(outcome)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self, deadline):
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self.lock:
            return list(self.outcomes)


def charge_summary(outcomes, pairs):
    """The charge ids of each pair over every reply of `outcomes`, the clients that never got
    one ("<idem>@<label>"), and the tally of every reply by kind."""
    charges = {pair: set() for pair in pairs}
    unsettled = []
    tally = collections.Counter()
    for outcome in outcomes:
        for _, text in outcome["replies"]:
            tally[reply_kind(text)] += 1
            charge = charge_id(text)
            if charge:
                charges[outcome["pair"]].add(charge)
        if outcome["charge"] is None:
            unsettled.append(f"{outcome['pair'][1]}@{outcome['client']}")
    return charges, sorted(unsettled), tally


def doubles_shown(charges, limit=5):
    """The pairs with more than one charge id, as text (the first `limit`)."""
    return [f"{account}/{idem}: {', '.join(sorted(ids))}"
            for (account, idem), ids in charges.items() if len(ids) > 1][:limit]


class PaymentCluster:
    """One variant's servers: a store Redis (`persistent`: its append-only file survives a
    kill), a ledger Redis when `ledger`, and two sluice-echo instances (`instances`, a and b)
    with `--redis <store>`, `args` and `--processor-ledger <ledger>`. Logs:
    `<probe>-<tag>-{store,ledger,a,b}.log`."""

    def __init__(self, ctx, tag, args, ledger, persistent=False):
        self.base = f"{os.path.splitext(ctx.server.log_path)[0]}-{tag}"
        self.root = tempfile.mkdtemp(prefix="hostile-redis-")
        self.store_dir = os.path.join(self.root, "store")
        os.makedirs(self.store_dir)
        self.persistent = persistent
        self.store = self.ledger = self.ledger_port = None
        self.instances = []
        try:
            self.store, self.store_port = start_redis(self.store_dir, self.base + "-store.log", persistent=persistent)
            extra = []
            if ledger:
                ledger_dir = os.path.join(self.root, "ledger")
                os.makedirs(ledger_dir)
                self.ledger, self.ledger_port = start_redis(ledger_dir, self.base + "-ledger.log")
                extra = ["--processor-ledger", f"redis://{HOST}:{self.ledger_port}/0"]
            self.args = ["--redis", f"redis://{HOST}:{self.store_port}/0", *args, *extra]
            for letter in "ab":
                self.instances.append(Server(ctx.config.binary, self.args, f"{self.base}-{letter}.log"))
        except BaseException:
            self.close()
            raise

    def restart_store(self, down_s=0.0):
        """SIGKILLs the store Redis and starts it again `down_s` later on its port and folder
        (with its data when persistent, else empty)."""
        self.store = restart_redis(self.store, self.store_dir, self.base + "-store.log", self.store_port,
                                   persistent=self.persistent, down_s=down_s)

    def store_has(self, key):
        with Resp(self.store_port, timeout=1) as r:
            return r.call("EXISTS", key) == 1

    def ledger_entries(self):
        """The ledger's charge hashes (`ledger:pay:*`), or None without a ledger."""
        if self.ledger_port is None:
            return None
        with Resp(self.ledger_port) as r:
            return len(r.call("KEYS", "ledger:pay:*") or [])

    def pay_stats(self):
        """`payments`, `returned` and `stale` from STATS, summed over the instances."""
        total = collections.Counter()
        for server in self.instances:
            fields = stats(server.port)
            for name in ("payments", "returned", "stale"):
                total[name] += fields.get(name, 0)
        return {name: total[name] for name in ("payments", "returned", "stale")}

    def exited(self):
        """The instances that exited, as `a: code N | <their log's last lines>`."""
        return [f"{letter}: code {server.proc.returncode} | {server.log_tail(3)}"
                for letter, server in zip("ab", self.instances) if not server.alive()]

    def close(self):
        """Stops the instances (SIGTERM) and the Redis servers; returns the instances' exit codes."""
        codes = []
        for server in self.instances:
            if server.alive():
                os.kill(server.proc.pid, signal.SIGCONT)     # in case a probe left it stopped
            codes.append(server.stop()[0])
        for proc in (self.store, self.ledger):
            if proc is not None:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)
        for suffix in ("-store.log", "-ledger.log", "-a.log", "-b.log"):
            trim_log(self.base + suffix)
        return codes


def need_redis():
    if shutil.which("redis-server") is None:
        raise Skip("redis-server is not on PATH")


def judge_charges(ctx, judged, reported):
    """The checks store-outage and store-loss share: with the ledger (`judged`) every client
    charged, one charge id per payment, as many charges and ledger entries as payments; in
    either variant no instance exited. Without the ledger (`reported`) the rest is reported."""
    total = judged["pairs"]
    if judged["instances_exited"] or reported["instances_exited"]:
        ctx.fail(f"instances exited: ledger {judged['instances_exited']}, no ledger {reported['instances_exited']}")
    ctx.check(not judged["unsettled"],
              f"ledger: {judged['unsettled']} clients never charged: {judged['unsettled_clients']}")
    ctx.check(not judged["double_charged"], f"ledger: {judged['double_charged']} pairs with more than one "
                                            f"charge id: {judged['double_charged_pairs']}")
    ctx.check(judged["payments"] == total,
              f"ledger: payments={judged['payments']} over both instances (expected {total})")
    ctx.check(judged["ledger"] == total, f"ledger: {judged['ledger']} ledger entries (expected {total})")


OUTAGE_ROUNDS = 5           # store-outage: rounds (2 with --quick), one outage each
OUTAGE_PAIRS = 80           # ... payments a round (20 with --quick), each paid by a client on each instance
OUTAGE_ACCOUNTS = 16        # ... a payment's account: acct<pair % 16>; its idem: r<round>-<pair>
OUTAGE_AMOUNT = 25
OUTAGE_KILL_AFTER_S = 0.2   # ... the store Redis is SIGKILLed this long into a round
OUTAGE_DOWN_S = 3.0         # ... and started again on its port and append-only file this long after
OUTAGE_PAY_S = 60.0         # ... a client gives up this long after its round started
OUTAGE_ARGS = ["--instances", "2", "--loops", "2", "--pay-latency-ms", "400", "--pay-lease-ms", "1500",
               "--redis-timeout-ms", "500"]


def outage_variant(ctx, ledger, rounds, pairs):
    started = time.monotonic()
    cluster = PaymentCluster(ctx, "ledger" if ledger else "noledger", OUTAGE_ARGS, ledger, persistent=True)
    clients = PayClients()
    keys, restored = [], []
    try:
        for round_number in range(rounds):
            round_started = time.monotonic()
            deadline = round_started + OUTAGE_PAY_S
            for pair in range(pairs):
                key = (f"acct{pair % OUTAGE_ACCOUNTS}", f"r{round_number}-{pair}")
                keys.append(key)
                for letter, server in zip("ab", cluster.instances):
                    clients.start(key, letter, server.port, OUTAGE_AMOUNT, deadline)
            time.sleep(max(0.0, round_started + OUTAGE_KILL_AFTER_S - time.monotonic()))
            cluster.restart_store(down_s=OUTAGE_DOWN_S)
            # What the restart got back from the append-only file (the store's epoch marker
            # among it: else the store came back empty, which is store-loss, not this probe).
            with Resp(cluster.store_port) as r:
                restored.append({"keys": r.call("DBSIZE"), "epoch": r.call("EXISTS", "sluice:epoch") == 1})
            outcomes = clients.join(deadline + PAY_SETTLE_S)
        exited = cluster.exited()
        figures = cluster.pay_stats() if not exited else {}
        entries = cluster.ledger_entries()
    finally:
        codes = cluster.close()
    charges, unsettled, tally = charge_summary(outcomes, keys)
    doubles = sum(1 for ids in charges.values() if len(ids) > 1)
    payments = figures.get("payments")
    return {"pairs": len(keys), "double_charged": doubles, "unsettled": len(unsettled),
            "payments": payments, "returned": figures.get("returned"), "stale": figures.get("stale"),
            "ledger": entries, "extra_charges": None if payments is None else payments - len(keys),
            "unavailable": tally.get("ERR unavailable", 0), "tally": dict(tally), "restored": restored,
            "double_charged_pairs": doubles_shown(charges), "unsettled_clients": unsettled[:10],
            "instances_exited": exited, "exit_codes": codes, "instance_args": cluster.args,
            "seconds": round(time.monotonic() - started, 1)}


@probe(17, "store-outage", "the store Redis killed mid-payment, back 3 s later with its data (needs redis-server)",
       requires="--processor-ledger")
def probe_store_outage(ctx):
    need_redis()
    rounds, pairs = ctx.n(OUTAGE_ROUNDS, 2), ctx.n(OUTAGE_PAIRS, 20)
    judged = outage_variant(ctx, True, rounds, pairs)
    reported = outage_variant(ctx, False, rounds, pairs)
    ctx.details.update(ledger=judged, no_ledger=reported)
    ctx.note(f"ledger: {judged['pairs']} pairs, {judged['double_charged']} double-charged, "
             f"{judged['unsettled']} unsettled, payments={judged['payments']}, ledger={judged['ledger']}, "
             f"ERR unavailable {judged['unavailable']}; no ledger: {reported['pairs']} pairs, "
             f"{reported['double_charged']} double-charged, {reported['extra_charges']} extra charges, "
             f"{reported['unsettled']} unsettled")
    judge_charges(ctx, judged, reported)
    ctx.check(judged["unavailable"] > 0, "ledger: no ERR unavailable: the outage was not felt")
    for name, v in (("ledger", judged), ("no ledger", reported)):
        ctx.check(all(r["epoch"] for r in v["restored"]), f"{name}: a restarted store came back without "
                                                          f"sluice:epoch (its data was not restored): {v['restored']}")


PAUSE_TRIALS = 5            # owner-pause: trials per variant (2 with --quick)
PAUSE_ACCOUNT = "acct"      # ... each trial pays (acct, pause-<trial>)
PAUSE_AMOUNT = 30
PAUSE_RECORD_S = 5.0        # ... the owner's record appears in the store within this long
PAUSE_AFTER_RECORD_S = 0.3  # ... SIGSTOP the owner (instance a) this long after it appeared
PAUSE_STOP_S = 3.0          # ... SIGCONT it this long after the SIGSTOP
PAUSE_PAY_S = 40.0          # ... a client gives up this long after its trial started
PAUSE_ARGS = ["--instances", "2", "--pay-latency-ms", "3000", "--pay-lease-ms", "900"]


def pause_variant(ctx, ledger, trials):
    started = time.monotonic()
    cluster = PaymentCluster(ctx, "ledger" if ledger else "noledger", PAUSE_ARGS, ledger)
    a, b = cluster.instances
    rows = []
    try:
        for trial in range(trials):
            key = (PAUSE_ACCOUNT, f"pause-{trial}")
            record = f"sluice:{{pay:{len(key[0])}:{key[0]}{key[1]}}}:r"
            before = cluster.pay_stats()["payments"]
            clients = PayClients()
            trial_started = time.monotonic()
            deadline = trial_started + PAUSE_PAY_S
            clients.start(key, "a", a.port, PAUSE_AMOUNT, deadline)
            appeared = None
            while time.monotonic() < trial_started + PAUSE_RECORD_S:
                if cluster.store_has(record):
                    appeared = time.monotonic() - trial_started
                    break
                time.sleep(0.01)
            stopped_at = None
            try:
                if appeared is not None:
                    time.sleep(PAUSE_AFTER_RECORD_S)
                    os.kill(a.proc.pid, signal.SIGSTOP)
                    stopped_at = time.monotonic()
                    clients.start(key, "b", b.port, PAUSE_AMOUNT, deadline)
                    time.sleep(max(0.0, stopped_at + PAUSE_STOP_S - time.monotonic()))
            finally:
                if stopped_at is not None:
                    os.kill(a.proc.pid, signal.SIGCONT)
            outcomes = {o["client"]: o for o in clients.join(deadline + PAY_SETTLE_S)}
            exited = cluster.exited()
            after = cluster.pay_stats()["payments"] if not exited else None
            charges = {o["charge"] for o in outcomes.values()}
            first = {label: reply_kind(o["replies"][0][1]) if o["replies"] else None for label, o in outcomes.items()}
            wrong = []
            if appeared is None:
                wrong.append(f"the record {record} did not appear within {PAUSE_RECORD_S:.0f}s")
            if exited:
                wrong.append(f"instances exited: {exited}")
            settled = [label for label in "ab" if outcomes.get(label, {}).get("charge")]
            if settled != ["a", "b"]:
                wrong.append(f"settled: {settled or 'none'} (expected a and b)")
            if len(charges - {None}) > 1:
                wrong.append(f"charge ids differ: {sorted(charges - {None})}")
            if after is None or after - before != 1:
                wrong.append(f"payments rose by {None if after is None else after - before} (expected 1)")
            rows.append({"trial": trial, "record_after_s": None if appeared is None else round(appeared, 2),
                         "a_first": first.get("a"), "b_first": first.get("b"),
                         "replies": {label: [f"+{t - trial_started:.2f}s {text}" for t, text in o["replies"]][:12]
                                     for label, o in outcomes.items()},
                         "charges": sorted(charges - {None}),
                         "payments_rise": None if after is None else after - before, "wrong": wrong})
            if exited:
                break
        figures = cluster.pay_stats() if not cluster.exited() else {}
        entries = cluster.ledger_entries()
    finally:
        codes = cluster.close()
    return {"trials": rows, "clean": sum(1 for row in rows if not row["wrong"]),
            "payments": figures.get("payments"), "returned": figures.get("returned"), "stale": figures.get("stale"),
            "ledger": entries, "a_first": dict(collections.Counter(row["a_first"] for row in rows)),
            "b_first": dict(collections.Counter(row["b_first"] for row in rows)),
            "exit_codes": codes, "instance_args": cluster.args, "seconds": round(time.monotonic() - started, 1)}


@probe(18, "owner-pause", "the paying instance SIGSTOPped past its lease; the other takes the payment over",
       requires="--processor-ledger")
def probe_owner_pause(ctx):
    need_redis()
    trials = ctx.n(PAUSE_TRIALS, 2)
    variants = {"ledger": pause_variant(ctx, True, trials), "no ledger": pause_variant(ctx, False, trials)}
    ctx.details.update(ledger=variants["ledger"], no_ledger=variants["no ledger"])
    ctx.note("; ".join(f"{name}: {v['clean']}/{trials} trials clean, payments={v['payments']}"
                       + (f", ledger={v['ledger']}" if v["ledger"] is not None else "")
                       + f", returned={v['returned']}, stale={v['stale']}; a first got {short_tally(v['a_first'])}"
                       for name, v in variants.items()))
    for name, v in variants.items():
        for row in v["trials"]:
            if row["wrong"]:
                ctx.fail(f"{name}, trial {row['trial']}: " + "; ".join(row["wrong"]))
        ctx.check(v["payments"] == trials, f"{name}: payments={v['payments']} over both instances (expected {trials})")
    ledger = variants["ledger"]["ledger"]
    ctx.check(ledger == trials, f"ledger: {ledger} ledger entries (expected {trials})")


LOSS_DONE = 10              # store-loss: payments completed before the loss (done-<i>), alternating instances
LOSS_RUNNING = 10           # ... payments sent to instance a just before it (running-<i>)
LOSS_ACCOUNT = "acct"
LOSS_AMOUNT = 40
LOSS_RESTART_AFTER_S = 0.3  # ... the store Redis restarts empty this long after the running ones were sent
LOSS_PAY_S = 60.0           # ... a client gives up this long after its phase started
LOSS_MARK = " guarantee=store-data-lost"
LOSS_ARGS = ["--instances", "2", "--pay-latency-ms", "1000", "--pay-lease-ms", "1500"]


def loss_variant(ctx, ledger):
    started = time.monotonic()
    cluster = PaymentCluster(ctx, "ledger" if ledger else "noledger", LOSS_ARGS, ledger)
    a, b = cluster.instances
    done = [(LOSS_ACCOUNT, f"done-{i}") for i in range(LOSS_DONE)]
    running = [(LOSS_ACCOUNT, f"running-{i}") for i in range(LOSS_RUNNING)]
    clients = PayClients()
    fresh = {}
    try:
        deadline = time.monotonic() + LOSS_PAY_S
        for i, key in enumerate(done):
            letter = "ab"[i % 2]
            clients.start(key, letter + "-before", cluster.instances[i % 2].port, LOSS_AMOUNT, deadline)
        clients.join(deadline + PAY_SETTLE_S)
        sent_at = time.monotonic()
        deadline = sent_at + LOSS_PAY_S
        for key in running:
            clients.start(key, "a-original", a.port, LOSS_AMOUNT, deadline)
        time.sleep(max(0.0, sent_at + LOSS_RESTART_AFTER_S - time.monotonic()))
        cluster.restart_store()
        restarted_at = time.monotonic()
        for key in done + running:
            for letter, server in zip("ab", cluster.instances):
                clients.start(key, letter + "-after", server.port, LOSS_AMOUNT, deadline)
        outcomes = clients.join(deadline + PAY_SETTLE_S)
        exited = cluster.exited()
        figures = cluster.pay_stats() if not exited else {}
        entries = cluster.ledger_entries()
        fresh_clients = PayClients()
        if not exited:
            fresh_deadline = time.monotonic() + LOSS_PAY_S
            for letter, server in zip("ab", cluster.instances):
                fresh_clients.start((LOSS_ACCOUNT, f"fresh-{letter}"), letter, server.port, LOSS_AMOUNT, fresh_deadline)
            fresh = {o["client"]: (o["replies"][-1][1] if o["replies"] else None)
                     for o in fresh_clients.join(fresh_deadline + PAY_SETTLE_S)}
    finally:
        codes = cluster.close()
    charges, unsettled, tally = charge_summary(outcomes, done + running)
    doubles = sum(1 for ids in charges.values() if len(ids) > 1)
    marked = collections.Counter()
    for outcome in outcomes:
        for t, text in outcome["replies"]:
            if t > restarted_at and text.endswith(LOSS_MARK):
                marked[outcome["client"][0]] += 1
    payments = figures.get("payments")
    total = len(done) + len(running)
    return {"pairs": total, "double_charged": doubles, "unsettled": len(unsettled),
            "payments": payments, "returned": figures.get("returned"), "stale": figures.get("stale"),
            "ledger": entries, "extra_charges": None if payments is None else payments - total,
            "marked_after_restart": {letter: marked[letter] for letter in "ab"}, "fresh": fresh,
            "tally": dict(tally), "double_charged_pairs": doubles_shown(charges), "unsettled_clients": unsettled[:10],
            "instances_exited": exited, "exit_codes": codes, "instance_args": cluster.args,
            "seconds": round(time.monotonic() - started, 1)}


@probe(19, "store-loss", "the store Redis restarts empty mid-payment, two instances (needs redis-server)",
       requires="--processor-ledger")
def probe_store_loss(ctx):
    need_redis()
    judged = loss_variant(ctx, True)
    reported = loss_variant(ctx, False)
    ctx.details.update(ledger=judged, no_ledger=reported)

    def marks(v):
        fresh = "/".join("marked" if (v["fresh"].get(letter) or "").endswith(LOSS_MARK) else "unmarked"
                         for letter in "ab")
        return (f"store-data-lost after the restart a={v['marked_after_restart']['a']} "
                f"b={v['marked_after_restart']['b']}, fresh payments {fresh}")

    ctx.note(f"ledger: {judged['pairs']} pairs, {judged['double_charged']} double-charged, "
             f"{judged['unsettled']} unsettled, payments={judged['payments']}, ledger={judged['ledger']}, "
             f"{marks(judged)}; no ledger: {reported['pairs']} pairs, {reported['double_charged']} double-charged, "
             f"{reported['extra_charges']} extra charges, {reported['unsettled']} unsettled, {marks(reported)}")
    judge_charges(ctx, judged, reported)
    for letter in "ab":
        ctx.check(judged["marked_after_restart"][letter] > 0,
                  f"ledger: no reply from instance {letter} after the restart ends with{LOSS_MARK}")
        reply = judged["fresh"].get(letter)
        ctx.check(reply is not None and reply.endswith(LOSS_MARK),
                  f"ledger: a fresh payment on instance {letter} got {reply!r} (expected it to end with{LOSS_MARK})")


TAKEN_EXIT_S = 10.0         # port-taken: a server given a taken port exits non-zero within this long
REUSE_START_S = 10.0        # ... the two --reuse-port servers log "listening" within this long
REUSE_PINGS = 10            # ... PINGs on their shared port, each on a new connection


@probe(20, "port-taken", "a second server on a taken line or HTTP port; two sharing one with --reuse-port",
       requires="--reuse-port", http=True)
def probe_port_taken(ctx):
    binary = ctx.config.binary
    base = os.path.splitext(ctx.server.log_path)[0]
    attempts = {}
    for name, port, args in (("line", ctx.port, ["--port", str(ctx.port), "--http-port", "0"]),
                             ("http", ctx.http_port, ["--port", "0", "--http-port", str(ctx.http_port)])):
        started = time.monotonic()
        try:
            done = subprocess.run([binary, *args], stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=TAKEN_EXIT_S)
            code, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as error:     # run() killed it
            code, out, err = None, error.stdout or b"", error.stderr or b""
        seconds = time.monotonic() - started
        with open(f"{base}-taken-{name}.log", "wb") as log:
            log.write(out + err)
        err = err.decode("utf-8", "replace")
        want = f"port {port} is already served by another socket"
        attempts[name] = {"args": args, "code": code, "seconds": round(seconds, 2), "message": want in err,
                          "stderr": err.strip().splitlines()[-3:]}
        ctx.check(code is not None and code != 0,
                  f"a server on the taken {name} port {port}: " +
                  (f"still running after {TAKEN_EXIT_S:.0f}s" if code is None else f"exit code {code}"))
        ctx.check(want in err, f"a server on the taken {name} port: stderr lacks {want!r}: {attempts[name]['stderr']}")
    port = free_port()
    servers, logs = [], []
    reuse = {"port": port}
    try:
        for letter in "ab":
            logs.append(f"{base}-reuse-{letter}.log")
            with open(logs[-1], "ab") as log:
                servers.append(subprocess.Popen([binary, "--port", str(port), "--http-port", "0", "--reuse-port"],
                                                stdin=subprocess.DEVNULL, stdout=log, stderr=log))
        listening = [False, False]
        deadline = time.monotonic() + REUSE_START_S
        while not all(listening) and time.monotonic() < deadline and all(s.poll() is None for s in servers):
            for i, path in enumerate(logs):
                with open(path, "rb") as f:
                    listening[i] = any(b"listening" in line and b"port=%d" % port in line for line in f)
            time.sleep(0.05)
        reuse["listening"] = listening
        reuse["exited_early"] = [s.poll() for s in servers]
        ctx.check(all(listening), f"--reuse-port on {port}: listening a={listening[0]} b={listening[1]}, "
                                  f"exit codes {reuse['exited_early']}")
        pongs = 0
        failures = []
        for i in range(REUSE_PINGS):
            try:
                with Conn(port, timeout=5) as c:
                    reply = c.request(b"r%d" % i, b"PING")
                if reply == b"r%d PONG" % i:
                    pongs += 1
                else:
                    failures.append(reply.decode("utf-8", "replace"))
            except (OSError, EOFError, TimeoutError) as error:
                failures.append(f"{type(error).__name__}: {error}")
        reuse.update(pongs=pongs, failures=failures[:3])
        ctx.check(pongs == REUSE_PINGS, f"--reuse-port: {pongs}/{REUSE_PINGS} PINGs answered PONG: {failures[:3]}")
        codes = []
        for server in servers:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
        for server in servers:
            try:
                codes.append(server.wait(STOP_GRACE_S))
            except subprocess.TimeoutExpired:
                codes.append(None)
        reuse["exit_codes"] = codes
        ctx.check(codes == [0, 0], f"--reuse-port: exit codes after SIGTERM {codes} (expected 0, 0)")
    finally:
        for server in servers:
            if server.poll() is None:
                server.kill()
                server.wait()
    with Conn(ctx.port) as c:
        still = c.request(b"h1", b"PING")
    ctx.check(still == b"h1 PONG", f"the harness's server after the attempts: {still!r}")
    ctx.details.update(taken=attempts, reuse=reuse)
    ctx.note(f"taken line port: exit {attempts['line']['code']} in {attempts['line']['seconds']}s; taken HTTP port: "
             f"exit {attempts['http']['code']} in {attempts['http']['seconds']}s; --reuse-port x2: listening "
             f"{sum(reuse.get('listening', []))}/2, {reuse.get('pongs')}/{REUSE_PINGS} PONG, "
             f"exit {reuse.get('exit_codes')}")


HTTP_IDLE_KIB = 16          # http-idle: what an idle keep-alive connection may cost the server


@probe(21, "http-idle", "thousands of idle keep-alive HTTP connections", http=True,
       nofile=lambda config: config.idle_count + 1024)
def probe_http_idle(ctx):
    count = ctx.config.idle_count
    warm = 200
    request = http_bytes(b"GET", b"/healthz")

    def open_answered(n):
        """`n` keep-alive connections, each with one request answered: idle, kept open."""
        conns = []
        for _ in range(n):
            c = HTTPConn(ctx.http_port, timeout=10)
            c.sock.sendall(request)
            conns.append(c)
        bad = 0
        for c in conns:
            try:
                if c.read_response(timeout=10).status != 200:
                    bad += 1
            except (OSError, EOFError, TimeoutError):
                bad += 1
        return conns, bad

    # A first batch settles the allocator's arenas, so the measure below is the connections'.
    warmed, bad_warm = open_answered(warm)
    time.sleep(1)
    before = rss_bytes(ctx.pid)
    conns, bad = open_answered(count)
    time.sleep(1)
    after = rss_bytes(ctx.pid)
    ctx.check(bad + bad_warm == 0, f"{bad + bad_warm} connections got no 200 to GET /healthz")
    held = http_connections(ctx.http_port)
    ctx.check(held == count + warm + 2, f"/metrics counts {held} HTTP connections with {count + warm} idle")
    per_kib = (after - before) / 1024 / count
    ctx.details.update(connections=count, rss_before_mib=round(before / 2**20, 1),
                       rss_after_mib=round(after / 2**20, 1), rss_per_connection_kib=round(per_kib, 2))
    ctx.check(per_kib < HTTP_IDLE_KIB, f"an idle keep-alive connection costs {per_kib:.1f} KiB (limit {HTTP_IDLE_KIB})")
    ctx.note(f"{count} idle keep-alive connections: RSS +{(after - before) / 2**20:.1f} MiB, "
             f"{per_kib:.2f} KiB each (limit {HTTP_IDLE_KIB})")
    for c in conns + warmed:
        c.close()


EVICTION_ARGS = ["--limit-rate", "1", "--limit-period-ms", "60000", "--limit-burst", "0",
                  "--limit-table-mib", "1", "--limit-when-full", "remember",
                  "--tap-window-ms", "60000", "--tap-table-mib", "1", "--tap-tally-mib", "1",
                  "--tap-when-full", "remember"]


@probe(22, "eviction", "200,000 new keys through 1 MiB TAP and LIMIT tables that remember what they evict",
       args=EVICTION_ARGS)
def probe_eviction(ctx):
    """A key throttled and a key limited (one per 60 s each) before a flood of never-seen keys,
    one TAP and one LIMIT each, through tables far smaller than the flood: the victims are still
    refused after it, and at most 0.1 % of the new keys are refused (each is new: the exact
    limiter would let every one through)."""
    keys = ctx.n(200_000, 50_000)
    connections = 16
    with ctx.connect(timeout=10) as c:
        before = [c.request(b"v1", b"TAP eviction-victim"), c.request(b"v2", b"TAP eviction-victim"),
                  c.request(b"v3", b"LIMIT eviction-victim"), c.request(b"v4", b"LIMIT eviction-victim")]
    words = [reply.split(b" ")[1].decode() if len(reply.split(b" ")) > 1 else "?" for reply in before]
    ctx.details["victims_before"] = words
    ctx.check(words == ["OK", "THROTTLED", "OK", "LIMITED"], f"the victims before the flood: {words}")
    share = keys // connections
    refused_words = {"TAP": "THROTTLED", "LIMIT": "LIMITED"}
    for verb in ("LIMIT", "TAP"):
        ctx.monitor.phase(verb)
        conns = [ctx.connect(timeout=10) for _ in range(connections)]
        payloads = [b"".join(b"e%d %s new-%d-%d\n" % (j, verb.encode(), i, j) for j in range(share))
                    for i in range(connections)]
        started = time.monotonic()
        result = drive(conns, payloads, share, deadline=time.monotonic() + 50)
        elapsed = time.monotonic() - started
        tally = result["tally"]
        refused = tally.get(refused_words[verb], 0)
        ctx.details[verb] = {"replies": result["replies"], "seconds": round(elapsed, 1), "tally": dict(tally),
                             "wrongly_refused": refused, "share": refused / max(1, share * connections)}
        for conn in conns:
            conn.close()
        ctx.conns = [conn for conn in ctx.conns if conn not in conns]
        ctx.check(not result["errors"], f"{verb}: {result['errors'][:1]}")
        ctx.check(result["replies"] == share * connections,
                  f"{verb}: {result['replies']} replies to {share * connections} requests")
        ctx.check(tally.get("OK", 0) + refused == share * connections, f"{verb}: replies {short_tally(tally)}")
        ctx.check(refused <= share * connections // 1000,
                  f"{verb}: {refused} of {share * connections} new keys refused (limit 0.1 %)")
        ctx.note(f"{verb} {elapsed:.1f}s: {refused} of {share * connections} new keys refused")
    ctx.monitor.phase("after")
    with ctx.connect(timeout=10) as c:
        after = [c.request(b"v5", b"TAP eviction-victim"), c.request(b"v6", b"LIMIT eviction-victim")]
    words = [reply.split(b" ")[1].decode() if len(reply.split(b" ")) > 1 else "?" for reply in after]
    ctx.details["victims_after"] = words
    ctx.check(words == ["THROTTLED", "LIMITED"], f"the victims after the flood: {words}")
    ctx.note(f"victims after: TAP {words[0]}, LIMIT {words[1]}")
    evicted = stats(ctx.port).get("evicted")
    ctx.details["evicted"] = evicted
    ctx.rss_rise_limit_mib = 3 + 64     # the three tables' budgets + 64 MiB


@probe(23, "http-eviction", "300,000 POST /limit/<128-byte key> through a 16 MiB GCRA table, one per 60 s",
       http=True, args=["--limit-rate", "1", "--limit-period-ms", "60000", "--limit-burst", "0",
                        "--limit-table-mib", "16"])
def probe_http_eviction(ctx):
    """Never-seen 128-byte keys, one request each, through a table that holds a small part of
    them (the default choice when full: remember). Every request is answered 200, 503 (busy) or,
    for at most 0.1 %, 429 (a new key the summary mistook for a remembered one)."""
    keys = ctx.n(300_000, 60_000)
    connections = 8
    batch = 64
    share = keys // connections
    statuses = collections.Counter()
    errors = []
    lock = threading.Lock()

    def client(index):
        counts = collections.Counter()
        try:
            with HTTPConn(ctx.http_port, timeout=30) as conn:
                for start in range(0, share, batch):
                    count = min(batch, share - start)
                    conn.send(b"".join(http_bytes(b"POST", b"/limit/" + (b"%d-%d-" % (index, start + j)).ljust(128, b"k"))
                                       for j in range(count)))
                    for _ in range(count):
                        counts[conn.read_response(timeout=30).status] += 1
        except (OSError, EOFError, TimeoutError, ValueError) as error:
            with lock:
                errors.append(f"connection {index}: {error!r}")
        with lock:
            statuses.update(counts)

    ctx.monitor.phase("flood")
    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    elapsed = time.monotonic() - started
    ctx.monitor.phase("after")
    total = sum(statuses.values())
    ctx.details.update(statuses={str(k): v for k, v in statuses.items()}, seconds=round(elapsed, 1), errors=errors[:3])
    ctx.check(not errors, f"{errors[:1]}")
    ctx.check(total == share * connections, f"{total} responses to {share * connections} requests")
    ctx.check(set(statuses) <= {200, 429, 503}, f"statuses {dict(statuses)}")
    ctx.check(statuses.get(429, 0) <= share * connections // 1000,
              f"{statuses.get(429, 0)} of {share * connections} new keys limited (limit 0.1 %)")
    ctx.note(f"{elapsed:.1f}s: " + ", ".join(f"{k} x{v}" for k, v in sorted(statuses.items())))
    ctx.rss_rise_limit_mib = 16 + 64    # the table's budget + 64 MiB


# --------------------------------------------------------------------------------------------
# Main

def server_options(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    text = out.stdout + out.stderr
    return {word.rstrip(",=") for word in text.split() if word.startswith("--")}


def print_table(rows):
    header = ["#", "probe", "result", "RSS MiB b/p/a", "fds b/p/a", "ping worst", "p99", "healthz worst", "p99",
              "notes"]

    def cell(row):
        r, f, c, h = row["rss_mib"], row["fds"], row["control"], row.get("health") or {}
        fmt = lambda v: "-" if v is None else str(v)
        notes = "; ".join(row["failures"] + row["notes"]) if row["status"] == "FAIL" else "; ".join(row["notes"])
        return [str(row["number"]), row["probe"], row["status"],
                "/".join(fmt(r.get(k)) for k in ("before", "peak", "after")) if r else "-",
                "/".join(fmt(f.get(k)) for k in ("before", "peak", "after")) if f else "-",
                fmt(c.get("worst_ms")) if c else "-", fmt(c.get("p99_ms")) if c else "-",
                fmt(h.get("worst_ms")) if h else "-", fmt(h.get("p99_ms")) if h else "-", notes]

    cells = [cell(r) for r in rows]
    widths = [max(len(header[i]), *(len(c[i]) for c in cells)) for i in range(len(header) - 1)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)) + "  " + values[-1]
    print(line(header))
    print(line(["-" * w for w in widths] + ["-----"]))
    for c in cells:
        print(line(c))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", help="the sluice-echo to probe")
    parser.add_argument("--only", help="probes to run: names or numbers, comma-separated")
    parser.add_argument("--quick", action="store_true", help="smaller counts for a quick run")
    parser.add_argument("--out", help="JSON result path (default: out/hostile-<time>.json)")
    parser.add_argument("--list", action="store_true", help="list the probes and exit")
    parser.add_argument("--monitor", nargs=3, metavar=("PID", "PORT", "HTTP_PORT"), help=argparse.SUPPRESS)
    config = parser.parse_args()
    if config.monitor:
        monitor_main(int(config.monitor[0]), int(config.monitor[1]), int(config.monitor[2]) or None)
        return 0
    if config.list:
        for spec in PROBES:
            extra = f"  (needs {spec['requires']})" if spec["requires"] else ""
            http = "[HTTP] " if spec["http"] else "       "
            print(f"{spec['number']:2d} {spec['name']:<16} {http}{spec['title']}{extra}")
        return 0
    if not config.binary:
        parser.error("--binary is required")
    config.binary = os.path.abspath(config.binary)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    config.idle_count = min(1_000 if config.quick else 5_000, want - 1_200)
    config.pay_quota = 100 if config.quick else 1_000
    config.http_nonreading_count = min(200 if config.quick else 1_000, want - 1_200)
    config.server_options = server_options(config.binary)

    selected = PROBES
    if config.only:
        wanted = {w.strip() for w in config.only.split(",") if w.strip()}
        selected = [p for p in PROBES if p["name"] in wanted or str(p["number"]) in wanted]
        unknown = wanted - {p["name"] for p in selected} - {str(p["number"]) for p in selected}
        if unknown or not selected:
            parser.error(f"unknown probe(s): {', '.join(sorted(unknown)) or config.only} (see --list)")

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    log_dir = os.path.join(OUT_DIR, f"logs-{stamp}")
    os.makedirs(log_dir, exist_ok=True)
    missing = [o for o in ("--max-connections", "--line-timeout-s", "--max-in-flight", "--pay-records-per-key")
               if o not in config.server_options]
    print(f"sluice-echo: {config.binary}")
    print(f"mode: {'quick' if config.quick else 'full'}; options missing from the binary: {', '.join(missing) or 'none'}")
    rows = []
    for spec in selected:
        print(f"[{spec['number']:2d}] {spec['name']}: {spec['title']} ...", flush=True)
        row = run_probe(spec, config, log_dir)
        rows.append(row)
        summary = "; ".join(row["failures"][:2]) if row["status"] == "FAIL" else "; ".join(row["notes"][:2])
        print(f"     {row['status']} ({row['seconds']}s) {summary}", flush=True)
    print()
    print_table(rows)
    out = config.out or os.path.join(OUT_DIR, f"hostile-{stamp}{'-quick' if config.quick else ''}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    document = {"started_utc": stamp, "binary": config.binary, "quick": config.quick,
                "options_missing": missing,
                "limits": {"control_p99_ms": CONTROL_P99_MS, "control_worst_ms": CONTROL_WORST_MS,
                           "healthz_p99_ms": CONTROL_P99_MS, "healthz_worst_ms": CONTROL_WORST_MS,
                           "http_rise_mib": HTTP_RISE_MIB, "http_budget_mib": HTTP_BUDGET_MIB,
                           "http_overhead_mib": HTTP_OVERHEAD_MIB, "http_return_mib": HTTP_RETURN_MIB},
                "logs": os.path.relpath(log_dir, os.getcwd()), "probes": rows}
    with open(out, "w") as f:
        json.dump(document, f, indent=2, default=str)
    print(f"\nJSON: {os.path.relpath(out, os.getcwd())}   server logs: {os.path.relpath(log_dir, os.getcwd())}")
    failed = [r["probe"] for r in rows if r["status"] == "FAIL"]
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
