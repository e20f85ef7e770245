"""`make bench`: every seeded benchmark, one after another. They print figures; none asserts a time."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).parent
BENCHES = ["sim_bench.py", "provision_bench.py", "exporter_bench.py", "output_bench.py", "doctor_bench.py"]


def main() -> None:
    only = set(sys.argv[1:])
    for name in BENCHES:
        if only and name.removesuffix(".py") not in only and name not in only:
            continue
        path = HERE / name
        if not path.exists():
            print(f"(skipping {name}: not present)")
            continue
        print(f"== {name}")
        runpy.run_path(str(path), run_name="__main__")
        print()


if __name__ == "__main__":
    main()
