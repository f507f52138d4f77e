"""Train a small GPT-style transformer for a few steps under a memsim policy
(docs/torch.md).

    PYTHONPATH=bridge_torch/python python3 bridge_torch/python/examples/train_small.py \
        --policy bridge_torch/python/examples/offload_mlp.lua --recompute layers.1

On a GPU, --allocator makes libmemsim_alloc.so PyTorch's allocator
(MEMSIM_ALLOC_TRACE, MEMSIM_ALLOC_POLICY, MEMSIM_ALLOC_CONF as in
docs/torch.md).  --no-hooks runs the same steps without memsim_torch, for
comparing losses and gradients.
"""
import argparse
import hashlib
import os
import sys

import torch
import torch.nn as nn

import memsim_torch


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, d, heads, n_layers, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.layers = nn.ModuleList(Block(d, heads) for _ in range(n_layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1))

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for layer in self.layers:
            x = layer(x, self.mask[: idx.shape[1], : idx.shape[1]])
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default=None, help="a Lua policy with plan(profile, ctx)")
    ap.add_argument("--recompute", action="append", default=[],
                    help="a module path the policy may recompute (repeatable)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--allocator", action="store_true",
                    help="libmemsim_alloc.so as PyTorch's CUDA allocator")
    ap.add_argument("--no-hooks", action="store_true", help="no memsim_torch (the reference)")
    ap.add_argument("--profile", default=None, help="write the profiled step here (CSV)")
    args = ap.parse_args()

    plugin = memsim_torch.install_allocator() if args.allocator else None
    torch.manual_seed(0)
    ctx = memsim_torch.allocation_kind(plugin, "weight") if plugin else _nothing()
    with ctx:
        model = GPT(args.vocab, args.d, args.heads, args.layers, args.seq).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sess = None
    if not args.no_hooks:
        sess = memsim_torch.Session(model, args.policy, recompute=args.recompute,
                                    allocator=plugin)
    for step in range(args.steps):
        g = torch.Generator().manual_seed(step)
        data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=g)
        x, y = data[:, :-1].to(args.device), data[:, 1:].to(args.device)
        opt.zero_grad(set_to_none=True)
        with sess.step() if sess else _nothing():
            loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            loss.backward()
        digest = hashlib.sha256()
        for p in model.parameters():
            digest.update(p.grad.detach().cpu().numpy().tobytes())
        line = "step %d  loss %.6f  grads sha256 %s" % (step, loss.item(), digest.hexdigest()[:16])
        if sess is not None:
            off = [t for t, _, a in sess.applied if a == "offload"]
            nbytes = sum(sess.tensor_info[t][1] for t in off)
            line += "  offloaded %d tensors (%.2f MiB)  recomputed %s" % (
                len(off), nbytes / 2**20, ",".join(sess.recomputed) or "-")
        if plugin is not None:
            st = memsim_torch.allocator_stats(plugin)
            line += "  peak allocated %.2f MiB  peak reserved %.2f MiB" % (
                st[2] / 2**20, st[3] / 2**20)
        elif args.device.startswith("cuda"):
            line += "  peak allocated %.2f MiB  peak reserved %.2f MiB" % (
                torch.cuda.max_memory_allocated() / 2**20,
                torch.cuda.max_memory_reserved() / 2**20)
        print(line, flush=True)
        with memsim_torch.allocation_kind(plugin, "optimizer_state") if plugin else _nothing():
            opt.step()
    if sess is not None and args.profile:
        sess.write_profile(args.profile)
        print("profile of step 0 written to %s" % args.profile)
    if plugin is not None:
        del model, opt, sess
        if plugin.memsim_alloc_shutdown() != 0:
            print(memsim_torch.allocator_error(plugin), file=sys.stderr)
            return 1
        if os.environ.get("MEMSIM_ALLOC_TRACE"):
            print("allocator trace: %s (memsim replay it)" % os.environ["MEMSIM_ALLOC_TRACE"])
    return 0


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    sys.exit(main())
