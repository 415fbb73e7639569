#!/usr/bin/env python3
"""Hostile-client probes against sluice-echo (Python 3 standard library only, Linux: /proc).

Each probe starts its own sluice-echo on a free port, keeps a CONTROL connection open that sends
PING every 10 ms (in a separate monitor process, so the probe's own load does not skew it), samples
the server's RSS and open descriptors every 50 ms, runs its hostile clients, closes them, waits for
the server to settle and checks the result. See README.md next to this file.

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
import signal
import socket
import subprocess
import sys
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
CONTROL_WORST_MS = 1000.0   # ... and its worst PING
SETTLE_S = 15.0             # how long "after" waits for descriptors and RSS to settle
STOP_GRACE_S = 15.0         # how long the final SIGTERM may take


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

def monitor_main(pid, port):
    """Runs in its own process: PING every 10 ms on one connection, /proc samples every 50 ms.
    stdin: `phase NAME` starts a phase, `stop` (or EOF) ends; then one JSON line on stdout."""
    state = {"phase": "main"}
    lock = threading.Lock()
    latencies = []      # (phase, seconds)
    samples = []        # (phase, rss, fds)
    stop = threading.Event()
    info = {"broken": None, "unexpected": 0, "pending_ms": 0.0}
    started = time.monotonic()

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

    def summary(lat, smp):
        values = [x for _, x in lat]
        worst = max(values) if values else 0.0
        return {
            "pings": len(values),
            "worst_ms": round(worst * 1000, 1),
            "p99_ms": round((percentile(values, 0.99) or 0) * 1000, 1),
            "p50_ms": round((percentile(values, 0.50) or 0) * 1000, 2),
            "rss_peak": max((r for _, r, _ in smp), default=None),
            "fds_peak": max((f for _, _, f in smp), default=None),
        }

    with lock:
        result = summary(latencies, samples)
        phases = {}
        for name in dict.fromkeys([p for p, _ in latencies] + [p for p, _, _ in samples]):
            phases[name] = summary([x for x in latencies if x[0] == name], [s for s in samples if s[0] == name])
    result.update(info)
    result["phases"] = phases
    # A PING still unanswered at the end counts as that long a wait.
    result["worst_ms"] = round(max(result["worst_ms"], info["pending_ms"]), 1)
    print(json.dumps(result), flush=True)


class Monitor:
    def __init__(self, pid, port):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--monitor", str(pid), str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.proc.kill()
            raise RuntimeError("the control connection could not be opened")
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
        return self.result


# --------------------------------------------------------------------------------------------
# The server

def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, args, log_path, nofile=None):
        self.args = list(args)
        self.log_path = log_path
        self.nofile = nofile
        for _ in range(3):
            self.port = free_port()
            log = open(log_path, "ab")
            limit = nofile

            def preexec():
                if limit is not None:
                    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                    value = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
                    resource.setrlimit(resource.RLIMIT_NOFILE, (value, value))

            self.proc = subprocess.Popen(
                [binary, "--port", str(self.port), "--http-port", "0", *self.args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=preexec)
            log.close()
            if self.wait_ready(10):
                self.pid = self.proc.pid
                return
            self.kill()
        raise RuntimeError(f"sluice-echo did not answer PING; log: {log_path}")

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with Conn(self.port, timeout=1) as c:
                    if c.request(b"ready", b"PING", timeout=1) == b"ready PONG":
                        return True
            except OSError:
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


def probe(number, name, title, requires=None, measure_without=False, args=(), nofile=None):
    def register(function):
        PROBES.append(dict(number=number, name=name, title=title, requires=requires,
                           measure_without=measure_without, args=args if callable(args) else list(args), nofile=nofile,
                           function=function))
        return function
    return register


def run_probe(spec, config, log_dir):
    row = {"number": spec["number"], "probe": spec["name"], "title": spec["title"], "status": None,
           "rss_mib": {}, "fds": {}, "control": {}, "notes": [], "failures": [], "details": {}}
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
        server = Server(config.binary, args, log_path, nofile=nofile)
        monitor = Monitor(server.pid, server.port)
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
        connections_after = None
        if server.alive() and not ctx.expect_exit:
            after, connections_after = settle(ctx, before)
        control = monitor.stop()
        peak_rss = max(x for x in (control.get("rss_peak"), before[0], after[0]) if x is not None)
        peak_fds = max(x for x in (control.get("fds_peak"), before[1], after[1]) if x is not None)
        row["rss_mib"] = {"before": mib(before[0]), "peak": mib(peak_rss), "after": mib(after[0])}
        row["fds"] = {"before": before[1], "peak": peak_fds, "after": after[1]}
        row["control"] = {k: control.get(k) for k in ("pings", "worst_ms", "p99_ms", "p50_ms", "broken", "unexpected")}
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
            if control.get("broken"):
                ctx.fail(f"control connection broken: {control['broken']}")
            if ctx.check_control and control.get("worst_ms") is not None:
                if control["p99_ms"] > CONTROL_P99_MS or control["worst_ms"] > CONTROL_WORST_MS:
                    ctx.fail(f"control PING p99 {control['p99_ms']} ms / worst {control['worst_ms']} ms "
                             f"(limits {CONTROL_P99_MS:.0f} / {CONTROL_WORST_MS:.0f})")
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
    (and the asking one), and RSS holds still for a second; or until the deadline."""
    deadline = time.monotonic() + ctx.settle_s
    last_rss, stable_since, connections = None, None, None
    while True:
        rss, fds = ctx.sample()
        if rss is None:
            return (None, None), None
        try:
            connections = stats(ctx.port, timeout=2).get("connections")
        except (OSError, EOFError, TimeoutError):
            connections = None
        now = time.monotonic()
        if last_rss is not None and abs(rss - last_rss) < MiB:
            stable_since = stable_since or now
        else:
            stable_since = None
        last_rss = rss
        settled = fds <= before[1] and connections == 2 and stable_since and now - stable_since >= 1.0
        if settled or now > deadline:
            return (rss, fds), connections
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
    while not all(done) and time.monotonic() < deadline:
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


