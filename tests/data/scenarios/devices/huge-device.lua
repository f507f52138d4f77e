-- Fixture: 9000 GiB is past the 8 TiB (8192 GiB) a device may have.
return {
  hbm_gib = 9000,
  hbm_bandwidth_gbs = 1600,
  host_pinned_gib = 64,
  peak_tflops = { bf16 = 313 },
  h2d_bandwidth = { {1048576, 20} },
  d2h_bandwidth = { {1048576, 20} },
  devices_per_node = 8,
  intra_node_bandwidth_gbs = 196,
  inter_node_bandwidth_gbs = 25,
}
