"""memsim_torch: a memsim Lua policy deciding, inside a real PyTorch training
step, which saved activations stay on the device, which are offloaded to host
memory until backward, and which modules are recomputed.

Plain ctypes over libmemsim (include/memsim/torch.h); no build step.  The
first step is recorded (an op per module call, named by its module path; a
tensor per saved activation with its bytes; a recompute segment per module
wrapped for it) with the measured times and memory; from the next step on,
the policy's plan(profile, ctx) decides, the same hook and profile fields
that `memsim run` gives it.  docs/torch.md is the manual.
"""
import contextlib
import ctypes
import ctypes.util
import os
import time

import torch
import torch.utils.checkpoint

__all__ = ["Session", "PolicyError", "load_library", "install_allocator", "allocator_stats",
           "allocator_error", "allocation_kind"]

_PHASE_FORWARD, _PHASE_BACKWARD = 0, 1
_KIND_WEIGHT, _KIND_ACTIVATION = 0, 3
_ACTIONS = ("keep", "offload", "recompute")


class PolicyError(RuntimeError):
    """The policy failed (its message carries the policy's file:line)."""


def _candidates(name):
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("MEMSIM_BUILDDIR")
    roots = [env] if env else []
    # A source tree's build: bridge_torch/python/memsim_torch -> top.
    roots.append(os.path.normpath(os.path.join(here, "..", "..", "..")))
    for root in roots:
        for sub in (".libs", "bridge_torch/.libs"):
            yield os.path.join(root, sub, name)
    found = ctypes.util.find_library(name[3:].split(".")[0])
    if found:
        yield found


def _find(name, env_var):
    path = os.environ.get(env_var)
    if path:
        return path
    for p in _candidates(name):
        if os.path.exists(p) or not os.path.isabs(p):
            return p
    raise OSError("cannot find %s: set %s" % (name, env_var))


class _Diag(ctypes.Structure):
    # ms_diag: code, then the message (include/memsim/status.h).
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 1024)]


class _Measure(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int), ("peak_allocated", ctypes.c_uint64),
                ("peak_reserved", ctypes.c_uint64), ("capacity", ctypes.c_uint64),
                ("step_time_ns", ctypes.c_int64)]


def load_library():
    """libmemsim through ctypes ($MEMSIM_LIB, else a build tree, else the
    system's)."""
    lib = ctypes.CDLL(_find("libmemsim.so", "MEMSIM_LIB"))
    P, U32, I32, I64, U64 = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32,
                             ctypes.c_int64, ctypes.c_uint64)
    sigs = {
        "ms_torch_step_create": [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(P),
                                 ctypes.POINTER(_Diag)],
        "ms_torch_step_free": [P],
        "ms_torch_op_add": [P, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(U32)],
        "ms_torch_op_measure": [P, U32, I64, I64, U64, U64],
        "ms_torch_tensor_add": [P, ctypes.c_char_p, U64, ctypes.c_int, I32,
                                ctypes.POINTER(U32)],
        "ms_torch_tensor_use": [P, U32, U32],
        "ms_torch_segment_add": [P, ctypes.c_char_p, U32, U32, ctypes.POINTER(U32)],
        "ms_torch_plan": [P, ctypes.POINTER(_Measure), ctypes.POINTER(_Diag)],
        "ms_torch_decision": [P, U32, ctypes.POINTER(ctypes.c_int)],
        "ms_torch_segment_recomputed": [P, U32, ctypes.POINTER(ctypes.c_bool)],
        "ms_torch_profile_write": [P, ctypes.c_char_p, ctypes.POINTER(_Diag)],
        "ms_torch_plan_stable": [P],
        "ms_strerror": [ctypes.c_int],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = {"ms_strerror": ctypes.c_char_p,
                      "ms_torch_plan_stable": ctypes.c_bool}.get(name, ctypes.c_int)
    return lib


def install_allocator(path=None):
    """Make libmemsim_alloc.so PyTorch's CUDA allocator (before any CUDA
    tensor exists); returns the plugin (ctypes) for its statistics."""
    if not hasattr(torch.cuda.memory, "CUDAPluggableAllocator"):
        raise RuntimeError("PyTorch %s has no torch.cuda.memory.CUDAPluggableAllocator "
                           "(PyTorch 2.0 or later)" % torch.__version__)
    path = path or _find("libmemsim_alloc.so", "MEMSIM_ALLOC_LIB")
    alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "memsim_alloc", "memsim_free")
    torch.cuda.memory.change_current_allocator(alloc)
    plugin = ctypes.CDLL(path)
    plugin.memsim_alloc_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    plugin.memsim_alloc_set_context.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    plugin.memsim_alloc_stats.argtypes = [ctypes.c_int, ctypes.c_ulonglong * 5]
    return plugin


