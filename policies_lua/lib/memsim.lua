-- memsim policy helpers: require("lib.memsim").
--
-- Small functions over the profile that plan(profile, ctx) receives
-- (docs/policy-api.md).  Everything iterates the profile's arrays in id
-- order, so a policy built on them makes the same decisions every run.
local M = {}

--- A set from a list: M.set{"weight", "grad"}.weight == true.
function M.set(list)
  local s = {}
  for _, v in ipairs(list) do
    s[v] = true
  end
  return s
end

--- Iterate the layer segments (those with no parent: a whole transformer
--- layer of one micro-batch), in id order (profile.segments:select in C).
---   for seg in M.layer_segments(profile) do ctx:recompute(seg.id) end
function M.layer_segments(profile)
  local segs, i = profile.segments:select({ top = true }), 0
  return function()
    i = i + 1
    return segs[i]
  end
end

--- The tensors matching every given field of filter, in id order:
---   kind        a kind name ("activation") or a set of them (M.set{...})
---   name        a Lua pattern the tensor's name must contain
---   saved       true/false: saved for backward or not
---   min_bytes   at least this many bytes
---   layer       this layer only
---   micro_batch this micro-batch only
--- Every field but name is matched in C (profile.tensors:select), which
--- rejects a field or kind it does not know.
function M.tensors(profile, filter)
  filter = filter or {}
  local spec = {}
  for k, v in pairs(filter) do
    if k ~= "name" then spec[k] = v end
  end
  local found = profile.tensors:select(spec)
  if filter.name == nil then
    return found
  end
  local out = {}
  for _, t in ipairs(found) do
    if string.find(t.name or "", filter.name) ~= nil then
      out[#out + 1] = t
    end
  end
  return out
end

--- Total bytes of a list of tensors (tables from the profile, or ids).
function M.sum_bytes(profile, list)
  local sum = 0
  for _, t in ipairs(list) do
    if type(t) == "number" then
      t = profile.tensors[t + 1]
    end
    sum = sum + t.bytes
  end
  return sum
end

--- Bytes for humans (ctx:log): M.format_bytes(3 * 2^30) == "3.00 GiB".
function M.format_bytes(n)
  local units = { "B", "KiB", "MiB", "GiB", "TiB" }
  local u = 1
  while n >= 1024 and u < #units do
    n = n / 1024
    u = u + 1
  end
  if u == 1 then
    return string.format("%d B", n)
  end
  return string.format("%.2f %s", n, units[u])
end

--- The first backward op of each (micro-batch, layer), and the first
--- backward op of each micro-batch: first_backward[mb][layer], mb_backward[mb].
--- A swap-in issued at the first backward op of the layer above hides
--- behind that layer's backward (one layer of prefetch).
function M.backward_starts(profile)
  return profile.ops:backward_starts()
end

--- Swap t out after its last forward use and back from the start of the
--- backward of the layer above it (its micro-batch's first backward op for
--- the last layer), so the copy back hides behind one layer of backward.
function M.swap_one_layer_ahead(ctx, t, first, mb_first)
  local mbf = first[t.micro_batch] or {}
  local from = mbf[t.layer + 1] or mb_first[t.micro_batch] or t.first_backward_use
  local prefetch = math.max(1, t.first_backward_use - from)
  ctx:swap(t.id, { prefetch = prefetch })
end

local function cost_of(profile, seg)
  local c = 0
  for o = seg.first_op, seg.last_op do
    local op = profile.ops[o + 1]
    if profile.measured and op.start ~= nil then
      c = c + (op.finish - op.start)
    else
      c = c + (op.flops or 0)
    end
  end
  return math.max(c, 1)
end

local function staleness_of(profile, seg)
  if profile.measured then
    local a, b = profile.ops[seg.last_op + 1], profile.ops[seg.first_backward_op + 1]
    if a.finish ~= nil and b.start ~= nil and b.start > a.finish then
      return b.start - a.finish
    end
  end
  return math.max(seg.first_backward_op - seg.last_op, 1)
end

--- The recompute segments in DTR's eviction order (Kirisame et al. 2021):
--- h = cost / (saved bytes x staleness) ascending, cost the forward time
--- (measured, else FLOPs), staleness forward end to backward start (ns
--- measured, else ops).  Each entry: { id = segment id, h = h }.
function M.rematerialization_order(profile)
  local cands = {}
  for _, seg in ipairs(profile.segments) do
    if seg.saved_bytes > 0 and seg.first_backward_op ~= nil then
      local h = cost_of(profile, seg) / (seg.saved_bytes * staleness_of(profile, seg))
      cands[#cands + 1] = { id = seg.id, h = h }
    end
  end
  table.sort(cands, function(a, b)
    if a.h ~= b.h then return a.h < b.h end
    return a.id < b.id
  end)
  return cands
end

return M
