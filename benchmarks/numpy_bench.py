"""What numpy buys kgpu's base install: placement with and without the scheduler's array mode, seeded.

numpy is the largest part of the base install (measured with ``du`` over a clean venv of the built wheel;
docs/simulate.md, Performance). kube-scheduler's placement (``kgpu.sim.scheduler.scheduler``) has a heap path in pure
Python and an array mode in numpy that classes switch to beyond ``ARRAY_AFTER`` distinct pod specs; topology
spread, pod affinity, preemption and PreferNoSchedule / preferred-affinity scoring always use numpy. This
benchmark places the diverse input of ``sim_bench.py`` (5,000 nodes, 50,000 pods, 240 pod specs) twice in
fresh processes: as shipped, and with array mode switched off (``array_after`` beyond the number of
classes), which is the nearest to a numpy-free placement that exists. It also times ``import numpy``.
It prints figures and never asserts.

    python benchmarks/numpy_bench.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_bench import PENDING, generate_diverse

PLACE = """
import hashlib, json, sys, time
import kgpu.sim.scheduler.scheduler as scheduler
if sys.argv[3] == "heap":
    scheduler.Scheduler.__init__.__kwdefaults__["array_after"] = 10**9
from kgpu.model.load import parse_text
from kgpu.sim.simulate import simulate
cluster = parse_text(open(sys.argv[1], 'rb').read(), sys.argv[1])
work = parse_text(open(sys.argv[2], 'rb').read(), sys.argv[2])
t = time.perf_counter()
result = simulate(cluster, work)
placed = time.perf_counter() - t
nodes = {p["name"]: p["node"] for p in result.as_dict()["pods"]}
digest = hashlib.sha256(json.dumps(sorted(nodes.items())).encode()).hexdigest()
print(json.dumps({"place": placed, "summary": result.summary(), "digest": digest}))
"""

IMPORT = "import time; t = time.perf_counter(); import numpy; print(time.perf_counter() - t)"


def _run(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PLACE, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    directory = Path(os.environ.get("KGPU_BENCH_DIR", ".bench"))
    directory.mkdir(exist_ok=True)
    cluster, work = generate_diverse(directory)
    imports = sorted(
        float(subprocess.run([sys.executable, "-c", IMPORT], check=True, capture_output=True, text=True).stdout)
        for _ in range(3)
    )
    print(f"import numpy: {imports[1] * 1000:.0f} ms (median of 3)")
    rounds = int(os.environ.get("KGPU_BENCH_ROUNDS", "2"))
    best: dict[str, dict] = {}
    for _ in range(rounds):  # alternate, so both share the machine's state
        for mode in ("array", "heap"):
            r = _run(str(cluster), str(work), mode)
            if mode not in best or r["place"] < best[mode]["place"]:
                best[mode] = r
    for mode, what in (("array", "as shipped (array mode from 24 classes)"), ("heap", "array mode off")):
        r = best[mode]
        print(f"  {what}: place {r['place']:.2f}s = {PENDING / r['place']:,.0f} pods/s; {r['summary']}")
    same = best["array"]["digest"] == best["heap"]["digest"]
    print(f"  same placements: {same}; array mode is {best['heap']['place'] / best['array']['place']:.1f}x faster")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - t:.0f}s)")
