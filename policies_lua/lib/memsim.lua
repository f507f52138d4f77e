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
--- layer of one micro-batch), in id order.
---   for seg in M.layer_segments(profile) do ctx:recompute(seg.id) end
function M.layer_segments(profile)
  local segs, i = profile.segments, 0
  return function()
    while true do
      i = i + 1
      local s = segs[i]
      if s == nil or s.parent == nil then
        return s
      end
    end
  end
end

--- The tensors matching every given field of filter, in id order:
---   kind      a kind name ("activation") or a set of them (M.set{...})
---   name      a Lua pattern the tensor's name must contain
---   saved     true/false: saved for backward or not
---   min_bytes at least this many bytes
---   layer     this layer only
function M.tensors(profile, filter)
  filter = filter or {}
  local kinds = filter.kind
  if type(kinds) == "string" then
    kinds = { [kinds] = true }
  end
  local out = {}
  for _, t in ipairs(profile.tensors) do
    if (kinds == nil or kinds[t.kind])
      and (filter.name == nil or string.find(t.name or "", filter.name) ~= nil)
      and (filter.saved == nil or t.saved == filter.saved)
      and (filter.min_bytes == nil or t.bytes >= filter.min_bytes)
      and (filter.layer == nil or t.layer == filter.layer) then
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

return M