def allocator_stats(plugin, device=0):
    """(allocated, reserved, peak allocated, peak reserved, num_ooms) of
    memsim's allocator on a device; zeros before its first request."""
    out = (ctypes.c_ulonglong * 5)()
    if plugin.memsim_alloc_stats(device, out) != 0:
        return (0, 0, 0, 0, 0)
    return tuple(out)


@contextlib.contextmanager
def allocation_kind(plugin, kind, persistent=True):
    """Declare what the requests inside are for ("weight" while the model is
    built, "optimizer_state" around the optimizer's first step), so that a
    policy's pool hook (lifetime_pools) sees it."""
    if plugin.memsim_alloc_set_context(kind.encode(), int(persistent), 0) != 0:
        raise ValueError(allocator_error(plugin))
    try:
        yield
    finally:
        plugin.memsim_alloc_set_context(b"activation", 0, 1)


def allocator_error(plugin):
    """The plugin's last error: after an out-of-memory, PyTorch's own
    "CUDA out of memory. Tried to allocate ..." message."""
    buf = ctypes.create_string_buffer(2048)
    plugin.memsim_alloc_last_error(buf, len(buf))
    return buf.value.decode()


class _Offloaded:
    """A saved tensor on the host until backward (TransformerEngine's
    cpu_offload pattern: D2H on a side stream after the producer, H2D
    prefetched on that stream before the consumer needs it).

    A pluggable allocator has no record_stream, so no device block is handed
    to another stream: the source stays referenced until its copy is done
    (reap), and the block the tensor comes back into is allocated on the
    compute stream, which then waits for the copy."""
    __slots__ = ("host", "device", "event", "back", "tid", "src")

    def __init__(self, t, tid, stream):
        self.tid, self.device, self.back, self.src = tid, t.device, None, None
        if t.is_cuda:
            stream.wait_stream(torch.cuda.current_stream(t.device))
            with torch.cuda.stream(stream):
                self.host = torch.empty(t.size(), dtype=t.dtype, pin_memory=True)
                self.host.copy_(t, non_blocking=True)
                self.event = torch.cuda.Event()
                self.event.record(stream)
            self.src = t
        else:
            # On CPU tensors the offload is a copy to a separate buffer.
            self.host, self.event = torch.empty_like(t).copy_(t), None

    def reap(self):
        """Let the device copy go once the D2H copy has read it."""
        if self.src is not None and self.event.query():
            self.src = None

    def prefetch(self, stream):
        if self.back is None and self.host is not None and self.device.type == "cuda":
            current = torch.cuda.current_stream(self.device)
            self.back = torch.empty(self.host.size(), dtype=self.host.dtype, device=self.device)
            stream.wait_stream(current)
            with torch.cuda.stream(stream):
                stream.wait_event(self.event)
                self.back.copy_(self.host, non_blocking=True)
                self.event = torch.cuda.Event()
                self.event.record(stream)

    def fetch(self, stream):
        if self.device.type != "cuda":
            return self.host
        self.prefetch(stream)
        torch.cuda.current_stream(self.device).wait_event(self.event)
        self.src = None
        return self.back


