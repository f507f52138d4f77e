-- memsim_optimal: a search over swap and recompute with ctx:simulate, the
-- yardstick the seed features are measured against.
--
-- What it does (no published system; a knapsack-style relaxation refined
-- by simulation):
--   1. candidates: nothing; every layer recomputed (full_recompute); the
--      attention cores recomputed (selective_recompute); the saved
--      activations of the first k layers swapped one layer ahead
--      (offload_layers) for k = all and half; the attention block swapped
--      (swap_attention); the fewest segments in DTR's rematerialization
--      order (h = cost / (bytes x staleness), any segment level) that fit,
--      by bisection; each simulated, the fastest that fits kept;
--   2. the relaxation: per layer (all micro-batches) three choices -- keep,
--      swap its saved activations, recompute it -- with a memory weight
--      (the bytes it keeps) and a time cost (recompute: its forward time;
--      swap: the copy time its backward cannot hide, at the device's
--      host-link bandwidth); layers are taken greedily by cost per byte
--      freed until the freed bytes reach a target, and the target is
--      bisected on ctx:simulate (an OOM raises it, a fit lowers it); the
--      fastest fitting plan of the search replaces the candidate if faster.
-- The plan is made once per stage (at step 0, from the program and the
-- simulator) and is stable; a real step that still runs out of memory (it
-- starts from the previous step's cache, the simulator from a fresh one)
-- moves to the fastest simulated plan with a lower peak (on_oom).  Not searched: pool placement (the allocator
-- a policy brings is fixed per file) and per-module mixes inside a layer.
local memsim = require("lib.memsim")

local config = { max_simulations = 12 }

local function layers_of(profile)
  local by_layer, order = {}, {}
  for _, seg in ipairs(profile.segments) do
    if seg.parent == nil and seg.layer ~= nil then
      local L = by_layer[seg.layer]
      if L == nil then
        L = { layer = seg.layer, segs = {}, saved = 0, flops = 0, swap = {}, swap_bytes = 0 }
        by_layer[seg.layer] = L
        order[#order + 1] = L
      end
      L.segs[#L.segs + 1] = seg.id
      L.saved = L.saved + seg.saved_bytes
      for o = seg.first_op, seg.last_op do L.flops = L.flops + (profile.ops[o + 1].flops or 0) end
    end
  end
  for _, t in ipairs(memsim.tensors(profile, { kind = "activation", saved = true,
                                               min_bytes = 2^20 })) do
    local L = t.layer ~= nil and by_layer[t.layer]
    if L and t.micro_batch ~= nil and t.last_forward_use ~= nil and t.first_backward_use ~= nil then
      L.swap[#L.swap + 1] = t
      L.swap_bytes = L.swap_bytes + t.bytes
    end
  end
  table.sort(order, function(a, b) return a.layer < b.layer end)
  return order
end

-- Decision lists -----------------------------------------------------------

local function recompute_layers(list, L)
  for _, id in ipairs(L.segs) do list[#list + 1] = { kind = "recompute", segment = id } end
end

local function swap_layer(profile, list, L, first, mb_first)
  for _, t in ipairs(L.swap) do
    local mbf = first[t.micro_batch] or {}
    local from = mbf[t.layer + 1] or mb_first[t.micro_batch] or t.first_backward_use
    list[#list + 1] = { kind = "swap", tensor = t.id,
                        prefetch = math.max(1, t.first_backward_use - from) }
  end
end

local function core_list(profile)
  local list = {}
  for _, seg in ipairs(profile.segments) do
    local n = seg.name or ""
    if seg.parent ~= nil and (n:match("attention%.core$") or n:match("core_attention$")) then
      list[#list + 1] = { kind = "recompute", segment = seg.id }
    end
  end
  return list
end

local function candidates(profile, layers, first, mb_first)
  local c = { { name = "none", list = {} } }
  local full, all_swap, half_swap = {}, {}, {}
  for i, L in ipairs(layers) do
    recompute_layers(full, L)
    swap_layer(profile, all_swap, L, first, mb_first)
    if i <= #layers // 2 then swap_layer(profile, half_swap, L, first, mb_first) end
  end
  c[#c + 1] = { name = "full_recompute", list = full }
  c[#c + 1] = { name = "selective_recompute", list = core_list(profile) }
  c[#c + 1] = { name = "swap all layers", list = all_swap }
  c[#c + 1] = { name = "swap half the layers", list = half_swap }
  return c
end

-- The relaxation -------------------------------------------------------------

local function choice_costs(profile, layers)
  local flops_per_ns = 0
  local dev = profile.device
  local peak = dev and dev.peak_flops and (dev.peak_flops.bf16 or dev.peak_flops.fp16) or 1e14
  flops_per_ns = peak / 1e9 * 0.5 -- half of peak: what a layer's kernels reach
  local bw = dev and dev.d2h_bw or 20e9
  local opts = {}
  for _, L in ipairs(layers) do
    local fwd_ns = L.flops / flops_per_ns
    -- The copy out and back hide behind forward and backward (~3x forward).
    local copy_ns = L.swap_bytes / bw * 1e9
    local swap_cost = math.max(0, copy_ns - 3 * fwd_ns) + 0.02 * copy_ns
    opts[#opts + 1] = { L = L, what = "swap", bytes = L.swap_bytes, cost = swap_cost }
    opts[#opts + 1] = { L = L, what = "recompute", bytes = L.saved, cost = fwd_ns }
  end
  table.sort(opts, function(a, b)
    local ra, rb = a.cost / math.max(a.bytes, 1), b.cost / math.max(b.bytes, 1)
    if ra ~= rb then return ra < rb end
    if a.L.layer ~= b.L.layer then return a.L.layer < b.L.layer end
    return a.what < b.what
  end)
  return opts
end

local function relaxed_plan(profile, opts, target, first, mb_first)
  local taken, freed, list = {}, 0, {}
  for _, o in ipairs(opts) do
    if freed >= target then break end
    if not taken[o.L] and o.bytes > 0 then
      taken[o.L] = true
      freed = freed + o.bytes
      if o.what == "recompute" then
        recompute_layers(list, o.L)
      else
        swap_layer(profile, list, o.L, first, mb_first)
      end
    end
  end
  return list, freed
end

local function better(r, best)
  return not r.oom and (best == nil or r.step_time < best.time)
end

-- The fewest segments of DTR's order that fit (bisection on the count).
local function dtr_candidate(profile, ctx, budget)
  local order = memsim.rematerialization_order(profile)
  local function first_k(k)
    local list = {}
    for i = 1, k do list[i] = { kind = "recompute", segment = order[i].id } end
    return list
  end
  local lo, hi, sims = 0, #order, 1
  local r = ctx:simulate(first_k(hi))
  if r.oom then return nil, sims end
  local best_r = r
  while hi - lo > 1 and sims < budget do
    local mid = (lo + hi) // 2
    local rm = ctx:simulate(first_k(mid))
    sims = sims + 1
    if rm.oom then lo = mid else hi, best_r = mid, rm end
  end
  return { name = "rematerialization order", list = first_k(hi), time = best_r.step_time,
           peak = best_r.peak_allocated }, sims
end

-- The plans that fit, searched with whatever decisions the simulator adds
-- after each candidate (the scenario's declared ones, unless replaced).
local function search_core(profile, ctx, tag, fits)
  local layers = layers_of(profile)
  local first, mb_first = memsim.backward_starts(profile)
  local sims, none_fits = 0, false
  local function try(name, list)
    local r = ctx:simulate(list)
    sims = sims + 1
    if not r.oom then
      fits[#fits + 1] = { name = name .. tag, list = list, time = r.step_time,
                          peak = r.peak_allocated, plain = #list == 0 }
    end
    return r
  end
  for _, c in ipairs(candidates(profile, layers, first, mb_first)) do
    local r = try(c.name, c.list)
    if c.name == "none" and not r.oom then none_fits = true break end
  end
  if not none_fits then
    local d, n = dtr_candidate(profile, ctx, 10)
    sims = sims + n
    if d ~= nil then
      d.name = d.name .. tag
      fits[#fits + 1] = d
    end
    local opts = choice_costs(profile, layers)
    local total = 0
    for _, L in ipairs(layers) do total = total + math.max(L.saved, L.swap_bytes) end
    local lo, hi, n_relax = 0, total, 0
    while n_relax < config.max_simulations and hi - lo > total / 64 do
      local target = (lo + hi) / 2
      local r = try("relaxation", (relaxed_plan(profile, opts, target, first, mb_first)))
      n_relax = n_relax + 1
      if r.oom then lo = target else hi = target end
    end
  end
  return sims
end

-- list followed by extra, a tensor's first swap standing.
local function with_declared(list, extra)
  local out, swapped = {}, {}
  for _, d in ipairs(list) do
    out[#out + 1] = d
    if d.kind == "swap" then swapped[d.tensor] = true end
  end
  for _, d in ipairs(extra) do
    if not (d.kind == "swap" and swapped[d.tensor]) then out[#out + 1] = d end
  end
  return out
end

-- Every plan simulated that fits, best first: the choice and its
-- fallbacks.  The scenario's declared decisions (MindFormers' swap_config,
-- a recompute setting) are a choice too: with them, with their recomputes
-- only, and without them; once compared, all explicit (replace_declared).
local function search(profile, ctx)
  local fits = {}
  local sims = search_core(profile, ctx, "", fits)
  local declared, no_swaps = {}, {}
  for _, d in ipairs(profile.declared) do
    declared[#declared + 1] = d
    if d.kind ~= "swap" then no_swaps[#no_swaps + 1] = d end
  end
  local replaced = #declared > 0
  if replaced then
    ctx:replace_declared()
    for _, f in ipairs(fits) do f.list = with_declared(f.list, declared) end
    if #no_swaps < #declared then
      table.sort(fits, function(a, b) return a.time < b.time end)
      local base = { { name = "none", list = {} } }
      for i = 1, math.min(2, #fits) do base[#base + 1] = fits[i] end
      for _, b in ipairs(base) do
        local list = with_declared(b.list, no_swaps)
        local r = ctx:simulate(list)
        sims = sims + 1
        if not r.oom then
          fits[#fits + 1] = { name = b.name .. " + declared recomputes", list = list,
                              time = r.step_time, peak = r.peak_allocated,
                              plain = #b.list == 0 }
        end
      end
    end
    sims = sims + search_core(profile, ctx, " without the scenario's settings", fits)
  end
  table.sort(fits, function(a, b)
    if a.time ~= b.time then return a.time < b.time end
    return a.peak < b.peak
  end)
  -- Where no decision of the policy's own is needed, none is made: a
  -- one-stage simulation can time a swap plan a hair faster than none (its
  -- receives from the stages it does not simulate), which the pipeline
  -- does not bear out.
  for i, f in ipairs(fits) do
    if f.plain and f.time <= fits[1].time * 1.001 then
      table.remove(fits, i)
      table.insert(fits, 1, f)
      break
    end
  end
  return fits, sims, replaced
end

local function apply(ctx, list)
  for _, d in ipairs(list) do
    if d.kind == "recompute" then ctx:recompute(d.segment)
    elseif d.kind == "keep" then ctx:keep(d.tensor)
    else ctx:swap(d.tensor, { out_after = d.out_after, in_before = d.in_before,
                              prefetch = d.prefetch }) end
  end
end

local chosen = {}

return {
  name = "memsim_optimal",
  plan = function(profile, ctx)
    local st = chosen[profile.stage]
    if st == nil then
      local fits, sims, replaced = search(profile, ctx)
      st = { fits = fits, at = 1, replaced = replaced }
      if #fits == 0 then
        local list = {}
        for _, L in ipairs(layers_of(profile)) do recompute_layers(list, L) end
        st.fits[1] = { name = "full_recompute (nothing fits)", list = list, peak = 0 }
      end
      chosen[profile.stage] = st
      ctx:log("stage %d: %s, %d decisions (%d simulations, %d plans fit)", profile.stage,
              st.fits[1].name, #st.fits[1].list, sims, #fits)
    end
    if st.replaced then ctx:replace_declared() end
    apply(ctx, st.fits[st.at].list)
    ctx:stable()
  end,
  on_oom = function(_, ctx, profile)
    local st = chosen[profile.stage]
    if st == nil then return end
    local cur = st.fits[st.at]
    for i = st.at + 1, #st.fits do
      if st.fits[i].peak < cur.peak then
        st.at = i
        apply(ctx, st.fits[i].list)
        ctx:log("stage %d: out of memory; falling back to %s", profile.stage, st.fits[i].name)
        return
      end
    end
  end,
}
