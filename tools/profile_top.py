"""The slowest gates of a run's JSON with their stages, peak memory and cache use: python3 profile_top.py RUN.json N."""

import json
import sys

doc = json.load(open(sys.argv[1]))
rows = [(r["seconds"], o["task"]["name"], g, r["profile"]) for o in doc["entries"] + doc["controls"]
        for g, r in o["gates"].items() if r.get("profile")]
host, gpu = (max(p[key] for *_, p in rows) for key in ("peak_host_mb", "peak_gpu_mb"))
print(f"references {doc['references']}, inputs {doc['inputs']['cache']}; peak host {host:.0f} MB, GPU {gpu:.0f} MB")
for seconds, name, gate, p in sorted(rows, key=lambda r: -r[0])[: int(sys.argv[2])]:
    stages = " ".join(f"{s}={p[s + '_s']:.1f}" for s in ("inputs", "reference", "launch", "compare", "other"))
    print(f"{name} g{gate} {seconds:.1f} s: {stages} host={p['peak_host_mb']:.0f}MB gpu={p['peak_gpu_mb']:.0f}MB")