class Session:
    """Runs a model's training steps under a memsim policy.

    model: the nn.Module; policy: a Lua file (or a shipped name) with a
    plan(profile, ctx) hook; recompute: module paths whose modules may be
    recomputed (each is a recompute segment the policy can choose);
    allocator: the plugin from install_allocator, when memsim's allocator
    serves the step.
    """

    def __init__(self, model, policy, recompute=(), lib_dir=None, allocator=None, lib=None):
        self._lib = lib or load_library()
        self._h = ctypes.c_void_p()
        d = _Diag()
        st = self._lib.ms_torch_step_create(policy.encode(),
                                            lib_dir.encode() if lib_dir else None,
                                            ctypes.byref(self._h), ctypes.byref(d))
        if st != 0:
            raise PolicyError(d.msg.decode())
        # With memsim's allocator plugged in, memory figures and out-of-memory
        # come from it (torch.cuda.memory_allocated does not see a
        # pluggable allocator).
        self._alloc = allocator
        if allocator is not None:
            self._memory = lambda: allocator_stats(allocator)[:2]
        else:
            self._memory = _default_memory
        self._names = {m: n for n, m in model.named_modules()}
        self._handles = []
        for m, name in self._names.items():
            if not list(m.children()):
                self._handles.append(m.register_forward_pre_hook(self._pre))
                self._handles.append(m.register_forward_hook(self._post))
            else:
                # Containers only name what code of their own saves
                # (functional calls in their forward).
                self._handles.append(m.register_forward_pre_hook(self._enter))
                self._handles.append(m.register_forward_hook(self._leave))
        self._segments = {}
        for path in recompute:
            mod = model.get_submodule(path)
            self._wrap(mod, path)
        self.step_index = -1
        self.applied = []          # (tensor id, tensor name, action) of the last step
        self.recomputed = []       # segment names recomputed in the last step
        self.tensor_names = []     # by tensor id (the profiled step's)
        self.tensor_info = []      # (name, bytes, kind) by tensor id
        self._model_params = list(model.parameters())
        self.plans = 0
        self._host = {}            # offloaded tensors not yet returned
        self._stream = None
        self._stable = False
        self._policy_error = None
        self._next_op = 0          # the next memsim op id

    # ---- recording -------------------------------------------------------
    def _now(self):
        return time.perf_counter_ns() - self._t0

    def _mark(self):
        """A point of the profiled step: a CUDA event on the device's
        stream (device time, as memsim's profile), or the host clock."""
        if self._cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return self._now()

    def _elapsed_ns(self, mark):
        if self._cuda:
            return int(self._ev0.elapsed_time(mark) * 1e6)
        return mark

    def _measure_ops(self):
        """The profiled step's op times, once its device work is done."""
        if self._cuda:
            torch.cuda.synchronize()
        for op, start in self._starts.items():
            end = self._ends.get(op)
            if end is None:
                continue
            t0, t1 = self._elapsed_ns(start), self._elapsed_ns(end[0])
            self._check(self._lib.ms_torch_op_measure(self._h, op, t0, max(t0, t1), end[1],
                                                      end[2]))

    def _add_op(self, name, phase):
        op = ctypes.c_uint32()
        self._check(self._lib.ms_torch_op_add(self._h, name.encode(), phase, ctypes.byref(op)))
        self._next_op = op.value + 1
        return op.value

    def _pre(self, mod, args):
        if self._backward or not self._active:
            return
        self._op_count += 1
        if self.step_index == 0:
            op = self._add_op(self._names[mod], _PHASE_FORWARD)
            self._fwd_ops.append(op)
            self._op_names.append(self._names[mod])
            self._starts[op] = self._mark()
        self._stack.append(self._op_count - 1)
        self._saves[self._op_count - 1] = 0

    def _enter(self, mod, args):
        if self._active and not self._backward:
            self._mstack.append(self._names[mod] or "model")

    def _leave(self, mod, args, out):
        if self._active and not self._backward and self._mstack:
            self._mstack.pop()

    def _post(self, mod, args, out):
        if self._backward or not self._active or not self._stack:
            return
        k = self._stack.pop()
        if self.step_index == 0:
            op = self._fwd_ops[k]
            self._last = self._mark()
            self._ends[op] = (self._last,) + tuple(self._memory())

    def _wrap(self, mod, path):
        orig = mod.forward
        session = self

        def forward(*args, **kwargs):
            if not session._active:
                return orig(*args, **kwargs)
            calls = session._calls.get(path, 0)
            session._calls[path] = calls + 1
            if calls > 0:          # the recompute, in backward
                session._backward = True
                return orig(*args, **kwargs)
            first = session._next_op
            if session._recompute_now(path):
                session.recomputed.append(path)
                out = torch.utils.checkpoint.checkpoint(orig, *args, use_reentrant=False,
                                                        **kwargs)
            else:
                out = orig(*args, **kwargs)
            # Every op recorded while it ran, its container code's included.
            if session.step_index == 0 and session._next_op > first:
                seg = ctypes.c_uint32()
                session._check(session._lib.ms_torch_segment_add(
                    session._h, path.encode(), first, session._next_op - 1, ctypes.byref(seg)))
                session._segments[path] = seg.value
            return out

        mod.forward = forward

    def _recompute_now(self, path):
        if self.step_index == 0 or path not in self._segments:
            return False
        r = ctypes.c_bool()
        self._check(self._lib.ms_torch_segment_recomputed(self._h, self._segments[path],
                                                          ctypes.byref(r)))
        return r.value

    # ---- the saved-tensor hooks -----------------------------------------
    def _pack(self, t):
        if self._backward:
            return t
        op = self._stack[-1] if self._stack else -1
        idx = self._saves.get(op, 0)
        self._saves[op] = idx + 1
        key = (op, idx)
        if self.step_index == 0:
            return self._record(t, op, key)
        if not self._planned:
            self._plan()
        tid = self._keys.get(key)
        if tid is None:
            raise RuntimeError("memsim_torch: saved tensor %d of op %d was not in the profiled "
                               "step (the step's structure changed)" % (idx, op))
        act = ctypes.c_int()
        self._check(self._lib.ms_torch_decision(self._h, tid, ctypes.byref(act)))
        action = _ACTIONS[act.value]
        self.applied.append((tid, self.tensor_names[tid], action))
        if action != "offload":
            return ("keep", tid, t)
        if self._stream is None and t.is_cuda:
            self._stream = torch.cuda.Stream(t.device)
        for earlier in self._order:
            earlier.reap()
        h = _Offloaded(t, tid, self._stream)
        self._host[id(h)] = h
        self._order.append(h)
        return ("offload", tid, h)

    def _record(self, t, op, key):
        kind = _KIND_WEIGHT if t.data_ptr() in self._params else _KIND_ACTIVATION
        tid = ctypes.c_uint32()
        if op >= 0:
            producer = self._fwd_ops[op]
            op_name = self._op_names[op]
            name = "%s.saved%d" % (op_name, key[1])
        else:
            # Saved by a container's own code (a functional call in its
            # forward, the loss outside every module): an op of its own,
            # named by the innermost module running, so that the tensor has
            # a forward use.
            op_name = self._mstack[-1] if self._mstack else "step"
            name = "%s.saved%d" % (op_name, key[1])
            producer = self._add_op(op_name, _PHASE_FORWARD)
            # It ran since the last thing recorded (the container's code).
            mark = self._mark()
            self._starts[producer] = self._last if self._last is not None else mark
            self._ends[producer] = (mark,) + tuple(self._memory())
            self._last = mark
        self._check(self._lib.ms_torch_tensor_add(self._h, name.encode(),
                                                  t.numel() * t.element_size(), kind,
                                                  producer, ctypes.byref(tid)))
        if producer >= 0:
            self._check(self._lib.ms_torch_tensor_use(self._h, tid.value, producer))
        self._keys[key] = tid.value
        self.tensor_names.append(name)
        self.tensor_info.append((name, t.numel() * t.element_size(),
                                 "weight" if kind == _KIND_WEIGHT else "activation"))
        self._producer[tid.value] = (producer, op_name)
        return ("keep", tid.value, t)

    def _unpack(self, packed):
        if not isinstance(packed, tuple):
            return packed
        kind, tid, obj = packed
        if not self._backward and self._alloc is not None:
            self._alloc.memsim_alloc_set_context(b"activation", 0, 0)
        self._backward = True
        if self.step_index == 0:
            self._record_use(tid)
        if kind == "keep":
            return obj
        # Prefetch the tensors offloaded before this one: backward runs
        # them next.
        i = self._order.index(obj) if obj in self._order else -1
        if i > 0 and self._stream is not None:
            self._order[i - 1].prefetch(self._stream)
        t = obj.fetch(self._stream)
        self._host.pop(id(obj), None)
        return t

    def _record_use(self, tid):
        fop, name = self._producer[tid]
        if fop not in self._bwd_ops:
            op = self._add_op(name, _PHASE_BACKWARD)
            self._bwd_ops[fop] = op
            self._starts[op] = self._mark()
        op = self._bwd_ops[fop]
        if self._lib.ms_torch_tensor_use(self._h, tid, op) != 0:
            return  # read again by a later backward op: the first reader counts
        # A backward op runs from its first saved tensor's read to its last.
        self._ends[op] = (self._mark(),) + tuple(self._memory())

    # ---- planning ------------------------------------------------------------
    def _plan(self):
        self._planned = True
        if self._stable:
            return
        m = _Measure(step=0, peak_allocated=self._peak[0], peak_reserved=self._peak[1],
                     capacity=self._capacity, step_time_ns=self._step_time)
        d = _Diag()
        self.plans += 1
        if self._lib.ms_torch_plan(self._h, ctypes.byref(m), ctypes.byref(d)) != 0:
            self._policy_error = d.msg.decode()
            raise PolicyError(self._policy_error)
        # A policy that called ctx:stable() is not asked again.
        self._stable = self._lib.ms_torch_plan_stable(self._h)

    def _check(self, st):
        if st != 0:
            raise RuntimeError("memsim_torch: %s" % self._lib.ms_strerror(st).decode())

    # ---- the step -------------------------------------------------------------
    @contextlib.contextmanager
    def step(self):
        """Wrap one training step (forward and backward)."""
        self.step_index += 1
        self._active, self._backward, self._planned = True, False, False
        self._policy_error = None
        self._stack, self._saves, self._calls, self._order = [], {}, {}, []
        self._mstack, self._last = [], None
        self.applied, self.recomputed = [], []
        self._op_count, self._t0 = 0, time.perf_counter_ns()
        self._cuda = any(p.is_cuda for p in self._model_params)
        self._params = {p.data_ptr() for p in self._model_params}
        if self._cuda:
            self._ev0 = torch.cuda.Event(enable_timing=True)
            self._ev0.record()
        if self.step_index == 0:
            self._fwd_ops, self._starts, self._ends, self._keys = [], {}, {}, {}
            self._producer, self._bwd_ops, self._op_names = {}, {}, []
        ooms = allocator_stats(self._alloc)[4] if self._alloc is not None else 0
        if self._alloc is not None:
            self._alloc.memsim_alloc_set_context(b"activation", 0, 1)
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
                yield self
        except BaseException as e:
            self.release()
            err, self._policy_error = self._policy_error, None
            if err is not None and not isinstance(e, PolicyError):
                # autograd re-raises a hook's exception as a RuntimeError.
                raise PolicyError(err) from e
            self._raise_if_oom(ooms, e)
            raise
        finally:
            self._active = False
        self._raise_if_oom(ooms, None)
        if self.step_index == 0:
            self._measure_ops()
            self._step_time = self._elapsed_ns(self._mark())
            if self._alloc is not None:
                self._peak = allocator_stats(self._alloc)[2:4]
            elif self._cuda:
                self._peak = (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())
            else:
                self._peak = (0, 0)
            self._capacity = _capacity()
        if self._host:
            n = len(self._host)
            self.release()
            raise RuntimeError("memsim_torch: %d offloaded tensors were never read back in "
                               "backward (run backward inside the step)" % n)

    def _raise_if_oom(self, before, cause):
        """PyTorch's CUDAPluggableAllocator passes a NULL from the plugin on
        unchecked: the step then fails later, or not at all.  The plugin
        counts its out-of-memory requests; a step during which one happened
        ends in PyTorch's own OutOfMemoryError with memsim's message."""
        if self._alloc is None or allocator_stats(self._alloc)[4] == before:
            return
        self.release()
        oom = getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
        raise oom(allocator_error(self._alloc)) from cause

    def release(self):
        """Drop every offloaded tensor's host copy (after a failed step)."""
        for h in self._host.values():
            h.host, h.back, h.src = None, None, None
        self._host.clear()
        self._order = []

    def host_tensors(self):
        """Offloaded tensors whose host copy has not been returned."""
        return len(self._host)

    def write_profile(self, path):
        """The profiled step as CSV (what plan() sees): the torch
        counterpart of a measured memsim profile."""
        d = _Diag()
        if self._lib.ms_torch_profile_write(self._h, path.encode(), ctypes.byref(d)) != 0:
            raise RuntimeError(d.msg.decode())

    def close(self):
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._h:
            self._lib.ms_torch_step_free(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _default_memory():
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    return 0, 0


def _capacity():
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    return 0