@probe(9, "flood", "1M-key floods of TAP, LIMIT, PAGE, SEARCH, PAY (replies read)",
       args=[f"--{t}-table-mib={TABLE_MIB}" for t in ("tap", "pay", "search", "limit", "page")])
def probe_flood(ctx):
    keys = ctx.n(1_000_000, 100_000)
    # --max-in-flight caps each connection's pending requests; a client that wants to fill the
    # tables opens many connections.
    per_conn_count = ctx.n(256, 64)
    budget = 5 * TABLE_MIB + 64
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
        flooded += 1
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


# --------------------------------------------------------------------------------------------
# Main

def server_options(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    text = out.stdout + out.stderr
    return {word.rstrip(",=") for word in text.split() if word.startswith("--")}


def print_table(rows):
    header = ["#", "probe", "result", "RSS MiB b/p/a", "fds b/p/a", "ping worst", "p99", "notes"]

    def cell(row):
        r, f, c = row["rss_mib"], row["fds"], row["control"]
        fmt = lambda v: "-" if v is None else str(v)
        notes = "; ".join(row["failures"] + row["notes"]) if row["status"] == "FAIL" else "; ".join(row["notes"])
        return [str(row["number"]), row["probe"], row["status"],
                "/".join(fmt(r.get(k)) for k in ("before", "peak", "after")) if r else "-",
                "/".join(fmt(f.get(k)) for k in ("before", "peak", "after")) if f else "-",
                fmt(c.get("worst_ms")) if c else "-", fmt(c.get("p99_ms")) if c else "-", notes]

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
    parser.add_argument("--monitor", nargs=2, metavar=("PID", "PORT"), help=argparse.SUPPRESS)
    config = parser.parse_args()
    if config.monitor:
        monitor_main(int(config.monitor[0]), int(config.monitor[1]))
        return 0
    if config.list:
        for spec in PROBES:
            extra = f"  (needs {spec['requires']})" if spec["requires"] else ""
            print(f"{spec['number']:2d} {spec['name']:<11} {spec['title']}{extra}")
        return 0
    if not config.binary:
        parser.error("--binary is required")
    config.binary = os.path.abspath(config.binary)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    config.idle_count = min(1_000 if config.quick else 5_000, want - 1_200)
    config.pay_quota = 100 if config.quick else 1_000
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
                "options_missing": missing, "limits": {"control_p99_ms": CONTROL_P99_MS,
                                                       "control_worst_ms": CONTROL_WORST_MS},
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
