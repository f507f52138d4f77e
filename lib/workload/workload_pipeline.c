/* Pipeline parallelism: the order in which a stage runs its micro-batches,
 * and the point-to-point transfers between stages.
 *
 * The order is Megatron-core's (megatron/core/pipeline_parallel/
 * schedules.py).  Without interleaving (forward_backward_pipelining_without_
 * interleaving): min(p - stage - 1, m) warmup forwards, then one forward and
 * one backward at a time (1F1B), then the remaining backwards; backwards go
 * in micro-batch order.  With v model chunks (forward_backward_pipelining_
 * with_interleaving, microbatch_group_size_per_vp_stage = p, its default):
 * virtual micro-step k runs micro-batch (k / (p v)) p + k % p on chunk
 * (k / p) % v forward, and chunk v - 1 - (k / p) % v backward; warmup is
 * (p - stage - 1) * 2 + (v - 1) * p steps, all m v of them when that is
 * at least m v (get_pp_rank_microbatches).
 *
 * The model is split over p v virtual stages: chunk c of stage s is virtual
 * stage c p + s.  A forward that is not the very first virtual stage starts
 * by receiving its input from the previous virtual stage (stage s - 1, or
 * stage p - 1's previous chunk for s = 0), and one that is not the last
 * ends by sending its output to the next; backwards mirror that with the
 * grads.  Sender and receiver agree on the tag of a transfer: the micro-
 * batch, the boundary between virtual stages it crosses and its direction. */
#include "workload_model.h"

static int32_t fwd_micro_batch(int p, int v, int k)
{
    return (k / (p * v)) * p + k % p;
}

void wl_schedule(int p, int stage, int m, int v, wm_step *out)
{
    int total = m * v, n = 0;
    int warmup = v > 1 ? (p - stage - 1) * 2 + (v - 1) * p : p - stage - 1;
    if (warmup > total)
        warmup = total;
    for (int k = 0; k < total + warmup; k++) {
        /* Steps k < total are forwards; each forward after the warmup is
         * followed by the backward of step k - warmup, and the backwards
         * the warmup left over come last. */
        int f = k < warmup ? k : (k < total ? k : -1);
        int bk = k >= warmup ? k - warmup : -1;
        if (f >= 0)
            out[n++] = (wm_step){.forward = true, .micro_batch = fwd_micro_batch(p, v, f),
                                 .chunk = v > 1 ? (f / p) % v : 0};
        if (bk >= 0)
            out[n++] = (wm_step){.forward = false, .micro_batch = fwd_micro_batch(p, v, bk),
                                 .chunk = v > 1 ? v - 1 - (bk / p) % v : 0};
    }
}

static int node_of(const ms_scenario *sc, int64_t rank)
{
    int per = sc->device.devices_per_node > 0 ? sc->device.devices_per_node : 1;
    return (int)(rank / per);
}

/* Ranks are laid out as Megatron does (tp fastest, then cp, dp, pp): stage
 * s holds ranks s T ... s T + T - 1 with T = tp x cp x dp, and rank j of
 * stage a talks to rank j of stage b.  The transfer is intra-node only if
 * every such pair shares a node (the slowest pair sets the pace). */
ms_link_kind wl_stage_link(const ms_scenario *sc, int a, int b)
{
    const ms_parallel_config *pc = &sc->parallel;
    int64_t T = (int64_t)pc->tensor_model_parallel_size * pc->context_parallel_size *
                (pc->data_parallel_size > 0 ? pc->data_parallel_size : 1);
    for (int64_t j = 0; j < T; j++)
        if (node_of(sc, a * T + j) != node_of(sc, b * T + j))
            return MS_LINK_INTER_NODE;
    return MS_LINK_INTRA_NODE;
}

/* The tag of the transfer across the boundary after virtual stage `lower`
 * (between it and lower + 1) of micro-batch mb: forward 0, backward 1. */
static int p2p_tag(const wm *m, int mb, int lower, bool forward)
{
    int vs = m->n_stages * m->chunks;
    return (mb * vs + lower) * 2 + (forward ? 0 : 1);
}

int wl_p2p_tag_shift(const wm *m, int from, int to)
{
    return p2p_tag(m, to, 0, true) - p2p_tag(m, from, 0, true);
}

/* Megatron 2021-2022's scatter/gather optimization (on unless
 * --no-scatter-gather-tensors-in-pipeline; gone from Megatron-core): without
 * sequence parallelism every TP rank holds the whole boundary activation, so
 * each sends only its 1/t slice (split_tensor_into_1d_equal_chunks) and the
 * receiver all-gathers the slices over the TP group (gather_split_1d_tensor),
 * moving t times fewer bytes across the pipeline's link. */
static bool p2p_split(const wm *m)
{
    return m->sc->parallel.scatter_gather_tensors_in_pipeline && !m->sp && m->t > 1;
}

uint32_t wl_p2p(wm *m, bool send, bool forward, uint32_t t)
{
    int mb = m->b->micro_batch, c = m->b->chunk, p = m->n_stages;
    int vstage = c * p + m->stage;
    /* Forward sends and backward receives face the next virtual stage. */
    bool next = send == forward;
    int peer = next ? (m->stage + 1) % p : (m->stage + p - 1) % p;
    int lower = next ? vstage : vstage - 1;
    uint64_t bytes = wl_act_bytes(m); /* s b h / (cp, and tp with SP) */
    uint64_t wire = p2p_split(m) ? bytes / (uint64_t)m->t : bytes;
    ms_kernel k = {.name = send ? "send" : "recv", .cls = MS_KC_COMM, .dtype = m->dt,
                   .bytes = -1, .comm = send ? MS_COMM_SEND : MS_COMM_RECV, .group_size = 2,
                   .link = next ? m->link_next : m->link_prev, .comm_bytes = (double)wire,
                   .peer = peer, .tag = p2p_tag(m, mb, lower, forward)};
    const char *name = forward ? (send ? "pipeline.send_forward" : "pipeline.recv_forward")
                               : (send ? "pipeline.send_backward" : "pipeline.recv_backward");
    ms_tensor_kind kind = forward ? MS_TK_ACTIVATION : MS_TK_TEMP;
    if (send) {
        wl_build_op_add(m->b, &k, 0, &t, 1, "%s", name);
        return t;
    }
    wl_build_op_add(m->b, &k, 0, NULL, 0, "%s", name);
    if (wire == bytes)
        return wl_build_out(m->b, "out", bytes, m->dt, kind);
    uint32_t slice = wl_build_out(m->b, "out", wire, m->dt, MS_TK_COMM_BUFFER);
    return wl_collective(m, wl_name(m, name, ".all_gather"), MS_COMM_ALLGATHER, wl_tp_group(m),
                         m->tp_link, slice, bytes, kind);
}
