#!/usr/bin/env python3
"""Set a `go run ./bench -json` file beside a `bench/pytorch/bench.py --json` file.

    python3 bench/pytorch/compare.py go.json torch.json

Standard library only: runs anywhere, PyTorch not needed.
"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    go, pt = (json.load(open(p)) for p in sys.argv[1:])
    print(f"gocompile: {go['device']} ({go['device_kind']}), copy {go['copy_GBs']:.0f} GB/s")
    print(f"pytorch:   {pt['device']} ({pt['device_kind']}), copy {pt['copy_GBs']:.0f} GB/s, torch {pt.get('torch', '?')}")
    if go.get("quick") != pt.get("quick"):
        print("warning: one run used --quick and the other did not; sizes differ")
    rows = {r["name"]: r for r in pt["rows"]}
    print("%-32s %10s %10s %10s %10s %9s %9s %11s" % ("workload", "go eager", "go comp", "pt eager", "pt comp",
                                                     "go %copy", "pt %copy", "go/pt comp"))
    for g in go["rows"]:
        p = rows.get(g["name"])
        if p is None:
            continue
        print("%-32s %8.1fµs %8.1fµs %8.1fµs %8.1fµs %8.1f%% %8.1f%% %10.2fx" % (
            g["name"], g["eager_us"], g["compiled_us"], p["eager_us"], p["compiled_us"],
            g["compiled_pct_of_copy"], p["compiled_pct_of_copy"], g["compiled_us"] / p["compiled_us"]))


if __name__ == "__main__":
    main()
