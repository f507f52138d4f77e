-- Test fixture: logs what the profile shows, for the test to compare with
-- the C structs it built.
local memsim = require("lib.memsim")

local function s(v) return tostring(v) end

return {
  name = "inspect",
  plan = function(profile, ctx)
    ctx:log("counts ops=%d tensors=%d segments=%d step=%d measured=%s stage=%d capacity=%d",
            #profile.ops, #profile.tensors, #profile.segments, profile.step,
            s(profile.measured), profile.stage, profile.capacity)
    ctx:log("run peak_allocated=%s step_time=%s oom=%s oom_op=%s", s(profile.peak_allocated),
            s(profile.step_time), s(profile.oom), s(profile.oom_op))
    local t = profile.tensors[4]
    ctx:log("t3 id=%d name=%s bytes=%d dtype=%s kind=%s producer=%d saved=%s uses=%s "
            .. "first=%d last=%d lfu=%d fbu=%d layer=%d mb=%d", t.id, t.name, t.bytes, t.dtype,
            t.kind, t.producer, s(t.saved), table.concat({ table.unpack(t.uses) }, ","),
            t.first_use, t.last_use, t.last_forward_use, t.first_backward_use, t.layer,
            t.micro_batch)
    local o = profile.tensors[17]
    ctx:log("t16 kind=%s persistent=%s producer=%s lfu=%s fbu=%s mb=%s last=%d", o.kind,
            s(o.persistent), s(o.producer), s(o.last_forward_use), s(o.first_backward_use),
            s(o.micro_batch), o.last_use)
    for _, g in ipairs(profile.segments) do
      ctx:log("seg %d %s parent=%s layer=%d ops=%d..%d bwd=%d saved=%d input=%d inputs=%s",
              g.id, g.name, s(g.parent), g.layer, g.first_op, g.last_op, g.first_backward_op,
              g.saved_bytes, g.input_bytes, table.concat({ table.unpack(g.inputs) }, ","))
    end
    local op = profile.ops[3]
    ctx:log("op2 %s phase=%s layer=%d mb=%d segment=%d stream=%s in=%s out=%s kernel=%s "
            .. "class=%s flops=%.0f start=%s finish=%s allocated=%s", op.name, op.phase,
            op.layer, op.micro_batch, op.segment, op.stream,
            table.concat({ table.unpack(op.inputs) }, ","),
            table.concat({ table.unpack(op.outputs) }, ","), op.kernel, op.class, op.flops,
            s(op.start), s(op.finish), s(op.allocated))
    local e = profile.ops[11]
    ctx:log("op10 phase=%s layer=%s mb=%s segment=%s", e.phase, s(e.layer), s(e.micro_batch),
            s(e.segment))
    local dev = profile.device
    if dev then
      local dk = {}
      for k in pairs(dev) do dk[#dk + 1] = k end
      ctx:log("devkeys %s", table.concat(dk, ","))
      ctx:log("device %s hbm=%d h2d=%.0f d2h=%.0f bf16=%.0f fp8=%s", dev.name, dev.hbm_bytes,
              dev.h2d_bw, dev.d2h_bw, dev.peak_flops.bf16, s(dev.peak_flops.fp8))
    end
    local ids = {}
    for _, x in ipairs(memsim.tensors(profile, { kind = "activation", saved = true })) do
      ids[#ids + 1] = x.id
    end
    local big = memsim.tensors(profile, { name = "^layers%.0%.", min_bytes = 5000 })
    ctx:log("lib saved=%s saved_bytes=%d big=%d grads=%d fmt=%s", table.concat(ids, ","),
            memsim.sum_bytes(profile, ids), #big,
            memsim.sum_bytes(profile, memsim.tensors(profile, { kind = "grad" })),
            memsim.format_bytes(3 * 2 ^ 30))
    local function ids_of(list)
      local out = {}
      for _, x in ipairs(list) do out[#out + 1] = x.id end
      return table.concat(out, ",")
    end
    local temps0 = profile.tensors:select({ kind = "temp", layer = 0 })
    ctx:log("select temp0=%s big=%s unsaved=%s set=%s all=%d none=%d same=%s",
            ids_of(temps0),
            ids_of(profile.tensors:select({ kind = memsim.set({ "grad", "weight" }),
                                            min_bytes = 8 * 1024 })),
            ids_of(profile.tensors:select({ kind = "activation", saved = false,
                                            micro_batch = 0 })),
            ids_of(profile.tensors:select({ kind = { activation = true, temp = false } })),
            #profile.tensors:select(), #profile.tensors:select({ layer = -1 }),
            s(temps0[1] == profile.tensors[14]))
    for _, bad in ipairs({ { kinds = "activation" }, { kind = "activations" }, { saved = 1 },
                           { layer = 1.5 } }) do
      local ok, err = pcall(function() return profile.tensors:select(bad) end)
      ctx:log("select bad ok=%s err=%s", s(ok), s(err))
    end
    local ok_ops, err_ops = pcall(function() return profile.tensors.select(profile.ops, {}) end)
    ctx:log("select on ops ok=%s err=%s method=%s", s(ok_ops), s(err_ops),
            s(profile.segments.backward_starts))
    local layer_ids = {}
    for seg in memsim.layer_segments(profile) do layer_ids[#layer_ids + 1] = seg.id end
    local ok_seg, err_seg = pcall(function() return profile.segments:select({ parent = 1 }) end)
    ctx:log("segments top=%s inner=%s layer0=%s mb1=%d lib=%s same=%s bad=%s",
            ids_of(profile.segments:select({ top = true })),
            ids_of(profile.segments:select({ top = false })),
            ids_of(profile.segments:select({ layer = 0 })),
            #profile.segments:select({ micro_batch = 1 }), table.concat(layer_ids, ","),
            s(profile.segments:select({ top = false })[1] == profile.segments[2]),
            s(ok_seg) .. " " .. s(err_seg))
    local ok_op, err_op = pcall(function() return profile.ops:select({ phase = "fwd" }) end)
    ctx:log("ops bwd0=%s seg0=%s comm=%d fwd=%s bad=%s",
            ids_of(profile.ops:select({ phase = "backward", layer = 0 })),
            ids_of(profile.ops:select({ segment = 0 })), #profile.ops:select({ stream = "comm" }),
            ids_of(profile.ops:select({ micro_batch = 0, phase = "forward" })),
            s(ok_op) .. " " .. s(err_op))
    local ffirst, fmb = profile.ops:forward_starts()
    local lo, hi = profile.ops:layer_range()
    ctx:log("forward_starts l0=%d l1=%d mb0=%d range=%d..%d", ffirst[0][0], ffirst[0][1], fmb[0],
            lo, hi)
    local first, mb_first = profile.ops:backward_starts()
    ctx:log("backward_starts l0=%d l1=%d mb0=%d mb1=%s", first[0][0], first[0][1], mb_first[0],
            s(mb_first[1]))
    local keys = {}
    for k in pairs(profile.segments[2]) do keys[#keys + 1] = k end
    ctx:log("keys %s", table.concat(keys, ","))
    local t3 = profile.tensors[4]
    ctx:log("identity same=%s key=%s tostring=%s arr=%s type=%s", s(t3 == profile.tensors[4]),
            s(({ [t3] = "hit" })[profile.tensors[4]]), tostring(t3), tostring(profile.ops),
            type(profile.ops[1]))
    ctx:log("names op=%s seg0=%s seg1=%s seg2=%s kernel=%s", tostring(profile.ops[3]),
            tostring(profile.segments[1]), tostring(profile.segments[2]),
            tostring(profile.segments[3]), s(profile.ops[3].kernel))
    local opkeys = {}
    for k in pairs(profile.ops[3]) do opkeys[#opkeys + 1] = k end
    ctx:log("opkeys %s", table.concat(opkeys, ","))
    local n = 0
    for i, x in pairs(profile.segments) do n = n + i * (x.id + 1) end
    ctx:log("array pairs %d missing=%s", n, s(profile.ops[0]))
    local ok, err = pcall(function() profile.ops[1].name = "x" end)
    ctx:log("write ok=%s err=%s", s(ok), s(err))
    if profile.current then
      for i, d in ipairs(profile.current) do
        ctx:log("current %d %s tensor=%s segment=%s in_before=%s prefetch=%s", i, d.kind,
                s(d.tensor), s(d.segment), s(d.in_before), s(d.prefetch))
      end
      ctx:log("current stable=%s n=%d", s(profile.current.stable), #profile.current)
    end
  end,
}
