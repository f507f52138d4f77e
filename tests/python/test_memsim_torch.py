"""memsim_torch on CPU tensors (Debian's python3-torch): a small transformer
trained for a few steps under a Lua policy.  Checks that the decisions the
step applied are the ones the policy's rule gives for the recorded tensors,
that gradients are bitwise equal to a run without hooks, and that a policy
error stops the step with its file:line and leaves no tensor on the host.
Run by tests/torch.sh (make check)."""
import copy
import csv
import os
import subprocess
import tempfile
import unittest

import torch
import torch.nn as nn

import memsim_torch

SRC = os.environ["MEMSIM_SRCDIR"]
BUILD = os.environ.get("MEMSIM_BUILDDIR", SRC)
POLICIES = os.path.join(SRC, "tests", "data", "policies")
LIB_DIR = os.path.join(SRC, "policies_lua")


class Attention(nn.Module):
    """softmax(q k^T / sqrt(d)) v as one leaf module: the attention core."""

    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, qkv):
        b, s, three_d = qkv.shape
        d = three_d // 3
        q, k, v = qkv.view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        return (att @ v).transpose(1, 2).reshape(b, s, d)


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.fc2(self.act(self.fc1(x))))


class Layer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm1, self.qkv = nn.LayerNorm(d), nn.Linear(d, 3 * d)
        self.core, self.proj = Attention(heads), nn.Linear(d, d)
        self.norm2, self.mlp = nn.LayerNorm(d), MLP(d)

    def forward(self, x):
        x = x + self.proj(self.core(self.qkv(self.norm1(x))))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, vocab=256, d=64, heads=4, n_layers=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, heads) for _ in range(n_layers))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    tokens = torch.randint(0, 256, (4, 32), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def train_step(model, opt, step):
    x, y = batch(step)
    torch.manual_seed(1000 + step)  # the same dropout masks in both runs
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
    loss.backward()
    return loss


def grads(model):
    return [p.grad.clone() for p in model.parameters()]


class MemsimTorchTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.model = Model()
        self.reference = copy.deepcopy(self.model)

    def session(self, policy, recompute=()):
        return memsim_torch.Session(self.model, os.path.join(POLICIES, policy),
                                    recompute=recompute, lib_dir=LIB_DIR)

    def test_decisions_and_bitwise_gradients(self):
        sess = self.session("torch_swap.lua", recompute=["layers.1"])
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        ref_opt = torch.optim.SGD(self.reference.parameters(), lr=0.1)
        for step in range(4):
            with sess.step():
                loss = train_step(self.model, opt, step)
            ref_loss = train_step(self.reference, ref_opt, step)
            self.assertTrue(torch.equal(loss, ref_loss), "step %d loss" % step)
            for g, r in zip(grads(self.model), grads(self.reference)):
                self.assertTrue(torch.equal(g, r), "step %d: gradients differ" % step)
            self.assertEqual(sess.host_tensors(), 0)
            if step == 0:
                # The profiling step records and decides nothing.
                self.assertEqual(sess.applied, [])
                self.assertGreater(len(sess.tensor_info), 20)
                continue
            # The policy's rule on the recorded tensors, evaluated here:
            # MLP activations of 64 KiB or more go to host; layers.1 is
            # recomputed, so its tensors never reach the hooks.
            expected = {}
            for tid, (name, nbytes, kind) in enumerate(sess.tensor_info):
                if name.startswith("layers.1."):
                    continue
                big_mlp = kind == "activation" and ".mlp." in name and nbytes >= 65536
                expected[tid] = "offload" if big_mlp else "keep"
            applied = {tid: action for tid, _, action in sess.applied}
            self.assertEqual(applied, expected)
            self.assertIn("offload", applied.values())
            self.assertEqual(sess.recomputed, ["layers.1"])
            opt.step()
            ref_opt.step()
        # The profiled step as plan() saw it, with the last decisions; and
        # the same policy planning on that file in `memsim profile-torch`
        # decides what it decided in the step.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "profile.csv")
            sess.write_profile(path)
            with open(path) as f:
                rows = f.read().splitlines()
            out = subprocess.run([os.path.join(BUILD, "memsim"), "profile-torch", path,
                                  "--policy", os.path.join(POLICIES, "torch_swap.lua")],
                                 capture_output=True, text=True, check=True).stdout
        self.assertTrue(rows[0].startswith("row,id,name,phase_or_kind,start_ns"))
        self.assertTrue(rows[1].startswith("step,0,,,0,"))
        self.assertIn("op,0,embed,forward,", rows[2])
        offloaded = sum(a == "offload" for a in expected.values())
        self.assertEqual(sum(r.endswith(",offload") for r in rows), offloaded)
        recomputed = sum(1 for name, _, kind in sess.tensor_info
                         if name.startswith("layers.1.") and kind == "activation")
        self.assertRegex(out, r"offloaded +%d tensors" % offloaded)
        self.assertRegex(out, r"recomputed +%d tensors" % recomputed)
        self.assertIn("segments recomputed: 1 of 1", out)
        sess.close()

    def test_policy_error_stops_step(self):
        sess = self.session("torch_error.lua")
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        for step in range(2):
            with sess.step():
                train_step(self.model, opt, step)
        self.assertIn("offload", [a for _, _, a in sess.applied])
        with self.assertRaises(memsim_torch.PolicyError) as cm:
            with sess.step():
                train_step(self.model, opt, 2)
        msg = str(cm.exception)
        self.assertIn("torch_error.lua:12:", msg)
        self.assertIn("deliberate failure", msg)
        self.assertEqual(sess.host_tensors(), 0)
        sess.close()

    def test_failure_mid_forward_returns_host_tensors(self):
        sess = self.session("torch_error.lua")
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        with sess.step():
            train_step(self.model, opt, 0)

        def boom(mod, args, out):
            raise ValueError("a module failed")
        h = self.model.layers[2].register_forward_hook(boom)
        with self.assertRaises(ValueError):
            with sess.step():
                # Layers 0 and 1 offloaded their activations before layer 2 fails.
                train_step(self.model, opt, 1)
        self.assertGreater(len([a for _, _, a in sess.applied if a == "offload"]), 0)
        self.assertEqual(sess.host_tensors(), 0)
        h.remove()
        sess.close()

    def test_plan_sees_measured_step(self):
        """torch_measured.lua offloads what the slowest forward op saved, by
        the times measured in the profiling step."""
        sess = self.session("torch_measured.lua")
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        for step in range(2):
            with sess.step():
                train_step(self.model, opt, step)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "profile.csv")
            sess.write_profile(path)
            with open(path) as f:
                rows = list(csv.DictReader(f))
        ops = [r for r in rows if r["row"] == "op"]
        tensors = [r for r in rows if r["row"] == "tensor"]
        self.assertTrue(all(int(r["end_ns"]) >= int(r["start_ns"]) >= 0 for r in ops))
        saving = {t["producer"] for t in tensors if t["phase_or_kind"] == "activation"}
        longest, best = None, -1
        for r in ops:
            took = int(r["end_ns"]) - int(r["start_ns"])
            if r["phase_or_kind"] == "forward" and r["id"] in saving and took > best:
                longest, best = r["id"], took
        expected = {int(t["id"]) for t in tensors
                    if t["producer"] == longest and t["phase_or_kind"] == "activation"}
        self.assertTrue(expected)
        offloaded = {tid for tid, _, a in sess.applied if a == "offload"}
        self.assertEqual(offloaded, expected)
        sess.close()

    def test_allocator_oom_is_torch_oom(self):
        """A request memsim's allocator could not serve ends the step in
        PyTorch's OutOfMemoryError with the plugin's message (a stand-in
        plugin here: the CUDA-format text itself is test_bridge_alloc's)."""
        message = ("CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0 has a total "
                   "capacity of 64.00 MiB of which 24.00 MiB is free.")

        class Plugin:
            ooms = 0

            def memsim_alloc_stats(self, device, out):
                out[4] = self.ooms
                return 0

            def memsim_alloc_last_error(self, buf, n):
                buf.value = message.encode()
                return len(message)

            def memsim_alloc_set_context(self, kind, persistent, forward):
                return 0

        plugin = Plugin()
        sess = memsim_torch.Session(self.model, os.path.join(POLICIES, "torch_swap.lua"),
                                    lib_dir=LIB_DIR, allocator=plugin)
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        with sess.step():
            train_step(self.model, opt, 0)
        oom = getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
        with self.assertRaises(oom) as cm:
            with sess.step():
                train_step(self.model, opt, 1)
                plugin.ooms += 1
        self.assertEqual(str(cm.exception), message)
        self.assertEqual(sess.host_tensors(), 0)
        sess.close()

    def test_bad_policy_file(self):
        with self.assertRaises(memsim_torch.PolicyError) as cm:
            memsim_torch.Session(self.model, os.path.join(POLICIES, "no_such.lua"),
                                 lib_dir=LIB_DIR)
        self.assertIn("no_such.lua", str(cm.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
