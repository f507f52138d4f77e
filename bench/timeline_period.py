#!/usr/bin/env python3
"""Is the simulated timeline periodic inside a step?  Reads a run's ops.csv
and, stage by stage, compares each unit (one model chunk's forward or backward
of one micro-batch: the rows issued between changes of phase or micro-batch;
recomputed rows say forward, so a backward with recompute makes several units)
with the earlier units of the same phase over the same layers, nearest first
(up to DEPTH of them).  A unit is a shifted copy when every one of its rows starts and ends the same time after
its counterpart's row at the same place: then the device's timeline repeats
from the one to the other.  Prints, per stage, how many units were compared,
how many are shifted copies, and the distance (in units of the same kind) at
which most of those copies were found, with the shift that distance used last.

usage: bench/timeline_period.py RUN_DIR/ops.csv   (a run with steps=1)"""
import csv
import sys
from collections import Counter, defaultdict

DEPTH = 8  # earlier units of the same kind tried, nearest first


def units_of(path):
    units = defaultdict(list)  # device -> [(phase, mb, layers, rows)]
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["kind"] not in ("kernel", "recompute") or r["start_ns"] == "-1":
                continue
            dev = int(r["device"])
            key = (r["phase"], r["micro_batch"])
            us = units[dev]
            if not us or us[-1][0] != key:
                us.append((key, set(), []))
            if r["layer"] != "-1":
                us[-1][1].add(int(r["layer"]))
            us[-1][2].append((int(r["start_ns"]), int(r["end_ns"])))
    return units


def shift_of(rows, before):
    """The one time by which rows repeat before, or None."""
    if len(before) != len(rows):
        return None
    d = rows[0][0] - before[0][0]
    same = all(s - bs == d and e - be == d for (s, e), (bs, be) in zip(rows, before))
    return d if same else None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("stage  units compared  shifted copies  commonest distance (units, copies)  its shift (ns)")
    for dev, us in sorted(units_of(sys.argv[1]).items()):
        earlier, compared, copies, dist = defaultdict(list), 0, 0, Counter()
        shift = {}
        for (phase, _), layers, rows in us:
            seen = earlier[(phase, frozenset(layers))]
            compared += bool(seen)
            for back in range(1, min(DEPTH, len(seen)) + 1):
                d = shift_of(rows, seen[-back])
                if d is not None:
                    copies += 1
                    dist[back] += 1
                    shift[back] = d
                    break
            seen.append(rows)
        top = dist.most_common(1)
        common = f"{top[0][0]} ({top[0][1]})" if top else "-"
        print(f"{dev:<6d} {compared:<15d} {copies:<15d} {common:<35s} {shift[top[0][0]] if top else '-'}")


main()
