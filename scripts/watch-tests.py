#!/usr/bin/env python3
"""Runs a test command and fails it, with a diagnosis, when it stops making progress.

    scripts/watch-tests.py [--silence SECONDS] -- swift test ...

The command's standard output and error are passed through unchanged. When the command has
printed nothing for SECONDS (default 300, or SLUICE_TEST_SILENCE_SECONDS), the watchdog prints
the tests Swift Testing reported as started and not yet ended, dumps every thread of every
process under the command with gdb (when gdb is installed), names those tests again after the
dumps (a log kept only by its tail still shows them), kills the command's process group
and exits with status 124. A hung test then names itself instead of holding the run until an
outer timeout. Otherwise it exits with the command's own status.
"""

import argparse
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

ANSI = re.compile(rb"\x1b\[[0-9;]*m")
STARTED = re.compile(r"Test (.+?) started\.$")
ENDED = re.compile(r"Test (.+?) (?:passed|failed|skipped|recorded a known issue)\b")


def descendants(root):
    """The pids under `root` (itself included), read from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, queue = [], [root]
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def command_line(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def say(text):
    print(f"watch-tests: {text}", file=sys.stderr, flush=True)


def report_running(running, silence):
    """Names the tests reported as started and not ended."""
    say(f"no output for {silence} s; the test run looks hung")
    if running:
        say("tests started and not ended:")
        for name, count in running.items():
            say(f"  {name}" + (f" (x{count})" if count > 1 else ""))
    else:
        say("no test is reported as running")


def diagnose(process, running, silence):
    report_running(running, silence)
    gdb = shutil.which("gdb")
    for pid in descendants(process.pid):
        say(f"process {pid}: {command_line(pid)}")
        if gdb is None:
            continue
        subprocess.run(
            [gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
             "-ex", "thread apply all bt"],
            stdout=sys.stderr, stderr=subprocess.STDOUT, timeout=120, check=False)
    if gdb is None:
        say("gdb is not installed; no thread dump")
    else:
        # Again after the dumps, which are long: a log kept only by its tail still names them.
        report_running(running, silence)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silence", type=int,
                        default=int(os.environ.get("SLUICE_TEST_SILENCE_SECONDS", "300")))
    parser.add_argument("command", nargs=argparse.REMAINDER)
    arguments = parser.parse_args()
    command = arguments.command[1:] if arguments.command[:1] == ["--"] else arguments.command
    if not command:
        parser.error("no command given")

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    streams = {process.stdout.fileno(): sys.stdout.buffer,
               process.stderr.fileno(): sys.stderr.buffer}
    partial = {descriptor: b"" for descriptor in streams}
    running = {}
    last_output = time.monotonic()

    def forward_signal(number, _frame):
        os.killpg(process.pid, number)
    signal.signal(signal.SIGINT, forward_signal)
    signal.signal(signal.SIGTERM, forward_signal)

    while streams:
        ready, _, _ = select.select(list(streams), [], [], 5)
        for descriptor in ready:
            chunk = os.read(descriptor, 65536)
            if not chunk:
                del streams[descriptor]
                continue
            last_output = time.monotonic()
            out = streams[descriptor]
            out.write(chunk)
            out.flush()
            lines = (partial[descriptor] + chunk).split(b"\n")
            partial[descriptor] = lines.pop()
            for line in lines:
                text = ANSI.sub(b"", line).decode(errors="replace").rstrip()
                if started := STARTED.search(text):
                    running[started.group(1)] = running.get(started.group(1), 0) + 1
                elif ended := ENDED.search(text):
                    name = ended.group(1)
                    if running.get(name, 0) > 1:
                        running[name] -= 1
                    else:
                        running.pop(name, None)
        if streams and time.monotonic() - last_output > arguments.silence:
            diagnose(process, running, arguments.silence)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return 124
    return process.wait()


if __name__ == "__main__":
    sys.exit(main())
