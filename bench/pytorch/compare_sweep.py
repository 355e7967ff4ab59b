#!/usr/bin/env python3
"""Join a `go run ./bench -sweep -json` file with `bench/pytorch/sweep.py --json` files.

    python3 bench/pytorch/compare_sweep.py go_sweep.json torch_sweep.json [more torch shards …]
    python3 bench/pytorch/compare_sweep.py --merge out.json torch_shard0.json torch_shard1.json …

The ratio is torch.compile's time over gocompile's compiled time for the
same case: above 1, gocompile is faster. Per category: the cases found in
both files, the geometric mean and the minimum of the ratio, each side's
median % of copy (non-latency cases); then the ten cases with the lowest
ratio and the geometric mean over all. Several PyTorch files (shards of the
timing pass) are read as one. --merge writes the shards' rows as one file.

Standard library only: runs anywhere, PyTorch not needed.
"""
import json
import math
import statistics
import sys


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def load_rows(paths):
    docs = [json.load(open(p)) for p in paths]
    rows = {}
    for d in docs:
        for r in d["rows"]:
            rows[r["id"]] = r
    return docs, rows


def merge(out, paths):
    docs, rows = load_rows(paths)
    m = dict(docs[0])
    m["rows"] = list(rows.values())
    m.pop("shard", None)
    m.pop("categories", None)
    with open(out, "w") as f:
        json.dump(m, f, indent=1)
        f.write("\n")
    print(f"wrote {out}: {len(m['rows'])} rows from {len(paths)} files")


def main():
    args = sys.argv[1:]
    if len(args) >= 3 and args[0] == "--merge":
        return merge(args[1], args[2:])
    if len(args) < 2:
        sys.exit(__doc__)
    go = json.load(open(args[0]))
    pdocs, prow = load_rows(args[1:])
    pt = pdocs[0]
    print(f"gocompile: {go['device']} ({go['device_kind']}), copy {go['copy_GBs']:.0f} GB/s, seed {go.get('seed')}, "
          f"{len(go['rows'])} cases")
    print(f"pytorch:   {pt['device']} ({pt['device_kind']}), copy {pt['copy_GBs']:.0f} GB/s, torch {pt.get('torch', '?')}, "
          f"{len(prow)} cases")
    if go.get("quick") != pt.get("quick"):
        print("warning: one run used --quick and the other did not; sizes differ")
    joined = []
    for g in go["rows"]:
        p = prow.get(g["id"])
        if p is None:
            continue
        if g.get("desc") != p.get("desc") or g.get("shape") != p.get("shape"):
            print(f"warning: {g['id']} differs between the files ({g.get('shape')} / {p.get('shape')}); skipped")
            continue
        joined.append((g, p, p["compiled_us"] / g["compiled_us"]))
    if not joined:
        sys.exit("no case is in both files")

    order = list(dict.fromkeys(g["category"] for g, _, _ in joined))
    head = "%-20s %6s %8s %14s %12s %12s %12s %14s"
    print()
    print(head % ("category", "cases", "latency", "geomean ratio", "min ratio", "go % copy", "pt % copy",
                  "eager go/pt"))
    for cat in order + ["all"]:
        js = [j for j in joined if cat == "all" or j[0]["category"] == cat]
        ratios = [r for _, _, r in js]
        nl = [(g, p) for g, p, _ in js if not g["latency"]]
        gp = statistics.median(g["compiled_pct_of_copy"] for g, _ in nl) if nl else float("nan")
        pp = statistics.median(p["compiled_pct_of_copy"] for _, p in nl) if nl else float("nan")
        eager = geomean([p["eager_us"] / g["eager_us"] for g, p, _ in js])
        print(f"{cat:<20s} {len(js):6d} {sum(g['latency'] for g, _, _ in js):8d} {geomean(ratios):13.2f}x "
              f"{min(ratios):11.2f}x {gp:11.1f}% {pp:11.1f}% {eager:13.2f}x")
    print("(ratio: torch.compile time / gocompile compiled time, above 1 is faster; % of copy: median over the "
          "non-latency cases; eager go/pt: torch eager time / gocompile eager time)")

    print("\nworst ten by ratio:")
    print("%-11s %-8s %-40s %10s %10s %8s %8s %8s  %s" % ("case", "dtype", "shapes", "go µs", "torch µs", "ratio",
                                                        "go %", "pt %", "program"))
    for g, p, r in sorted(joined, key=lambda j: j[2])[:10]:
        sh = g["shape"] if len(g["shape"]) <= 40 else g["shape"][:37] + "..."
        print(f"{g['id']:<11s} {g['dtype']:<8s} {sh:<40s} {g['compiled_us']:10.1f} {p['compiled_us']:10.1f} "
              f"{r:7.2f}x {g['compiled_pct_of_copy']:7.1f}% {p['compiled_pct_of_copy']:7.1f}%  {g['desc']}")
    below = [g["id"] for g, _, r in joined if r < 0.8]
    print(f"\noverall geomean {geomean([r for _, _, r in joined]):.2f}x over {len(joined)} cases; "
          f"{len(below)} below 0.8x" + (f": {', '.join(below)}" if below else ""))


if __name__ == "__main__":
    main()
