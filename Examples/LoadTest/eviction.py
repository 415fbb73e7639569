#!/usr/bin/env python3
"""A flood of never-seen keys through sluice-echo's TAP and LIMIT tables, started with tables far
smaller than the flood (see run.sh, section 7): one key throttled and one limited before it, then
one LIMIT and one TAP for each of --keys new keys over --connections pipelined connections, then
the two victims again.

Prints a Markdown table: per verb, the replies, how many new keys were refused (each is new, so
the exact limiter would let every one through), and the victim's reply before and after the
flood; then the server's RSS before and after. Exits non-zero when a check fails: a victim not
refused after the flood, more than 0.1 % of the new keys refused, a reply missing, or the RSS
rising more than --budget-mib.

Standard library only. Usage:
    eviction.py --port <line port> --pid <server pid> [--keys 1000000] [--connections 16]
"""

import argparse
import collections
import socket
import sys
import threading
import time

REFUSED = {"TAP": "THROTTLED", "LIMIT": "LIMITED"}


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return None


def ask(port, lines):
    """Sends `lines` (id, text) on a fresh connection; returns the status word of each reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"".join(b"%s %s\n" % (rid, text) for rid, text in lines))
        data = b""
        while data.count(b"\n") < len(lines):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return [line.split(b" ")[1].decode() if b" " in line else "?" for line in data.split(b"\n")[:len(lines)]]


def flood(port, verb, keys, connections, tag):
    """One `verb` for each of `keys` new keys, spread over `connections` connections that send
    everything pipelined and read as they go. Returns (status tally, replies, seconds)."""
    tally = collections.Counter()
    replies = [0]
    lock = threading.Lock()
    share = keys // connections

    def run(index):
        counts = collections.Counter()
        got = 0
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            payload = b"".join(b"%d %s %s-%d-%d\n" % (n, verb.encode(), tag, index, n) for n in range(share))
            sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
            sender.start()
            rest = b""
            while got < share:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                got += len(lines)
                for line in lines:
                    parts = line.split(b" ", 2)
                    counts[parts[1].decode() if len(parts) > 1 else "?"] += 1
            sender.join(10)
        with lock:
            tally.update(counts)
            replies[0] += got

    started = time.monotonic()
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    return tally, replies[0], share * connections, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--budget-mib", type=int, help="the tables' budgets together: the most the RSS may rise")
    args = parser.parse_args()

    rss_before = rss_mib(args.pid)
    before = ask(args.port, [(b"v1", b"TAP eviction-victim"), (b"v2", b"TAP eviction-victim"),
                             (b"v3", b"LIMIT eviction-victim"), (b"v4", b"LIMIT eviction-victim")])
    rows = []
    failures = []
    if before != ["OK", "THROTTLED", "OK", "LIMITED"]:
        failures.append(f"the victims before the flood answered {before}")
    results = {}
    for verb in ("LIMIT", "TAP"):
        results[verb] = flood(args.port, verb, args.keys, args.connections, b"new-" + verb.lower().encode())
    after = ask(args.port, [(b"v5", b"TAP eviction-victim"), (b"v6", b"LIMIT eviction-victim")])
    rss_after = rss_mib(args.pid)
    victim_after = {"TAP": after[0], "LIMIT": after[1]}
    victim_before = {"TAP": before[1], "LIMIT": before[3]}
    for verb in ("LIMIT", "TAP"):
        tally, got, sent, seconds = results[verb]
        refused = tally.get(REFUSED[verb], 0)
        share = refused / sent if sent else 0
        others = {k: v for k, v in tally.items() if k not in ("OK", REFUSED[verb])}
        rows.append(f"| {verb} | {sent:,} | {got:,} | {sent / seconds:,.0f} | {refused:,} ({share:.4%}) | "
                    f"{', '.join(f'{k} {v}' for k, v in others.items()) or 'none'} | "
                    f"{victim_before[verb]} | {victim_after[verb]} |")
        if got != sent:
            failures.append(f"{verb}: {got} replies to {sent} requests")
        if refused * 1000 > sent:
            failures.append(f"{verb}: {refused} of {sent} new keys refused (more than 0.1 %)")
        if victim_after[verb] != REFUSED[verb]:
            failures.append(f"{verb}: the victim answered {victim_after[verb]} after the flood")
    if args.budget_mib is not None and rss_after - rss_before > args.budget_mib:
        failures.append(f"the RSS rose {rss_after - rss_before} MiB, over the budgets' {args.budget_mib}")
    print("| verb | new keys | replies | req/s | new keys refused | other replies | victim before | victim after |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- | --- |")
    for row in rows:
        print(row)
    print()
    budget = f" (the tables' budgets: {args.budget_mib} MiB)" if args.budget_mib is not None else ""
    print(f"Server RSS: {rss_before} MiB before the flood, {rss_after} MiB after{budget}.")
    print()
    print("Checks: " + ("PASS" if not failures else "FAIL: " + "; ".join(failures)))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
