-- lifetime_pools: MindSpeed's memory-fragmentation optimization.
--
-- Tensors are classed by lifetime (reference: "Memory fragmentation
-- optimization", seeds 001/004).  Long-lived ones - weights, gradients and
-- optimizer state from model setup, forward tensors kept for backward, and
-- anything alive across steps - go to the "long" pool, which gives exact-size
-- blocks (rounded to 2 MiB, never split, no 20 MiB packing) so short-lived
-- tensors cannot fragment around them; short tensors may borrow idle long
-- blocks (lendable).  Everything else stays in the default pool.
local memsim = require("lib.memsim")

local long_kinds = memsim.set { "weight", "grad", "optimizer_state" }

return {
  name = "lifetime_pools",
  allocator = { flavour = "mindspeed" },
  pools = { long = { exact_segments = true, lendable = true } },
  pool = function(t)
    if long_kinds[t.kind] or t.persistent or (t.saved and t.layer ~= nil) then
      return "long"
    end
    return "default"
  end,
}
