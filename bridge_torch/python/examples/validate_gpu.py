"""The GPU checks of issue 10 (docs/validation.md, "PyTorch bridge"): a
GPT-2-small-sized model (12 layers, d 768, 12 heads, sequence 1024, vocabulary
50257) trained 5 steps

  1. with PyTorch's own allocator (the reference: losses, gradient digests,
     peak allocated and reserved);
  2. with libmemsim_alloc.so as the allocator: losses and gradients must be
     equal, and its trace must replay 100% in `memsim replay`;
  3. the same with lifetime_pools.lua deciding the pools: peak reserved
     against the reference;
  4. with PyTorch's allocator and memsim_torch offloading what
     offload_mlp.lua picks: peak allocated against the reference, beside the
     bytes offloaded per step; gradients must stay bitwise equal.

Each run is its own process (an allocator is chosen before CUDA starts).
Exits 77 without a CUDA device.  Usage, from a built source tree:

    PYTHONPATH=bridge_torch/python python3 bridge_torch/python/examples/validate_gpu.py OUTDIR
"""
import os
import re
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
GPT2_SMALL = ["--layers", "12", "--d", "768", "--heads", "12", "--seq", "1024",
              "--vocab", "50257", "--batch", "8", "--steps", "5", "--device", "cuda"]
LINE = re.compile(r"step (\d+)  loss (\S+)  grads sha256 (\S+)(.*)")


def run(name, extra, env_extra, out):
    env = dict(os.environ)
    env.update(env_extra)
    cmd = [sys.executable, os.path.join(HERE, "train_small.py")] + GPT2_SMALL + extra
    print("$ %s %s" % (" ".join("%s=%s" % kv for kv in env_extra.items()), " ".join(cmd)))
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    with open(os.path.join(out, name + ".log"), "w") as f:
        f.write(res.stdout + res.stderr)
    if res.returncode != 0:
        sys.exit("%s failed:\n%s" % (name, res.stderr))
    steps = [LINE.match(l).groups() for l in res.stdout.splitlines() if LINE.match(l)]
    return steps, res.stdout


def field(rest, label):
    m = re.search(label + r" ([0-9.]+) MiB", rest)
    return float(m.group(1)) if m else None


def main():
    if not torch.cuda.is_available():
        print("no CUDA device: the GPU checks of issue 10 were not run")
        return 77
    out = sys.argv[1] if len(sys.argv) > 1 else "validate-gpu"
    os.makedirs(out, exist_ok=True)
    memsim = os.path.join(TOP, "memsim")
    policy = os.path.join(HERE, "offload_mlp.lua")
    ref, _ = run("default", ["--no-hooks"], {}, out)
    trace = os.path.join(out, "memsim-alloc.csv")
    alloc, _ = run("memsim_alloc", ["--no-hooks", "--allocator"],
                   {"MEMSIM_ALLOC_TRACE": trace}, out)
    pools, _ = run("lifetime_pools", ["--no-hooks", "--allocator"],
                   {"MEMSIM_ALLOC_TRACE": os.path.join(out, "lifetime-pools.csv"),
                    "MEMSIM_ALLOC_POLICY": "lifetime_pools"}, out)
    off, _ = run("offload", ["--policy", policy], {}, out)
    ok = True
    same = [a[1] == r[1] and a[2] == r[2] for a, r in zip(alloc, ref)]
    print("memsim allocator: losses and gradients equal to the default allocator's: %s"
          % all(same))
    ok = ok and all(same) and len(alloc) == 5
    replay = subprocess.run([memsim, "replay", trace], capture_output=True, text=True)
    with open(os.path.join(out, "replay.txt"), "w") as f:
        f.write(replay.stdout + replay.stderr)
    agree = "agreement: 100.00%" in replay.stdout
    print("memsim replay of its trace: %s" % ("100% agreement" if agree else "DIVERGES"))
    ok = ok and agree
    print("peak reserved, default allocator: %.2f MiB; memsim: %.2f MiB; lifetime_pools: %.2f MiB"
          % (field(ref[-1][3], "peak reserved") or float("nan"),
             field(alloc[-1][3], "peak reserved") or float("nan"),
             field(pools[-1][3], "peak reserved") or float("nan")))
    same = [o[1] == r[1] and o[2] == r[2] for o, r in zip(off, ref)]
    print("offload: gradients bitwise equal to the reference: %s" % all(same))
    ok = ok and all(same)
    print("offload: peak allocated %.2f MiB against %.2f MiB; offloaded per step: %s"
          % (field(off[-1][3], "peak allocated") or float("nan"),
             field(ref[-1][3], "peak allocated") or float("nan"),
             re.search(r"offloaded [^)]*\)", off[-1][3]).group(0)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
