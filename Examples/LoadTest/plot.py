"""Latency percentile plot for run.sh: one line per scenario (sluice-load --json files)."""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out_dir = pathlib.Path(sys.argv[1])
target = sys.argv[2]
labels = ["p50", "p90", "p99", "p99.9", "max"]
keys = ["p50", "p90", "p99", "p999", "max"]
fig, ax = plt.subplots(figsize=(8, 5))
for path in sorted(out_dir.glob("*.json")):
    if path.stem.startswith("echo-") and path.stem.endswith("-1"):
        continue  # the ECHO warm-up round
    data = json.loads(path.read_text())
    latency = data["latencyMicroseconds"]
    ax.plot(labels, [latency[k] for k in keys], marker="o", label=path.stem)
ax.set_yscale("log")
ax.set_ylabel("latency (µs, log scale)")
ax.set_title("sluice-load latency percentiles per scenario")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize="small")
fig.tight_layout()
fig.savefig(target, dpi=120)
