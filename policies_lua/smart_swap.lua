-- smart_swap: MindSpeed's SmartSwap (seed 002), its default policy v2.
--
-- What it reproduces (../shared/reference/memory-features.md, "SmartSwap"):
--   * swap stages: every num_attn_layers_per_stage transformer layers of one
--     micro-batch form a stage;
--   * candidates: activations used by exactly one forward and one backward
--     op (saved for backward, not shared), at most swap_bucket_size bytes a
--     stage (taken in program order; < 0: all of them);
--   * timing: copied to host (D2H) right after their forward use, inside the
--     forward stage; copied back (H2D) from the start of the backward stage
--     that runs just before theirs, so the copy hides behind one stage of
--     backward compute;
--   * policy_pref: BETTER_PERFORMANCE swaps activations only;
--     BETTER_MEMORY_SAVING adds the optimizer state, out after the step's
--     first forward op and back from the start of the last backward stage.
--   * OOM: MindSpeed intercepts an out-of-memory error and swaps more; here
--     an OOM with BETTER_PERFORMANCE moves to BETTER_MEMORY_SAVING (the
--     optimizer state joins), and a further OOM is left to stand.
--
-- Not reproduced: the WARMUP and SEARCHING_POLICY steps.  v2's choice depends
-- only on the program's structure (tensor sizes, uses and stages), which
-- memsim knows before the first step, so the plan is made once and is stable
-- from step 0; MindSpeed would reach the same plan after its warm-up.  The
-- synchronous swap of an idle block inside the allocator's OOM path is not
-- modelled either (the step is re-planned instead).
--
-- To tune it as swap_policy_config.py is tuned, copy this file and edit
-- `config`, then run: memsim run SCENARIO --policy ./my_smart_swap.lua
local config = {
  policy_pref = "BETTER_PERFORMANCE", -- or "BETTER_MEMORY_SAVING"
  swap_bucket_size = -1,              -- bytes per swap stage; < 0: every candidate
  num_attn_layers_per_stage = 1,      -- transformer layers per swap stage
}

-- Per (micro-batch, stage): the first forward and first backward op.
local function stage_bounds(profile, per_stage)
  local first_layer
  for _, op in ipairs(profile.ops) do
    if op.layer ~= nil and (first_layer == nil or op.layer < first_layer) then
      first_layer = op.layer
    end
  end
  local bounds, mb_bwd = {}, {}
  local function key(mb, layer)
    return mb * 65536 + (layer - first_layer) // per_stage
  end
  for _, op in ipairs(profile.ops) do
    local mb = op.micro_batch
    if mb ~= nil and op.phase == "backward" and mb_bwd[mb] == nil then
      mb_bwd[mb] = op.id
    end
    if mb ~= nil and op.layer ~= nil then
      local k = key(mb, op.layer)
      local b = bounds[k]
      if b == nil then
        b = {}
        bounds[k] = b
      end
      if op.phase == "forward" and b.fwd == nil then
        b.fwd = op.id
      elseif op.phase == "backward" and b.bwd == nil then
        b.bwd = op.id
      end
    end
  end
  return bounds, key, mb_bwd, first_layer
end

local function phase_counts(profile, t)
  local fwd, bwd = 0, 0
  for _, u in ipairs(t.uses) do
    local phase = profile.ops[u + 1].phase
    if phase == "forward" then
      fwd = fwd + 1
    elseif phase == "backward" then
      bwd = bwd + 1
    end
  end
  return fwd, bwd
end

local function swap_activations(profile, ctx, bounds, key, mb_bwd)
  local per_stage = config.num_attn_layers_per_stage
  local taken, n, bytes = {}, 0, 0
  for _, t in ipairs(profile.tensors) do
    if t.kind == "activation" and t.saved and not t.persistent and t.layer ~= nil
        and t.micro_batch ~= nil and t.last_forward_use ~= nil
        and t.first_backward_use ~= nil then
      local fwd, bwd = phase_counts(profile, t)
      local k = key(t.micro_batch, t.layer)
      local used = taken[k] or 0
      if fwd == 1 and bwd == 1
          and (config.swap_bucket_size < 0 or used + t.bytes <= config.swap_bucket_size) then
        -- Back from the start of the backward stage that precedes this one
        -- (the next layers up); the top stage starts after the head's
        -- backward, from the micro-batch's first backward op.
        local prev = bounds[k + 1]
        local from = prev ~= nil and prev.bwd or mb_bwd[t.micro_batch]
        local prefetch = t.first_backward_use - (from or t.first_backward_use)
        if prefetch < 1 then
          prefetch = 1
        end
        ctx:swap(t.id, { prefetch = prefetch })
        taken[k] = used + t.bytes
        n = n + 1
        bytes = bytes + t.bytes
      end
    end
  end
  return n, bytes
end

local function swap_optimizer_state(profile, ctx, bounds, key, first_layer)
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
  local n, bytes = 0, 0
  for _, t in ipairs(profile.tensors) do
    if t.kind == "optimizer_state" and t.first_use ~= nil and first_fwd ~= nil
        and t.first_use > first_fwd + 1 then
      local prefetch = from ~= nil and t.first_use - from or 1
      if prefetch < 1 or t.first_use - prefetch <= first_fwd then
        prefetch = 1
      end
      ctx:swap(t.id, { out_after = first_fwd, in_before = t.first_use, prefetch = prefetch })
      n = n + 1
      bytes = bytes + t.bytes
    end
  end
  return n, bytes
end

local function decide(profile, ctx, activations, optimizer)
  local bounds, key, mb_bwd, first_layer = stage_bounds(profile, config.num_attn_layers_per_stage)
  local n, bytes = 0, 0
  if activations then
    n, bytes = swap_activations(profile, ctx, bounds, key, mb_bwd)
  end
  if optimizer then
    local m, b = swap_optimizer_state(profile, ctx, bounds, key, first_layer)
    n, bytes = n + m, bytes + b
  end
  return n, bytes
end

local saving_from_start = config.policy_pref == "BETTER_MEMORY_SAVING"
local escalated = {} -- per pipeline stage: an OOM added the optimizer state

return {
  name = "smart_swap",
  -- Called before step 0 and again after an OOM (the plan is stable
  -- otherwise); the OOM's own decisions are kept by memsim and added to it.
  plan = function(profile, ctx)
    local n, bytes = decide(profile, ctx, true, saving_from_start)
    if not profile.measured then
      ctx:log("stage %d: %d tensors, %.2f GiB swapped a step (%s)", profile.stage, n,
              bytes / 2^30, config.policy_pref)
    end
    ctx:stable()
  end,
  on_oom = function(request, ctx, profile)
    if saving_from_start or escalated[profile.stage] then
      return -- nothing more to swap: the OOM stands
    end
    escalated[profile.stage] = true
    local n, bytes = decide(profile, ctx, false, true)
    ctx:log("stage %d: out of memory at op %d; BETTER_MEMORY_SAVING: %d optimizer tensors "
            .. "(%.2f GiB) join", profile.stage, request.op, n, bytes / 2^30)
  end,
}
