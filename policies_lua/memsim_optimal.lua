-- memsim_optimal: a search over swap and recompute with ctx:simulate, the
-- yardstick the seed features are measured against.
--
-- What it does (no published system; a knapsack-style relaxation refined
-- by simulation, bounded below):
--   0. none, if it fits two steps in a row; else the floor: none on a
--      device whose memory never runs out (ctx:simulate's capacity), a step
--      time no plan of swaps and recomputes can beat.  The first plan that
--      fits two steps in a row within floor_tolerance of it ends the search;
--   1. candidates, swaps first (a swap the backward hides costs nothing):
--      the saved activations of the first k layers swapped one layer ahead
--      (offload_layers) for k = half and all; the attention cores recomputed
--      (selective_recompute); every layer recomputed (full_recompute);
--   2. the relaxation: per layer (all micro-batches) three choices -- keep,
--      swap its saved activations, recompute it -- with a memory weight
--      (the bytes it keeps) and a time cost (recompute: its forward time;
--      swap: the copy time its backward cannot hide, at the device's
--      host-link bandwidth); layers are taken greedily by cost per byte
--      freed until the freed bytes reach a target, and the target is
--      bisected on ctx:simulate (an OOM raises it, a fit lowers it);
--   3. the fewest segments in DTR's rematerialization order (h = cost /
--      (bytes x staleness), any segment level) that fit, by bisection
--      (recomputes only, so it never reaches the floor and comes last);
--   the fastest plan that fits is kept.
-- Each distinct plan is simulated once (a key names it; two relaxation
-- targets that take the same layers share a simulation), and DTR's probe of
-- every segment runs only where it can decide something (bench/README.md,
-- "Policy search").
-- The plan is made once per stage (at step 0, from the program and the
-- simulator) and is stable: the choice is the fastest plan that also fits
-- two steps in a row (the second from the first's cache, as a real run's
-- steps follow each other); a real step that still runs out of memory
-- moves to the fastest simulated plan with a lower peak, and last to full
-- recompute (on_oom).  Not searched: pool placement (the allocator a policy
-- brings is fixed per file) and per-module mixes inside a layer.
local memsim = require("lib.memsim")

