-- offload_layers: TransformerEngine's CPU offload of activations
-- (transformer_engine.pytorch.get_cpu_offload_context, Megatron-LM's
-- --cpu-offloading --cpu-offloading-num-layers k).
--
-- What it reproduces (../shared/reference/memory-features.md, "Megatron
-- vocabulary"): the activations of the first k transformer layers of every
-- micro-batch go to host on a side stream after their forward use and come
-- back one layer ahead during backward, so peak activations are about
-- (L - k) layers' worth; tensors under 1 MiB stay on device (TE's
-- tensor_need_offloading_checker).  k = num_layers below, or all layers
-- but the last when it is nil (TE requires k < L).
local memsim = require("lib.memsim")

local config = {
  num_layers = nil, -- k; nil: all but the last layer of the stage
  min_bytes = 2^20,
}

return {
  name = "offload_layers",
  plan = function(profile, ctx)
    local bottom, top = profile.ops:layer_range()
    if top == nil then return end
    local k = config.num_layers or (top - bottom)
    local first, mb_first = memsim.backward_starts(profile)
    local n, bytes = 0, 0
    for _, t in ipairs(memsim.tensors(profile, { kind = "activation", saved = true,
                                                 min_bytes = config.min_bytes })) do
      if t.layer ~= nil and t.layer < bottom + k and t.micro_batch ~= nil
          and t.last_forward_use ~= nil and t.first_backward_use ~= nil then
        memsim.swap_one_layer_ahead(ctx, t, first, mb_first)
        n, bytes = n + 1, bytes + t.bytes
      end
    end
    if not profile.measured then
      ctx:log("stage %d: layers %d..%d offloaded: %d tensors, %s a step", profile.stage, bottom,
              bottom + k - 1, n, memsim.format_bytes(bytes))
    end
    ctx:stable()
  end,
}
