#!/usr/bin/env python3
"""Extract allocator replay data from PyTorch memory snapshots.

Provenance of tests/data/allocator/*.trace (read by
tests/unit/test_allocator_traces.c).  Run from the repository root:

    python3 tests/data/allocator/extract.py ../shared/traces tests/data/allocator

Each output file holds, one record per line:
    capacity BYTES            device memory the replay backend reports
    conf STRING               the snapshot's PYTORCH_CUDA_ALLOC_CONF (may be empty)
    seg ADDR SIZE SMALL N     a segment as it stood when the trace began,
    blk ADDR SIZE REQ ALLOC   followed by its N blocks (ALLOC 1: in use)
    ev ACTION ADDR SIZE       a trace entry; for oom ADDR is device_free

A trace does not start from an empty allocator: the starting state is the
final segments minus what the trace added plus what it freed.  Blocks in use
at the start and freed during the trace get round_size(requested) bytes.
"""
import pickle
import sys


def round_size(s):
    return 512 if s < 512 else (s + 511) // 512 * 512


def seeds(snapshot, trace, device):
    segs = [s for s in snapshot["segments"] if s["device"] == device]
    added = {e["addr"] for e in trace if e["action"] == "segment_alloc"}
    ever = {e["addr"] for e in trace if e["action"] == "alloc"}
    alive, taken = {}, set()
    for e in trace:
        if e["action"] == "alloc":
            taken.add(e["addr"])
        elif e["action"] == "free_requested":
            if e["addr"] not in taken and e["addr"] not in alive:
                alive[e["addr"]] = (round_size(e["size"]), e["size"])
            taken.discard(e["addr"])
    out = []
    for s in segs:
        if s["address"] in added or s["is_expandable"]:
            continue
        base, total = s["address"], s["total_size"]
        inuse, a = {}, base
        for b in s["blocks"]:
            if b["state"] == "active_allocated" and a not in ever:
                inuse[a] = (b["size"], b["requested_size"])
            a += b["size"]
        for addr, v in alive.items():
            if base <= addr < base + total:
                inuse[addr] = v
        tiles, cur = [], base
        for addr in sorted(inuse):
            size, req = inuse[addr]
            if addr > cur:
                tiles.append((cur, addr - cur, 0, 0))
            tiles.append((addr, size, req, 1))
            cur = addr + size
        if cur < base + total:
            tiles.append((cur, base + total - cur, 0, 0))
        out.append((base, total, int(s["segment_type"] == "small"), tiles))
    return out


def write(path, snapshot, device, capacity, first, last, with_seeds):
    trace = snapshot["device_traces"][device]
    with open(path, "w") as f:
        f.write("capacity %d\n" % capacity)
        f.write("conf %s\n" % snapshot["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"])
        for base, total, small, tiles in (seeds(snapshot, trace, device) if with_seeds else []):
            f.write("seg %d %d %d %d\n" % (base, total, small, len(tiles)))
            for t in tiles:
                f.write("blk %d %d %d %d\n" % t)
        for e in trace[first:last]:
            addr = e["device_free"] if e["action"] == "oom" else e["addr"]
            f.write("ev %s %d %d\n" % (e["action"], addr, e["size"]))


def main():
    src, dst = sys.argv[1], sys.argv[2]
    exp = pickle.load(open(src + "/pytorch-expandable-oom.pickle", "rb"))
    # Device 1 ends in an OOM: capacity = bytes mapped when it happened plus
    # the oom entry's device_free (84298432512); device 2 never runs out.
    write(dst + "/expandable-oom-dev1.trace", exp, 1, 84298432512, 0, None, False)
    write(dst + "/expandable-dev2.trace", exp, 2, 85899345920, 0, None, False)
    train = pickle.load(open(src + "/pytorch-train-step-optimizer.pickle", "rb"))
    write(dst + "/train-step.trace", train, 0, 85899345920, 0, 2500, True)


if __name__ == "__main__":
    main()
