-- smart_swap: MindSpeed's SmartSwap (seed 002), its whole cycle.
--
-- What it reproduces (mindspeed/core/memory/smart_swap: swap_manager.py,
-- swap_engine.py, policy_generator.py, swap_policy_config.py; summarised in
-- ../shared/reference/memory-features.md, "SmartSwap"):
--
--   * three stages over the training steps.  WARMUP steps only profile (no
--     swap is planned) while an out-of-memory error inside the step is
--     intercepted (oom_rescue: the executor swaps an idle tensor out
--     synchronously and retries, as SmartSwap's allocator hook does), so
--     the step completes.  After `warmup_step` profiles whose op count is
--     within `op_diff_thresh` of the policy's, SEARCHING_POLICY: every step
--     makes a plan from the profile and runs it, and the plan of the fastest
--     step is kept.  At step `stable_step` (warm-up included), STABLE: the
--     kept plan only runs (ctx:stable()).  Back to WARMUP when the op
--     sequence changes (op count off by op_diff_thresh or more) or when a
--     STABLE step needed an OOM rescue (MindSpeed's forced swaps).
--   * policy v2 (policy_v2 = true, the default): swap stages of
--     num_attn_layers_per_stage transformer layers of a micro-batch;
--     activations used by exactly one forward and one backward op, at most
--     swap_bucket_size bytes a stage (< 0: all), copied out after their
--     forward use and back from the start of the backward stage that runs
--     just before theirs.  policy_pref BETTER_MEMORY_SAVING adds the
--     optimizer state (out after the first forward op, back from the start
--     of the last backward stage).  A planned step that still needed
--     rescues moves BETTER_PERFORMANCE to BETTER_MEMORY_SAVING.
--   * policy v1 (policy_v2 = false): candidates of tensor_size_filter (20 MB)
--     or more used more than once (activations: out at their last forward
--     use, back at their first backward use; optimizer state: out in the
--     first forward stage, back before the optimizer).  The memory target is
--     the profiled peak minus reduction_memory (or target_memory with
--     target_mode); after rescues, the largest active memory minus
--     redundant_memory, which grows by adjust_memory for every searching
--     step that still needed rescues.  Ops above the target are reduction
--     points, runs of them peaks; a candidate's score is the reduction
--     points its time off the device covers (normalised) plus
--     size_coverage_weight x its normalised cube root of size.  Peak by
--     peak (the one with the largest remaining need first), the best-scored
--     candidates covering it are taken until it fits, skipping those whose
--     copy would not finish in the compute time it has (copies at
--     D2H_bandwidth, one at a time, as SmartSwap's arrangement simulates).
--
-- Not reproduced: the copy of a freed block is given back once its copy
-- completes (memsim's executor), not free_stage_delay stages later.
--
-- To tune it as swap_policy_config.py is tuned, copy this file, edit
-- `config`, and run: memsim run SCENARIO --policy ./my_smart_swap.lua
local memsim = require("lib.memsim")

local GiB, MiB = 2^30, 2^20

local config = {
  policy_v2 = true,
  policy_pref = "BETTER_PERFORMANCE", -- or "BETTER_MEMORY_SAVING"
  swap_bucket_size = -1,              -- bytes per swap stage; < 0: every candidate
  num_attn_layers_per_stage = 1,      -- transformer layers per swap stage
  warmup_step = 2,                    -- similar profiles before SEARCHING_POLICY
  stable_step = 10,                   -- steps (warm-up included) before STABLE
  op_diff_thresh = 0.05,
  -- policy v1
  target_mode = false,
  reduction_memory = 3 * GiB,
  target_memory = 40 * GiB,
  tensor_size_filter = 20 * MiB,
  redundant_memory = 2 * GiB,
  size_coverage_weight = 2,
  adjust_memory = 300 * MiB,
  d2h_bandwidth = 64 / 2.5 * 1e9,     -- bytes/s (64 / 2.5 * 1000 MB/s)
}

-- ---- the program's swap stages -------------------------------------------

-- Per (micro-batch, layer stage): the first forward and first backward op;
-- the first backward op of each micro-batch.  A layer stage's first op is
-- the lowest of its layers' first ops (ids are in issue order).
local function stage_bounds(profile, per_stage)
  local first_layer = profile.ops:layer_range()
  local function key(mb, layer)
    return mb * 65536 + (layer - first_layer) // per_stage
  end
  local bounds = {}
  local function note(starts, field)
    for mb, layers in pairs(starts) do
      for layer, id in pairs(layers) do
        local k = key(mb, layer)
        local b = bounds[k]
        if b == nil then
          b = {}
          bounds[k] = b
        end
        if b[field] == nil or id < b[field] then b[field] = id end
      end
    end
  end
  note((profile.ops:forward_starts()), "fwd")
  local bwd, mb_bwd = profile.ops:backward_starts()
  note(bwd, "bwd")
  return bounds, key, mb_bwd, first_layer
end

local function phase_counts(profile, uses)
  local fwd, bwd, opt = 0, 0, 0
  for _, u in ipairs(uses) do
    local phase = profile.ops[u + 1].phase
    if phase == "forward" then
      fwd = fwd + 1
    elseif phase == "backward" then
      bwd = bwd + 1
    else
      opt = opt + 1
    end
  end
  return fwd, bwd, opt
end

-- ---- policy v2 --------------------------------------------------------------

local function v2_activations(profile, plan, bounds, key, mb_bwd)
  local taken = {}
  for _, t in ipairs(profile.tensors:select({ kind = "activation", saved = true })) do
    if not t.persistent and t.layer ~= nil
        and t.micro_batch ~= nil and t.last_forward_use ~= nil
        and t.first_backward_use ~= nil then
      local fwd, bwd = phase_counts(profile, t.uses)
      local k = key(t.micro_batch, t.layer)
      local used = taken[k] or 0
      if fwd == 1 and bwd == 1
          and (config.swap_bucket_size < 0 or used + t.bytes <= config.swap_bucket_size) then
        -- Back from the start of the backward stage that precedes this one
        -- (the next layers up); the top stage starts after the head's
        -- backward, from the micro-batch's first backward op.
        local prev = bounds[k + 1]
        local from = prev ~= nil and prev.bwd or mb_bwd[t.micro_batch]
        local prefetch = math.max(1, t.first_backward_use - (from or t.first_backward_use))
        plan[#plan + 1] = { kind = "swap", tensor = t.id, prefetch = prefetch }
        taken[k] = used + t.bytes
      end
    end
  end
end

local function v2_optimizer_state(profile, plan, bounds, key, first_layer)
  local first_fwd, last_mb
  for _, op in ipairs(profile.ops) do
    if op.phase == "forward" and first_fwd == nil then
      first_fwd = op.id
    end
    if op.micro_batch ~= nil and (last_mb == nil or op.micro_batch > last_mb) then
      last_mb = op.micro_batch
    end
  end
  local last_stage = last_mb ~= nil and first_layer ~= nil and bounds[key(last_mb, first_layer)]
  local from = last_stage and last_stage.bwd
  for _, t in ipairs(profile.tensors:select({ kind = "optimizer_state" })) do
    if t.first_use ~= nil and first_fwd ~= nil
        and t.first_use > first_fwd + 1 then
      local prefetch = from ~= nil and t.first_use - from or 1
      if prefetch < 1 or t.first_use - prefetch <= first_fwd then
        prefetch = 1
      end
      plan[#plan + 1] = { kind = "swap", tensor = t.id, out_after = first_fwd,
                          in_before = t.first_use, prefetch = prefetch }
    end
  end
end

-- What depends on the program alone (and the config) is kept per stage for
-- as long as the stage's program stays (profile.program_id).  Every
-- SEARCHING_POLICY step planned v2 again from a walk of every op and tensor,
-- which on llama2-70B was most of a run's instructions (bench/README.md).
local per_stage = {}

local function program_memo(profile)
  local m = per_stage[profile.stage]
  if m == nil or m.program ~= profile.program_id then
    m = { program = profile.program_id }
    per_stage[profile.stage] = m
  end
  return m
end

-- The plan lists are never changed once made, so a kept one is shared.
local function plan_v2(profile, st)
  local memo = program_memo(profile)
  local k = st.memory_saving and "v2 memory saving" or "v2"
  if memo[k] ~= nil then return memo[k] end
  local bounds, key, mb_bwd, first_layer = stage_bounds(profile, config.num_attn_layers_per_stage)
  local plan = {}
  v2_activations(profile, plan, bounds, key, mb_bwd)
  if st.memory_saving then
    v2_optimizer_state(profile, plan, bounds, key, first_layer)
  end
  memo[k] = plan
  return plan
end

-- ---- policy v1 --------------------------------------------------------------

-- Swap stages in issue order: a new one at every change of phase,
-- micro-batch or layer (SwapStage: type, micro-batch, layer).
local function layer_stages(profile)
  local stage_of, starts = {}, {}
  local last
  for i, op in ipairs(profile.ops) do
    local k = op.phase .. ":" .. tostring(op.micro_batch) .. ":" .. tostring(op.layer)
    if k ~= last then
      starts[#starts + 1] = op.id
      last = k
    end
    stage_of[i] = #starts
  end
  return stage_of, starts
end

-- The reduction points: ops whose memory in the policy's profile is above
-- the target, with the bytes each needs to lose; runs of them are peaks.
local function reduction_points(mem, target)
  local points, peaks = {}, {}
  local open = false
  for i = 1, #mem do
    local need = mem[i] - target
    if need > 0 then
      points[#points + 1] = { op = i - 1, need = need }
      if not open then
        peaks[#peaks + 1] = { first = #points }
        open = true
      end
      peaks[#peaks].last = #points
    else
      open = false
    end
  end
  return points, peaks
end

-- First reduction point at or after op, last before op (binary search).
local function first_point_ge(points, op)
  local lo, hi = 1, #points + 1
  while lo < hi do
    local mid = (lo + hi) // 2
    if points[mid].op >= op then hi = mid else lo = mid + 1 end
  end
  return lo
end

local function v1_candidates(profile, stage_of, starts)
  local cands = {}
  local first_fwd
  for _, op in ipairs(profile.ops) do
    if op.phase == "forward" then first_fwd = op.id break end
  end
  -- Every kind but weights and grads (profile.tensors:select names them all).
  local kinds = { optimizer_state = true, activation = true, temp = true, comm_buffer = true }
  local big = profile.tensors:select({ kind = kinds, min_bytes = config.tensor_size_filter })
  for _, t in ipairs(big) do
    local uses = t.uses
    if #uses > 1 then
      local fwd, bwd, opt = phase_counts(profile, uses)
      local c
      if t.kind == "optimizer_state" and first_fwd ~= nil and uses[1] > first_fwd then
        -- Out in the first forward stage, back before the optimizer.
        c = { tensor = t.id, out = first_fwd, back = uses[1], optimizer = true }
      elseif opt == 0 and fwd > 0 and bwd > 0 and t.last_forward_use ~= nil
          and t.first_backward_use ~= nil then
        c = { tensor = t.id, out = t.last_forward_use, back = t.first_backward_use }
      end
      if c ~= nil then
        c.bytes = t.bytes
        local out_stage = stage_of[c.out + 1]
        local in_stage = stage_of[c.back + 1]
        -- Back one stage early: from the start of the stage before.
        c.in_at = starts[math.max(in_stage - 1, out_stage + 1)] or c.back
        c.off_from = starts[out_stage + 1] or c.back
        if c.in_at > c.out and c.in_at <= c.back and c.off_from < c.in_at then
          cands[#cands + 1] = c
        end
      end
    end
  end
  return cands
end

local function score(cands, points)
  if #cands == 0 then return end
  local smin, smax, cmin, cmax = math.huge, -math.huge, math.huge, -math.huge
  for _, c in ipairs(cands) do
    c.p1 = first_point_ge(points, c.off_from)
    c.p2 = first_point_ge(points, c.in_at) - 1
    c.covered = math.max(0, c.p2 - c.p1 + 1)
    local s = c.bytes ^ (1 / 3)
    smin, smax = math.min(smin, s), math.max(smax, s)
    cmin, cmax = math.min(cmin, c.covered), math.max(cmax, c.covered)
  end
  local srange, crange = math.max(0.001, smax - smin), math.max(0.001, cmax - cmin)
  for _, c in ipairs(cands) do
    c.score = (c.covered - cmin) / crange
              + config.size_coverage_weight * (c.bytes ^ (1 / 3) - smin) / srange
  end
end

-- The copy out must be done before the tensor is due back: copies run one
-- at a time at d2h_bandwidth, starting no earlier than the op they follow.
local function causes_delay(c, op_start, queue)
  local start = math.max(op_start(c.out), queue.busy_until)
  local done = start + c.bytes / config.d2h_bandwidth * 1e9
  return done > op_start(c.in_at), done
end

local function plan_v1(profile, st)
  local mem = st.memory
  local target
  if st.rescued_before then
    target = profile.capacity - st.redundant_memory
  elseif config.target_mode then
    target = config.target_memory
  else
    target = st.profile_peak - config.reduction_memory
  end
  local points, peaks = reduction_points(mem, target)
  local stage_of, starts = layer_stages(profile)
  local cands = v1_candidates(profile, stage_of, starts)
  score(cands, points)
  table.sort(cands, function(a, b)
    if a.score ~= b.score then return a.score > b.score end
    return a.tensor < b.tensor
  end)
  local function op_start(op)
    return st.op_start[op + 1] or 0
  end
  local chosen, selected, queue = {}, {}, { busy_until = 0 }
  for _ = 1, #cands do
    -- The peak whose largest remaining need is largest.
    local best_point
    for _, pk in ipairs(peaks) do
      for i = pk.first, pk.last do
        if points[i].need > 0 and (best_point == nil or points[i].need > points[best_point].need) then
          best_point = i
        end
      end
    end
    if best_point == nil then break end
    local need, picked = points[best_point].need, false
    for _, c in ipairs(cands) do
      if not selected[c] and c.p1 <= best_point and best_point <= c.p2 then
        local late, done = causes_delay(c, op_start, queue)
        if not late then
          selected[c], picked = true, true
          chosen[#chosen + 1] = c
          queue.busy_until = done
          for i = c.p1, c.p2 do points[i].need = points[i].need - c.bytes end
          need = need - c.bytes
          if need <= 0 then break end
        end
      end
    end
    if not picked then break end -- nothing more covers this peak
  end
  local plan = {}
  for _, c in ipairs(chosen) do
    plan[#plan + 1] = { kind = "swap", tensor = c.tensor, out_after = c.out, in_before = c.back,
                        prefetch = c.back - c.in_at }
  end
  return plan
end

-- ---- the cycle --------------------------------------------------------------

local states = {} -- per pipeline stage

local function new_state(st)
  st.stage = "WARMUP"
  st.warm = 0
  st.ref_ops = nil          -- op count of the policy's profile
  st.memory = nil           -- per-op memory of that profile (v1)
  st.best = nil             -- { plan, time }
  st.tried = nil            -- the plan the last step ran
  st.redundant_memory = config.redundant_memory
  st.rescued_before = false
  return st
end

local function state_of(stage)
  if states[stage] == nil then
    states[stage] = new_state({ memory_saving = config.policy_pref == "BETTER_MEMORY_SAVING" })
  end
  return states[stage]
end

local function similar(st, n_ops)
  return st.ref_ops == nil
      or math.abs(n_ops - st.ref_ops) / st.ref_ops < config.op_diff_thresh
end

-- What the profile of the step just run says about the plan it ran.
local function note_result(profile, st)
  local rescued = profile.rescued ~= nil and profile.rescued.count > 0
  if st.tried ~= nil and not profile.oom and not rescued
      and (st.best == nil or profile.step_time < st.best.time) then
    st.best = { plan = st.tried, time = profile.step_time }
  end
  -- WARMUP steps run no plan, so their rescues say nothing about one; a
  -- plan that still needed rescues moves v2 to BETTER_MEMORY_SAVING.
  if rescued and st.stage ~= "WARMUP" then
    st.rescued_before = true
    st.memory_saving = true -- v2: BETTER_PERFORMANCE -> BETTER_MEMORY_SAVING
    if st.stage == "SEARCHING_POLICY" then
      st.redundant_memory = st.redundant_memory + config.adjust_memory
    end
  end
  return rescued
end

-- The policy's profile: the one the SEARCHING steps plan from.
local function keep_profile(profile, st)
  st.ref_ops = #profile.ops
  st.memory, st.op_start = {}, {}
  for i, op in ipairs(profile.ops) do
    st.memory[i] = op.allocated or 0
    st.op_start[i] = op.start or 0
  end
  st.profile_peak = profile.peak_allocated or 0
  -- A profile of a step that OOM rescues kept within the device understates
  -- what the step needs: the bytes the rescues swapped out are added back
  -- over the ops where reserved memory came within the largest rescued
  -- request of the capacity (where a rescue can have happened).
  local r = profile.rescued
  if r ~= nil and r.bytes > 0 then
    local first, last
    for i, op in ipairs(profile.ops) do
      if (op.reserved or 0) + r.peak_request > profile.capacity then
        first = first or i
        last = i
      end
    end
    for i = first or 1, last or 0 do st.memory[i] = st.memory[i] + r.bytes end
    st.profile_peak = st.profile_peak + r.bytes
  end
end

-- MindSpeed's run_at_each_step_end: move between the stages.
local function advance(profile, st, ctx)
  local n_ops = #profile.ops
  local rescued = note_result(profile, st)
  local before = st.stage
  if st.stage == "WARMUP" then
    if similar(st, n_ops) then st.warm = st.warm + 1 end
    if st.warm >= config.warmup_step then
      st.stage = "SEARCHING_POLICY"
      keep_profile(profile, st)
    end
  elseif st.stage == "SEARCHING_POLICY" then
    st.warm = st.warm + 1
    if not similar(st, n_ops) then
      new_state(st)
    elseif st.warm >= config.stable_step then
      st.stage = "STABLE"
    end
  elseif st.stage == "STABLE" and (rescued or not similar(st, n_ops)) then
    new_state(st)
  end
  if st.stage ~= before then
    ctx:log("stage %d, step %d: %s -> %s (%d ops%s)", profile.stage, profile.step, before,
            st.stage, n_ops, rescued and ", OOM rescues in the step" or "")
  end
end

-- Plans are kept and shared (program_memo), so their sizes are too.
local plan_bytes = setmetatable({}, { __mode = "k" })

local function swapped_bytes(profile, plan)
  local n = plan_bytes[plan]
  if n ~= nil then return n end
  n = 0
  for _, d in ipairs(plan) do n = n + profile.tensors[d.tensor + 1].bytes end
  plan_bytes[plan] = n
  return n
end

return {
  name = "smart_swap",
  oom_rescue = true,
  plan = function(profile, ctx)
    local st = state_of(profile.stage)
    if profile.measured then
      advance(profile, st, ctx)
    end
    st.tried = nil
    if st.stage == "WARMUP" then
      return -- profile only
    end
    if st.stage == "STABLE" then
      local plan = st.best and st.best.plan or {}
      ctx:apply(plan)
      ctx:stable()
      return
    end
    local plan = config.policy_v2 and plan_v2(profile, st) or plan_v1(profile, st)
    ctx:apply(plan)
    st.tried = plan
    ctx:log("stage %d, step %d: SEARCHING_POLICY plan of %d tensors, %s (%s)", profile.stage,
            profile.step + 1, #plan, memsim.format_bytes(swapped_bytes(profile, plan)),
            config.policy_v2 and (st.memory_saving and "v2 BETTER_MEMORY_SAVING"
                                  or "v2 BETTER_PERFORMANCE") or "v1")
  end,
  -- Reached only when no idle tensor was left to rescue the allocation:
  -- swap the optimizer state too from the next step (v2's memory saving).
  on_oom = function(request, ctx, profile)
    local st = state_of(profile.stage)
    if st.memory_saving and st.stage ~= "WARMUP" then
      return -- nothing more to swap: the OOM stands
    end
    st.memory_saving = true
    st.stage, st.warm = "SEARCHING_POLICY", config.warmup_step
    if st.ref_ops == nil then keep_profile(profile, st) end
    local plan = plan_v2(profile, st)
    ctx:apply(plan)
    ctx:log("stage %d: out of memory at op %d with nothing left to rescue; %d tensors swapped "
            .. "(v2 BETTER_MEMORY_SAVING)", profile.stage, request.op, #plan)
  end,
}
