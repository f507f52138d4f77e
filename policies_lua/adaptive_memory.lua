-- adaptive_memory: MindSpeed's adaptive memory optimization (seed 000,
-- --adaptive-memory-optimization; mindspeed/core/memory/adaptive_memory).
--
-- What it reproduces (../shared/reference/memory-features.md, "Adaptive
-- memory optimization"):
--   * profiling first: step 0 recomputes every layer (so it fits) and
--     measures each layer's and module's forward time, what each keeps, and
--     the backward time the copies back can hide behind;
--   * per layer the choices are keep, full recompute, full swap, and
--     per-module mixes: any of the layer's recompute modules (norms,
--     attention core, activation: the segments inside the layer) recomputed,
--     with the saved tensors of the layer's modules (attention, MLP, ...)
--     swapped.  Recompute costs the module's forward time and frees what it
--     keeps; a swap costs only the copy time compute cannot hide (a copy out
--     behind the layer's forward, a copy in behind its backward, at the
--     device's host-link bandwidth);
--   * swap candidates refined during profiling: a module whose copy out
--     would add more than 5% to the layer's forward time is replaced by its
--     children (down to the ops), so a slow copy is cut into pieces that hide;
--   * the solver: a knapsack dynamic program over the layers (each takes one
--     combination; dominated combinations dropped first) minimising time
--     subject to the extra memory (kept bytes x the micro-batches in flight
--     at that layer, as num_warmup_bs_in_chunks counts them) fitting the
--     budget; the budget found by binary search (the dichotomy), each
--     candidate checked on the simulator (ctx:simulate): an OOM lowers the
--     upper bound, a fit raises the lower one;
--   * SwapManager: an out-of-memory inside a step is rescued by swapping
--     tensors out (oom_rescue), and a step that needed it counts as an OOM
--     of the policy: the upper bound drops to it and the search runs again;
--   * MindSpeed's refusals: with full recompute (the scenario's recompute
--     settings) or with the memory-fragmentation allocator it stops with an
--     error, as MindSpeed asserts.
local memsim = require("lib.memsim")

local config = {
  margin = 0.03,              -- of device memory, left for fragmentation and temporaries
  budget_step = 256 * 2^20,   -- the dichotomy stops when the bounds are this close
  unit = 16 * 2^20,           -- knapsack weight unit (bytes)
  max_simulations = 8,
  split_threshold = 0.05,     -- a swap unit adding more than this to the forward is split
  max_combinations = 24,      -- per layer, after dropping dominated ones
  -- A copy that hides behind compute still costs this share of its time:
  -- it competes with the pipeline's p2p for the link and with the kernels
  -- it overlaps for HBM, so swapping is never chosen over keeping for free.
  hidden_copy_cost = 0.05,
}

-- ---- refusals -------------------------------------------------------------

local function refuse_combinations(profile)
  if profile.allocator == "mindspeed" then
    error("adaptive memory optimization cannot run with the memory-fragmentation allocator "
          .. "(allocator flavour \"mindspeed\"): both replace PyTorch's allocator, and MindSpeed "
          .. "asserts against the combination (seed 000, 注意事项 1)", 0)
  end
  for _, d in ipairs(profile.declared) do
    if d.kind == "recompute" and profile.segments[d.segment + 1].parent == nil then
      error("adaptive memory optimization is incompatible with full recompute (the scenario "
            .. "recomputes " .. profile.segments[d.segment + 1].name .. "): MindSpeed refuses "
            .. "the combination (seed 000, 使用方法 note 1); turn the scenario's recompute off",
            0)
    end
  end
end

-- ---- profiling ------------------------------------------------------------

local function op_time(profile, o)
  local op = profile.ops[o + 1]
  if op.start ~= nil and op.finish ~= nil then return op.finish - op.start end
  return 0
end

local function span_time(profile, first, last)
  local t = 0
  for o = first, last do t = t + op_time(profile, o) end
  return t
end

