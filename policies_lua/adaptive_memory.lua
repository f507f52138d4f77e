-- adaptive_memory: MindSpeed's adaptive memory optimization (seed 000),
-- with recompute as the per-layer choice.
--
-- What it reproduces (../shared/reference/memory-features.md, "Adaptive
-- memory optimization"):
--   * profiling first: step 0 runs with every layer recomputed (so it fits),
--     which measures each layer's forward time and what it keeps;
--   * per layer, the choice "recompute" (costs the layer's forward time once
--     more per micro-batch, keeps only its input) or "keep" (keeps what the
--     layer saves for backward, minus that input, on every micro-batch in
--     flight at that layer: its memory x in-flight micro-batches);
--   * a 0/1 knapsack over the layers that minimises the recompute time
--     subject to the extra memory fitting in the budget: device memory minus
--     the peak measured with every layer recomputed, minus a margin;
--   * the budget found by binary search: each candidate is checked on the
--     simulator (ctx:simulate); one that runs out of memory lowers the upper
--     bound, one that fits raises the lower bound, until they are within
--     `budget_step` bytes;
--   * an OOM in the run falls back to recomputing every layer.
--
-- Not reproduced: MindSpeed's per-module mixes of swap and recompute inside
-- a layer (its solver also weighs swapping a module when the copy hides
-- behind compute); here a layer is kept or recomputed whole.
local memsim = require("lib.memsim")

local config = {
  margin = 0.03,            -- of device memory, left for fragmentation and temporaries
  budget_step = 256 * 2^20, -- binary search stops when the bounds are this close
  unit = 16 * 2^20,         -- knapsack weight unit (bytes)
  max_simulations = 8,
}

-- Per transformer layer of this stage: recompute cost (ns over all its
-- micro-batches), extra bytes held at the peak when kept, its segments.
local function layer_table(profile)
  local layers, order = {}, {}
  for seg in memsim.layer_segments(profile) do
    local L = layers[seg.layer]
    if L == nil then
      L = { layer = seg.layer, time = 0, keep_bytes = 0, segments = {}, spans = {} }
      layers[seg.layer] = L
      order[#order + 1] = L
    end
    local t = 0
    for o = seg.first_op, seg.last_op do
      local op = profile.ops[o + 1]
      if op.start ~= nil and op.finish ~= nil then
        t = t + (op.finish - op.start)
      end
    end
    L.time = L.time + t
    local extra = seg.saved_bytes - seg.input_bytes
    if extra > L.keep_bytes then
      L.keep_bytes = extra
    end
    L.segments[#L.segments + 1] = seg.id
    L.spans[#L.spans + 1] = { seg.first_op, seg.first_backward_op }
  end
  -- In flight: the most micro-batches whose forward of the layer has run and
  -- whose backward has not reached it, at any op (1F1B: p - stage ones).
  for _, L in ipairs(order) do
    local events = {}
    for _, s in ipairs(L.spans) do
      events[#events + 1] = { s[1], 1 }
      events[#events + 1] = { s[2], -1 }
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
    L.weight = L.keep_bytes * most
    L.in_flight = most
  end
  table.sort(order, function(a, b) return a.layer < b.layer end)
  return order
end

-- 0/1 knapsack: the layers to keep (not recompute) within `budget` bytes
-- that save the most recompute time.
local function choose(order, budget)
  local cap = math.floor(budget / config.unit)
  if cap < 0 then cap = 0 end
  local best = {}
  for w = 0, cap do best[w] = 0 end
  local take = {}
  for i, L in ipairs(order) do
    local w = math.ceil(L.weight / config.unit)
    take[i] = {}
    for c = cap, w, -1 do
      local v = best[c - w] + L.time
      if v > best[c] then
        best[c] = v
        take[i][c] = true
      end
    end
  end
  local keep, c = {}, cap
  for i = #order, 1, -1 do
    if take[i][c] then
      keep[order[i].layer] = true
      c = c - math.ceil(order[i].weight / config.unit)
    end
  end
  return keep
end

local function decisions(order, keep)
  local list = {}
  for _, L in ipairs(order) do
    if not keep[L.layer] then
      for _, id in ipairs(L.segments) do
        list[#list + 1] = { kind = "recompute", segment = id }
      end
    end
  end
  return list
end

local function apply(ctx, list)
  for _, d in ipairs(list) do
    ctx:recompute(d.segment)
  end
end

local function recompute_all(profile, ctx)
  for seg in memsim.layer_segments(profile) do
    ctx:recompute(seg.id)
  end
end

local chosen = {}   -- per stage: the decision list found
local fallback = {} -- per stage: an OOM sent it back to full recompute

local function count(set)
  local n = 0
  for _ in pairs(set) do n = n + 1 end
  return n
end

local function search(profile, ctx)
  local order = layer_table(profile)
  local hi = profile.capacity * (1 - config.margin) - profile.peak_allocated
  local lo = 0
  local best, best_keep = decisions(order, {}), {} -- every layer recomputed: known to fit
  local budget = hi
  for _ = 1, config.max_simulations do
    if budget < 0 or hi - lo < config.budget_step then break end
    local keep = choose(order, budget)
    local list = decisions(order, keep)
    local r = ctx:simulate(list)
    if r.oom then
      hi = budget
    else
      lo = budget
      best, best_keep = list, keep
    end
    budget = (lo + hi) / 2
  end
  local kept = count(best_keep)
  ctx:log("stage %d: %d of %d layers kept, %d recomputed (budget %s)", profile.stage, kept,
          #order, #order - kept, memsim.format_bytes(math.max(lo, 0)))
  return best
end

return {
  name = "adaptive_memory",
  plan = function(profile, ctx)
    local stage = profile.stage
    if fallback[stage] or not profile.measured then
      recompute_all(profile, ctx) -- profile first (or give up after an OOM)
      if fallback[stage] then ctx:stable() end
      return
    end
    if chosen[stage] == nil then
      chosen[stage] = search(profile, ctx)
    end
    apply(ctx, chosen[stage])
    ctx:stable()
  end,
  on_oom = function(request, ctx, profile)
    if fallback[profile.stage] then
      return
    end
    fallback[profile.stage] = true
    recompute_all(profile, ctx)
    ctx:log("stage %d: out of memory at op %d; every layer recomputed from now on",
            profile.stage, request.op)
  end,
}