-- floor_tolerance: a plan within this fraction of the floor ends the search
-- (a swap's launches and events cost microseconds the backward cannot hide:
-- gpt-175b-trimmed-tp8's half-swapped plan is 40 us, 2e-6, above it).
local config = { max_simulations = 12, floor_tolerance = 1e-4 }

local function layers_of(profile)
  local by_layer, order = {}, {}
  for _, seg in ipairs(profile.segments:select({ top = true })) do
    if seg.layer ~= nil then
      local L = by_layer[seg.layer]
      if L == nil then
        L = { layer = seg.layer, recompute = {}, segs = {}, saved = 0, swap = {}, swap_bytes = 0 }
        by_layer[seg.layer] = L
        order[#order + 1] = L
      end
      L.recompute[#L.recompute + 1] = { kind = "recompute", segment = seg.id }
      L.segs[#L.segs + 1] = seg
      L.saved = L.saved + seg.saved_bytes
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
-- A layer's decisions are made once, as tables every list that takes the
-- layer shares (ctx:simulate only reads them): building a plan appends, and
-- reads no profile field, which through the views was a fifth of the Lua
-- side of a 70B search (bench/README.md).

local function recompute_layers(list, L)
  for _, d in ipairs(L.recompute) do list[#list + 1] = d end
end

-- Each layer's swaps: out after the last forward use, back from the start of
-- the backward of the layer above (memsim.swap_one_layer_ahead).
local function add_swap_decisions(layers, first, mb_first)
  for _, L in ipairs(layers) do
    L.swaps = {}
    for i, t in ipairs(L.swap) do
      local mbf = first[t.micro_batch] or {}
      local from = mbf[t.layer + 1] or mb_first[t.micro_batch] or t.first_backward_use
      L.swaps[i] = { kind = "swap", tensor = t.id,
                     prefetch = math.max(1, t.first_backward_use - from) }
    end
  end
end

local function swap_layer(list, L)
  for _, d in ipairs(L.swaps) do list[#list + 1] = d end
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

-- A candidate is a recipe (build() makes its decision list) and a key that
-- names the plan: lists of a 70B stage hold 10^4-10^5 decisions, so only
-- the list being simulated exists at a time (the Lua heap is capped), and a
-- plan met twice (two relaxation targets that take the same layers) is
-- simulated once.

-- Every layer recomputed: a candidate, and on_oom's last resort.
local function full_recompute_of(layers, name)
  return { name = name, key = "full", peak = 0, build = function()
    local list = {}
    for _, L in ipairs(layers) do recompute_layers(list, L) end
    return list
  end }
end

local function candidates(profile, layers)
  local function swap_first(n)
    return function()
      local list = {}
      for i = 1, n do swap_layer(list, layers[i]) end
      return list
    end
  end
  -- Swaps first: a swap the backward hides costs no time, so they are the
  -- candidates likeliest to reach the floor (search_core) and end the search.
  return {
    { name = "swap half the layers", key = "swap half", build = swap_first(#layers // 2), steps = 2 },
    { name = "swap all layers", key = "swap all", build = swap_first(#layers), steps = 2 },
    { name = "selective_recompute", key = "selective", build = function() return core_list(profile) end },
    full_recompute_of(layers, "full_recompute"),
  }
end

-- The relaxation -------------------------------------------------------------

-- A layer's forward FLOPs, which only the relaxation weighs: summed when
-- it first asks (a search the floor ends sooner never walks the ops).
local function layer_flops(profile, L)
  if L.flops == nil then
    L.flops = 0
    for _, seg in ipairs(L.segs) do
      for o = seg.first_op, seg.last_op do L.flops = L.flops + (profile.ops[o + 1].flops or 0) end
    end
  end
  return L.flops
end

local function choice_costs(profile, layers)
  local flops_per_ns = 0
  local dev = profile.device
  local peak = dev and dev.peak_flops and (dev.peak_flops.bf16 or dev.peak_flops.fp16) or 1e14
  flops_per_ns = peak / 1e9 * 0.5 -- half of peak: what a layer's kernels reach
  local bw = dev and dev.d2h_bw or 20e9
  local opts = {}
  for _, L in ipairs(layers) do
    local fwd_ns = layer_flops(profile, L) / flops_per_ns
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

-- The choices taken, in cost order, until the freed bytes reach target: the
-- plan is the first n of them, so n names it.
local function relaxed_count(opts, target)
  local taken, freed, n = {}, 0, 0
  for i, o in ipairs(opts) do
    if freed >= target then break end
    if not taken[o.L] and o.bytes > 0 then
      taken[o.L] = true
      freed = freed + o.bytes
      n = i
    end
  end
  return n
end

local function relaxed_plan(opts, n)
  local taken, list = {}, {}
  for i = 1, n do
    local o = opts[i]
    if not taken[o.L] and o.bytes > 0 then
      taken[o.L] = true
      if o.what == "recompute" then
        recompute_layers(list, o.L)
      else
        swap_layer(list, o.L)
      end
    end
  end
  return list
end

-- The fewest segments of DTR's order that fit (bisection on the count, to
-- the end: cut short at ten probes it stopped 2 segments above the dtr
-- policy's answer on gpt-22b's 672 and ran 0.4 ms slower).  All of them is
-- probed first only where full recompute did not fit (an OOM there ends the
-- search); otherwise only if no fewer fit, which saves a step.
local function dtr_candidate(shape, sim, full_fits)
  if shape.dtr == nil then
    shape.dtr = {}
    for i, c in ipairs(memsim.rematerialization_order(shape.profile)) do
      shape.dtr[i] = { kind = "recompute", segment = c.id }
    end
  end
  local order = shape.dtr
  local function first_k(k)
    return function() return table.move(order, 1, k, 1, {}) end
  end
  local lo, hi, best_r = 0, #order, nil
  if not full_fits then
    best_r = sim("dtr " .. hi, first_k(hi))
    if best_r.oom then return nil end
  end
  while hi - lo > 1 do
    local mid = (lo + hi) // 2
    local rm = sim("dtr " .. mid, first_k(mid))
    if rm.oom then lo = mid else hi, best_r = mid, rm end
  end
  if best_r == nil then
    best_r = sim("dtr " .. hi, first_k(hi))
    if best_r.oom then return nil end
  end
  return { name = "rematerialization order", key = "dtr " .. hi, build = first_k(hi),
           time = best_r.step_time, peak = best_r.peak_allocated }
end

-- What every search_core of a stage reads: its layers with their decisions
-- (the profile does not change between the two), made on first use: a stage
-- that fits with no decision never walks its ops for them.
local function stage_layers(shape)
  if shape.layers == nil then
    shape.layers = layers_of(shape.profile)
    add_swap_decisions(shape.layers, memsim.backward_starts(shape.profile))
  end
  return shape.layers
end

-- The floor: no plan of swaps and recomputes runs a step faster than none
-- on a device whose memory never runs out (a swap or a recompute only adds
-- work), within what a one-stage simulation can tell (see search below).
-- ctx:simulate's largest capacity stands in for that device.
local UNBOUNDED = 1 << 43

-- The relaxation: a per-layer plan bisected on the bytes it frees, the
-- fewest that fit; stop(r) ends it early.
local function relaxation(shape, try, stop)
  local layers = shape.layers
  local opts = choice_costs(shape.profile, layers)
  local total = 0
  for _, L in ipairs(layers) do total = total + math.max(L.saved, L.swap_bytes) end
  local lo, hi, n_relax = 0, total, 0
  while n_relax < config.max_simulations and hi - lo > total / 64 do
    local target = (lo + hi) / 2
    local n = relaxed_count(opts, target)
    local r, f = try({ name = "relaxation", key = "relaxation " .. n, build = function()
      return relaxed_plan(opts, n)
    end })
    if stop(r, f) then return true end
    n_relax = n_relax + 1
    if r.oom then lo = target else hi = target end
  end
  return false
end

-- The plans that fit, searched with whatever decisions the simulator adds
-- after each candidate (the scenario's declared ones, unless replaced).
-- sim(key, build, steps, capacity) simulates build()'s plan once per key.
-- The first plan that fits two steps in a row as fast as the floor ends
-- the search: nothing left to try could be faster.
local NONE = { name = "none", key = "none", build = function() return {} end }

-- A fit's two steps in a row, r2, known: its peak is the higher of the two
-- steps' (steady_first reads steady and unsteady).
local function note_two_steps(f, r2)
  f.peak = math.max(f.peak, r2.peak_allocated)
  f.steady, f.unsteady = not r2.oom, r2.oom
  return f.steady
end

local function search_core(shape, sim, tag, fits)
  local fitted = {}
  -- A candidate with steps = 2 is simulated two steps in a row at once: a
  -- swap plan is the likeliest to reach the floor, whose check needs both
  -- steps, and the first answers for one.
  local function try(c)
    local r2, n = sim(c.key, c.build, c.steps)
    local r = c.steps and sim(c.key, c.build) or r2
    if not r.oom and not fitted[c.key] then
      local f = { name = c.name .. tag, key = c.key, build = c.build, time = r.step_time,
                  peak = r.peak_allocated, plain = n == 0 }
      if c.steps then note_two_steps(f, r2) end
      fitted[c.key] = f
      fits[#fits + 1] = f
    end
    return r, fitted[c.key]
  end
  -- None is a fit only if it fits two steps in a row (steady_first below),
  -- which answers for one step too.
  local r2 = sim(NONE.key, NONE.build, 2)
  if not r2.oom then
    fits[#fits + 1] = { name = NONE.name .. tag, key = NONE.key, build = NONE.build, steady = true,
                        time = r2.step_time, peak = r2.peak_allocated, plain = true }
    return
  end
  local profile, layers = shape.profile, stage_layers(shape)
  local floor = sim("none unbounded", NONE.build, 1, UNBOUNDED)
  shape.floor = shape.floor or floor -- what the scenario as written needs (the log)
  local function stop(r, f)
    if floor.oom or r.oom or r.step_time > floor.step_time * (1 + config.floor_tolerance) then
      return false
    end
    return note_two_steps(f, sim(f.key, f.build, 2))
  end
  local full_fits = false
  for _, c in ipairs(candidates(profile, layers)) do
    local r, f = try(c)
    if stop(r, f) then return end
    if c.key == "full" then full_fits = not r.oom end
  end
  if relaxation(shape, try, stop) then return end
  local d = dtr_candidate(shape, sim, full_fits)
  if d ~= nil and not fitted[d.key] then
    d.name = d.name .. tag
    fitted[d.key] = d
    fits[#fits + 1] = d
  end
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

local function and_declared(build, extra)
  return function() return with_declared(build(), extra) end
end

-- ctx:simulate once per plan: a key met again answers from the first time.
-- Returns the result and the number of decisions.
local function memo_simulator(ctx)
  local seen, count = {}, 0
  local function sim(key, build, steps, capacity)
    local one = key
    key = steps and steps > 1 and key .. " x" .. steps or key
    local s = seen[key]
    if s == nil then
      local list = build()
      s = { r = ctx:simulate(list, { steps = steps or 1, capacity = capacity }), n = #list }
      seen[key] = s
      count = count + 1
      -- The first of n steps is the one-step simulation (an OOM while
      -- setting up ran no step, and would have run none alone either).
      if key ~= one and seen[one] == nil then seen[one] = { r = s.r.steps[1] or s.r, n = #list } end
    end
    return s.r, s.n
  end
  return sim, function() return count end, function() seen = {} end
end

-- The declared decisions: the best two fits (and none) with their
-- recomputes only; all fits with them all (the search ran with them).
local function declared_variants(sim, fits, declared, no_swaps)
  for _, f in ipairs(fits) do f.build = and_declared(f.build, declared) end
  if #no_swaps == #declared then return end
  table.sort(fits, function(a, b) return a.time < b.time end)
  -- Plain (no decision of the policy's own) only with no fit beneath.
  local base = { { name = "none", build = function() return {} end, plain = true } }
  for i = 1, math.min(2, #fits) do
    base[#base + 1] = { name = fits[i].name, build = fits[i].build, plain = false }
  end
  for i, b in ipairs(base) do
    local build = and_declared(b.build, no_swaps)
    local r = sim("declared recomputes " .. i, build)
    if not r.oom then
      fits[#fits + 1] = { name = b.name .. " + declared recomputes", build = build,
                          time = r.step_time, peak = r.peak_allocated, plain = b.plain }
    end
  end
end

-- Every plan simulated that fits, best first: the choice and its
-- fallbacks.  The scenario's declared decisions (MindFormers' swap_config,
-- a recompute setting) are a choice too: with them, with their recomputes
-- only, and without them; once compared, all explicit (replace_declared).
local function search(profile, ctx)
  local fits = {}
  local sim, count, forget = memo_simulator(ctx)
  local shape = { profile = profile }
  search_core(shape, sim, "", fits)
  local declared, no_swaps = {}, {}
  for _, d in ipairs(profile.declared) do
    declared[#declared + 1] = d
    if d.kind ~= "swap" then no_swaps[#no_swaps + 1] = d end
  end
  local replaced = #declared > 0
  if replaced then
    ctx:replace_declared()
    -- The same keys name other plans from here: the declared ones no
    -- longer follow each candidate.
    forget()
    declared_variants(sim, fits, declared, no_swaps)
    forget()
    search_core(shape, sim, " without the scenario's settings", fits)
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
  return fits, count(), replaced, shape.layers, shape.floor
end

-- Each candidate was simulated from an empty cache; a real step after the
-- first starts from the cache the step before left, which can be more
-- fragmented (llama3-70b: the rematerialization plan fit one step and ran
-- out of memory in the second).  The choice is the first fit, best first,
-- that also fits two steps in a row (its peak is then the higher of the
-- two); at most STEADY_CHECKS are tried, and where none passes the order
-- stands and on_oom falls back.  Returns the simulations it ran.
local STEADY_CHECKS = 3

local function steady_first(ctx, fits)
  local ran = 0
  for i = 1, math.min(#fits, STEADY_CHECKS) do
    local f = fits[i]
    local ok = f.steady
    if not ok and not f.unsteady then
      local r = ctx:simulate(f.build(), { steps = 2 })
      ran = ran + 1
      ok = not r.oom
      if ok then f.peak = math.max(f.peak, r.peak_allocated) end
    end
    if ok then
      table.remove(fits, i)
      table.insert(fits, 1, f)
      return ran
    end
  end
  return ran
end

-- Plans kept across steps ---------------------------------------------------
-- The choice and the fallbacks an OOM can reach are kept packed (ctx:pack,
-- 24 bytes a decision), not as recipes: a recipe holds the stage's profile
-- views, and every stage's (a 70B stage's program alone is ~110 MB) would
-- stay alive through it.

-- What on_oom moves through: from the choice, each time the first later
-- plan (fits are best first) with a lower peak than the one in force, and
-- full recompute last where the search ended before simulating it (a plan
-- at the floor ends it, so the fits can be few; a stage where none fits
-- searched nothing and has no layers at hand).
local function fallback_chain(ctx, fits, layers)
  local chain = { fits[1] }
  for i = 2, #fits do
    if fits[i].peak < chain[#chain].peak then chain[#chain + 1] = fits[i] end
  end
  if layers ~= nil and chain[#chain].key ~= "full" then
    chain[#chain + 1] = full_recompute_of(layers, "full_recompute (not simulated)")
  end
  for i, f in ipairs(chain) do chain[i] = { name = f.name, plan = ctx:pack(f.build()) } end
  return chain
end

local function nothing_fits(layers)
  return full_recompute_of(layers, "full_recompute (nothing fits)")
end

local chosen = {}

return {
  name = "memsim_optimal",
  plan = function(profile, ctx)
    local st = chosen[profile.stage]
    if st == nil then
      local fits, sims, replaced, layers, floor = search(profile, ctx)
      local n_fit = #fits
      sims = sims + steady_first(ctx, fits)
      if n_fit == 0 then fits[1] = nothing_fits(layers) end
      st = { chain = fallback_chain(ctx, fits, layers), at = 1, replaced = replaced }
      chosen[profile.stage] = st
      ctx:log("stage %d: %s, %d decisions (%d simulations, %d plans fit)", profile.stage,
              st.chain[1].name, #st.chain[1].plan, sims, n_fit)
      if floor ~= nil and not floor.oom then
        ctx:log("stage %d: none would peak at %s allocated, %s reserved, on a device that never "
                .. "runs out (this one has %s)", profile.stage,
                memsim.format_bytes(floor.peak_allocated), memsim.format_bytes(floor.peak_reserved),
                memsim.format_bytes(profile.capacity))
      end
    end
    if st.replaced then ctx:replace_declared() end
    ctx:apply(st.chain[st.at].plan)
    ctx:stable()
  end,
  on_oom = function(_, ctx, profile)
    local st = chosen[profile.stage]
    local next = st and st.chain[st.at + 1]
    if next == nil then return end
    st.at = st.at + 1
    ctx:apply(next.plan)
    ctx:log("stage %d: out of memory; falling back to %s", profile.stage, next.name)
  end,
}
