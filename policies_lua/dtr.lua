-- dtr: Dynamic Tensor Rematerialization (Kirisame et al., ICLR 2021).
--
-- What it reproduces: DTR evicts, whenever memory runs short, the resident
-- tensor with the smallest h_DTR = cost / (size x staleness) -- cheap to
-- recompute, large, and not needed for a long time -- and recomputes it on
-- demand.  memsim recomputes whole segments (a layer, a module in it, or
-- one op), not single tensors, so the units here are the segments: cost is
-- the segment's forward time (measured; FLOPs before the first step),
-- size the bytes it saves for backward, staleness the distance from the end
-- of its forward to its backward (ns when measured, ops before).  The
-- eviction order is h_DTR ascending; the number evicted is the smallest
-- that fits two steps in a row (the second from the cache the first left,
-- as a real run's steps follow each other), found by bisection on
-- ctx:simulate (DTR's own trigger is the allocator running out; the
-- simulator stands in for it).  A step that still runs out of memory
-- evicts the next tenth of the order (on_oom).  Not reproduced: DTR's eviction at each
-- allocation inside the step and its equivalence classes of aliases.
local memsim = require("lib.memsim")

-- DTR never loses a step to an OOM (it evicts on demand), so what it must
-- fit is the steady state, not only a first step from an empty cache
-- (gpt-175b TP8: that plan lost step 1).
local STEADY = { steps = 2 }

local function first_k(cands, k)
  local list = {}
  for i = 1, k do list[i] = { kind = "recompute", segment = cands[i].id } end
  return list
end

local decided = {}

return {
  name = "dtr",
  plan = function(profile, ctx)
    local st = decided[profile.stage]
    if st == nil then
      local cands = memsim.rematerialization_order(profile)
      local lo, hi = 0, #cands -- fits(hi) assumed; fits(lo) tested first
      if not ctx:simulate({}, STEADY).oom then
        hi = 0
      elseif ctx:simulate(first_k(cands, hi), STEADY).oom then
        hi = -1 -- nothing fits: evict everything anyway
      else
        while hi - lo > 1 do
          local mid = (lo + hi) // 2
          if ctx:simulate(first_k(cands, mid), STEADY).oom then lo = mid else hi = mid end
        end
      end
      st = { cands = cands, k = hi < 0 and #cands or hi }
      st.list = first_k(cands, st.k)
      decided[profile.stage] = st
      ctx:log("stage %d: %d of %d segments evicted (recomputed)%s", profile.stage, #st.list,
              #cands, hi < 0 and "; the step does not fit even so" or "")
    end
    for _, d in ipairs(st.list) do ctx:recompute(d.segment) end
    ctx:stable()
  end,
  on_oom = function(_, ctx, profile)
    local st = decided[profile.stage]
    if st == nil or st.k >= #st.cands then return end
    local k = math.min(#st.cands, st.k + math.max(1, #st.cands // 10))
    for i = st.k + 1, k do ctx:recompute(st.cands[i].id) end
    ctx:log("stage %d: out of memory; %d more segments evicted", profile.stage, k - st.k)
    st.k = k
    st.list = first_k(st.cands, k)
  end,
}
