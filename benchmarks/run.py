"""`make bench`: every seeded benchmark, one after another. They print figures; none asserts a time.

Each runs in its own process, so the peak RSS a benchmark prints is its own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
BENCHES = [
    "sim_bench.py", "provision_bench.py", "exporter_bench.py", "output_bench.py", "doctor_bench.py", "snapshot_bench.py",
    "numpy_bench.py", "sharing_bench.py", "dra_bench.py", "prod_bench.py", "trouble_bench.py", "queue_bench.py",
]
ARGS = {"prod_bench.py": ["150k"]}  # the whole 10k/50k/150k series (alone, without it: 10k and 50k)


def main() -> None:
    only = set(sys.argv[1:])
    for name in BENCHES:
        if only and name.removesuffix(".py") not in only and name not in only:
            continue
        path = HERE / name
        if not path.exists():
            print(f"(skipping {name}: not present)")
            continue
        print(f"== {name}", flush=True)
        subprocess.run([sys.executable, str(path), *ARGS.get(name, [])], check=False)
        print(flush=True)


if __name__ == "__main__":
    main()