-- The name of a tensor or op below its layer: "layers.3.mlp.linear_fc1.out"
-- -> { "mlp", "linear_fc1", "out" }.
local function path_below_layer(name)
  local parts = {}
  for p in string.gmatch(name, "[^%.]+") do parts[#parts + 1] = p end
  local out = {}
  for i = 3, #parts do out[#out + 1] = parts[i] end
  return out
end

-- Layer segments grouped by layer, with the module segments inside.
local function layer_segments(profile)
  local by_layer, order = {}, {}
  for _, seg in ipairs(profile.segments) do
    local top = seg.parent == nil and seg or profile.segments[seg.parent + 1]
    if top.parent == nil and top.layer ~= nil then
      local L = by_layer[top.layer]
      if L == nil then
        L = { layer = top.layer, mbs = {}, count = 0 }
        by_layer[top.layer] = L
        order[#order + 1] = L
      end
      local m = L.mbs[top.micro_batch]
      if m == nil then
        m = { layer_seg = top, modules = {} }
        L.mbs[top.micro_batch] = m
        L.count = L.count + 1
      end
      if seg.parent ~= nil then m.modules[#m.modules + 1] = seg end
    end
  end
  table.sort(order, function(a, b) return a.layer < b.layer end)
  return order
end

-- Micro-batches in flight at a layer: the most whose forward of it has run
-- and whose backward has not (1F1B: p - stage of them; interleaved: more).
local function in_flight(L)
  local events = {}
  for _, m in pairs(L.mbs) do
    events[#events + 1] = { m.layer_seg.first_op, 1 }
    events[#events + 1] = { m.layer_seg.first_backward_op, -1 }
  end
  table.sort(events, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  local live, most = 0, 0
  for _, e in ipairs(events) do
    live = live + e[2]
    if live > most then most = live end
  end
  return most
end

-- What recomputing a module segment alone drops: the saved tensors made
-- inside it that nothing outside it reads in forward (lib/exec's rule).
local function module_drops(profile, seg)
  local bytes = 0
  for o = seg.first_op, seg.last_op do
    for _, t in ipairs(profile.ops[o + 1].outputs) do
      local tn = profile.tensors[t + 1]
      if tn.saved and not tn.persistent then
        local inside = true
        for _, u in ipairs(tn.uses) do
          local op = profile.ops[u + 1]
          if op.phase == "forward" and (u < seg.first_op or u > seg.last_op) then
            inside = false
            break
          end
        end
        if inside then bytes = bytes + tn.bytes end
      end
    end
  end
  return bytes
end

-- The layer's swap candidates (saved activations made in it, with a forward
-- and a backward use), grouped into units by module, each unit split into
-- its children while its copy out would add more than split_threshold to the
-- layer's forward time.
local function swap_units(profile, m, fwd_time, d2h)
  local seg = m.layer_seg
  local leaves, seen = {}, {}
  for o = seg.first_op, seg.last_op do
    for _, t in ipairs(profile.ops[o + 1].outputs) do
      local tn = profile.tensors[t + 1]
      -- A name can repeat in a layer (each ring step of context-parallel
      -- attention makes its own "out"): the nth of a name is the tensor.
      local nth = (seen[tn.name] or 0) + 1
      if tn.kind == "activation" then seen[tn.name] = nth end
      if tn.saved and not tn.persistent and tn.kind == "activation"
          and tn.last_forward_use ~= nil and tn.first_backward_use ~= nil then
        leaves[#leaves + 1] = { name = tn.name, nth = nth, bytes = tn.bytes, producer = o,
                                path = path_below_layer(tn.name) }
      end
    end
  end
  local function group(depth, members)
    local units, by = {}, {}
    for _, leaf in ipairs(members) do
      local k = table.concat(leaf.path, ".", 1, math.min(depth, #leaf.path))
      if by[k] == nil then
        by[k] = { key = k, depth = depth, members = {}, bytes = 0, last_producer = 0 }
        units[#units + 1] = by[k]
      end
      local u = by[k]
      u.members[#u.members + 1] = leaf
      u.bytes = u.bytes + leaf.bytes
      u.last_producer = math.max(u.last_producer, leaf.producer)
    end
    return units
  end
  local out = {}
  local function refine(unit)
    -- The copy can hide behind the layer's compute after the unit is made.
    local hide = span_time(profile, unit.last_producer, seg.last_op)
    local delay = unit.bytes / d2h * 1e9 - hide
    local deepest = 0
    for _, leaf in ipairs(unit.members) do deepest = math.max(deepest, #leaf.path) end
    if fwd_time > 0 and delay > config.split_threshold * fwd_time and unit.depth < deepest
        and #unit.members > 1 then
      for _, child in ipairs(group(unit.depth + 1, unit.members)) do refine(child) end
    else
      out[#out + 1] = unit
    end
  end
  for _, u in ipairs(group(1, leaves)) do refine(u) end
  table.sort(out, function(a, b) return a.key < b.key end)
  return out
end

-- One layer's combinations: { extra bytes kept, time per micro-batch, what }.
local function combinations(profile, L)
  local lowest
  for mb in pairs(L.mbs) do
    if lowest == nil or mb < lowest then lowest = mb end
  end
  local m = L.mbs[lowest]
  local seg = m.layer_seg
  local fwd = span_time(profile, seg.first_op, seg.last_op)
  local bwd = 0
  for _, op in ipairs(profile.ops:select({ layer = L.layer, micro_batch = seg.micro_batch,
                                            phase = "backward" })) do
    bwd = bwd + op_time(profile, op.id)
  end
  local keep = seg.saved_bytes - seg.input_bytes
  local d2h = profile.device.d2h_bw or 25e9
  local h2d = profile.device.h2d_bw or 25e9
  local modules = {}
  for _, ms in ipairs(m.modules) do
    modules[#modules + 1] = { name = path_below_layer(ms.name), drops = module_drops(profile, ms),
                              time = span_time(profile, ms.first_op, ms.last_op),
                              first = ms.first_op, last = ms.last_op }
  end
  local units = swap_units(profile, m, fwd, d2h)
  local combos = {
    { extra = math.max(keep, 0), time = 0, what = "keep" },
    { extra = 0, time = fwd, what = "recompute", full = true },
  }
  local all_swap = 0
  for _, u in ipairs(units) do all_swap = all_swap + u.bytes end
  -- A recompute subset (bit mask over modules) with a prefix of the swap
  -- units not inside recomputed modules, largest first.
  local n_mod = math.min(#modules, 6)
  for mask = 0, (1 << n_mod) - 1 do
    local freed, rtime, rec = 0, 0, {}
    for i = 1, n_mod do
      if mask & (1 << (i - 1)) ~= 0 then
        freed = freed + modules[i].drops
        rtime = rtime + modules[i].time
        rec[#rec + 1] = i
      end
    end
    local avail = {}
    for _, u in ipairs(units) do
      local covered = false
      for _, i in ipairs(rec) do
        local mod = modules[i]
        if u.last_producer >= mod.first and u.last_producer <= mod.last then covered = true end
      end
      if not covered then avail[#avail + 1] = u end
    end
    table.sort(avail, function(a, b)
      if a.bytes ~= b.bytes then return a.bytes > b.bytes end
      return a.key < b.key
    end)
    local swapped, chosen = 0, {}
    for k = 0, #avail do
      if k > 0 then
        swapped = swapped + avail[k].bytes
        chosen[#chosen + 1] = avail[k]
      end
      if mask ~= 0 or k > 0 then
        local out_t, in_t = swapped / d2h * 1e9, swapped / h2d * 1e9
        local exposed = math.max(0, out_t - fwd) + math.max(0, in_t - bwd)
                        + config.hidden_copy_cost * (out_t + in_t)
        local units_copy = {}
        for i, u in ipairs(chosen) do units_copy[i] = u end
        combos[#combos + 1] = {
          extra = math.max(keep - freed - swapped, 0), time = rtime + exposed,
          what = (#rec > 0 and "mix" or (k == #avail and "swap" or "mix")),
          modules = rec, units = units_copy,
        }
      end
    end
  end
  -- Drop dominated combinations (more memory and no less time).
  table.sort(combos, function(a, b)
    if a.extra ~= b.extra then return a.extra < b.extra end
    return a.time < b.time
  end)
  local front = {}
  for _, c in ipairs(combos) do
    if #front == 0 or c.time < front[#front].time then front[#front + 1] = c end
  end
  while #front > config.max_combinations do table.remove(front, #front // 2 + 1) end
  L.modules, L.fwd = modules, fwd
  return front
end

-- ---- solver ---------------------------------------------------------------

-- Knapsack over layers: each takes one combination; minimise the time (x its
-- micro-batches) with the extra memory (x in flight) within budget.
local function solve(order, budget)
  local cap = math.max(0, math.floor(budget / config.unit))
  local INF = math.huge
  local best = { [0] = 0 }
  for w = 1, cap do best[w] = 0 end
  local choice = {}
  for i, L in ipairs(order) do
    -- Each combination's weight and cost do not depend on w: computed once a
    -- layer, not once a cell (the table has budget / unit cells a layer, and
    -- this loop was nearly all of the policy's own time).
    local cws, vals = {}, {}
    for ci, c in ipairs(L.combos) do
      cws[ci] = math.ceil(c.extra * L.in_flight / config.unit)
      vals[ci] = c.time * L.count
    end
    -- Combinations outside, cells inside: each cell still meets them in
    -- order and keeps the first of equal costs, as a scan per cell would.
    local nxt, pick = {}, {}
    for w = 0, cap do nxt[w] = INF end
    for ci = 1, #cws do
      local cw, val = cws[ci], vals[ci]
      for w = math.max(cw, 0), cap do
        local b = best[w - cw]
        if b < INF then
          local v = b + val
          if v < nxt[w] then nxt[w], pick[w] = v, ci end
        end
      end
    end
    best, choice[i] = nxt, pick
  end
  if best[cap] == INF then return nil end
  local picks, w = {}, cap
  for i = #order, 1, -1 do
    local ci = choice[i][w]
    picks[i] = ci
    w = w - math.ceil(order[i].combos[ci].extra * order[i].in_flight / config.unit)
  end
  return picks
end

-- Tensors of a layer and micro-batch by name and occurrence (names repeat
-- across layers and micro-batches, and within a layer: swap_units' nth).
local function tensor_index(profile)
  local index, count = {}, {}
  for _, t in ipairs(profile.tensors:select({ kind = "activation" })) do
    if t.layer ~= nil and t.micro_batch ~= nil then
      local key = t.layer .. ":" .. t.micro_batch .. ":" .. t.name
      count[key] = (count[key] or 0) + 1
      index[key .. ":" .. count[key]] = t.id
    end
  end
  return index
end

local function decisions(profile, order, picks, index)
  local list = {}
  for i, L in ipairs(order) do
    local c = L.combos[picks[i]]
    for mb, m in pairs(L.mbs) do
      if c.full then
        list[#list + 1] = { kind = "recompute", segment = m.layer_seg.id }
      elseif c.what ~= "keep" then
        for _, mi in ipairs(c.modules or {}) do
          local want = table.concat(L.modules[mi].name, ".")
          for _, ms in ipairs(m.modules) do
            if table.concat(path_below_layer(ms.name), ".") == want then
              list[#list + 1] = { kind = "recompute", segment = ms.id }
            end
          end
        end
        for _, u in ipairs(c.units or {}) do
          for _, leaf in ipairs(u.members) do
            local id = index[L.layer .. ":" .. mb .. ":" .. leaf.name .. ":" .. leaf.nth]
            if id ~= nil then list[#list + 1] = { kind = "swap", tensor = id } end
          end
        end
      end
    end
  end
  table.sort(list, function(a, b)
    if a.kind ~= b.kind then return a.kind < b.kind end
    return (a.segment or a.tensor) < (b.segment or b.tensor)
  end)
  return list
end

local function recompute_all(profile, ctx)
  for seg in memsim.layer_segments(profile) do ctx:recompute(seg.id) end
end

local function summary(order, picks)
  local n = { keep = 0, recompute = 0, swap = 0, mix = 0 }
  for i, L in ipairs(order) do
    local c = L.combos[picks[i]]
    local k = c.full and "recompute" or c.what
    n[k] = n[k] + 1
  end
  return n
end

local stages = {} -- per pipeline stage: { order, index, hi, lo, chosen, picks }

local function search(profile, ctx, st)
  local budget = st.hi
  local best, best_picks, best_time = nil, nil, nil
  for _ = 1, config.max_simulations do
    if budget < 0 or st.hi - st.lo < config.budget_step then break end
    local picks = solve(st.order, budget)
    if picks ~= nil then
      local list = decisions(profile, st.order, picks, st.index)
      local r = ctx:simulate(list)
      if r.oom then
        st.hi = budget
      else
        st.lo = budget
        -- The fastest plan that fits, not only the last one: with swaps in
        -- the mix, more budget is not always faster.
        if best_time == nil or r.step_time < best_time then
          best, best_picks, best_time = list, picks, r.step_time
        end
      end
    else
      st.hi = budget
    end
    budget = (st.lo + st.hi) / 2
  end
  return best, best_picks
end

local function plan_stage(profile, ctx, st)
  local best, picks = search(profile, ctx, st)
  if best == nil then
    -- Nothing better than recomputing every layer fits.
    local list = {}
    for _, L in ipairs(st.order) do
      for _, m in pairs(L.mbs) do list[#list + 1] = { kind = "recompute", segment = m.layer_seg.id } end
    end
    table.sort(list, function(a, b) return a.segment < b.segment end)
    st.chosen = list
    ctx:log("stage %d: %d layers, every one recomputed (budget %s)", profile.stage, #st.order,
            memsim.format_bytes(math.max(st.lo, 0)))
    return
  end
  st.chosen = best
  local n = summary(st.order, picks)
  ctx:log("stage %d: %d layers: %d kept, %d recomputed, %d swapped, %d mixed (budget %s)",
          profile.stage, #st.order, n.keep, n.recompute, n.swap, n.mix,
          memsim.format_bytes(math.max(st.lo, 0)))
end

return {
  name = "adaptive_memory",
  oom_rescue = true,
  plan = function(profile, ctx)
    refuse_combinations(profile)
    local st = stages[profile.stage]
    if not profile.measured then
      recompute_all(profile, ctx) -- profile first
      return
    end
    if st == nil then
      st = { order = layer_segments(profile), index = tensor_index(profile) }
      for _, L in ipairs(st.order) do
        L.in_flight = in_flight(L)
        L.combos = combinations(profile, L)
      end
      st.hi = profile.capacity * (1 - config.margin) - profile.peak_allocated
      st.lo = 0
      stages[profile.stage] = st
      plan_stage(profile, ctx, st)
    elseif profile.rescued.count > 0 or profile.oom then
      -- SwapManager had to step in: this budget is too high (dichotomy).
      st.hi = math.max(0, st.lo - config.budget_step)
      st.lo = 0
      ctx:log("stage %d: step %d needed %d OOM rescues; searching below %s", profile.stage,
              profile.step, profile.rescued.count, memsim.format_bytes(st.hi))
      plan_stage(profile, ctx, st)
    end
    ctx:apply(st.chosen)
    ctx:stable()
  end,
  -- No tensor was left to rescue the allocation: recompute every layer from
  -- the next step, as the profiling step did.
  on_oom = function(request, ctx, profile)
    local st = stages[profile.stage]
    if st == nil or st.given_up then return end
    st.given_up = true
    st.chosen = {}
    for seg in memsim.layer_segments(profile) do
      st.chosen[#st.chosen + 1] = { kind = "recompute", segment = seg.id }
    end
    ctx:apply(st.chosen)
    ctx:log("stage %d: out of memory at op %d with nothing left to rescue; every layer "
            .. "recomputed from now on", profile.stage, request.op)
  end,
}
