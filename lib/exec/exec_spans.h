/* lib/exec: the device ranges that swap-out copies may still read, by
 * address.
 *
 * The executor keeps its in-flight copies oldest first (they finish in that
 * order), which is the order to reap them in but not to ask "does a copy lie
 * over this new block?": with the host a micro-batch ahead of the device, a
 * swap-heavy plan has hundreds of copies in flight, and scanning them all at
 * every allocation was a third of the executor's instructions on
 * llama2-7b under offload_layers (bench/README.md).  This index answers the
 * question from the few copies near the block. */
#ifndef MS_EXEC_SPANS_H
#define MS_EXEC_SPANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct exec_span {
    uint64_t addr, bytes;
    const void *key; /* names the copy among those live (its done event) */
} exec_span;

typedef struct exec_spans {
    exec_span *v; /* sorted by addr */
    size_t n, cap;
    uint64_t max_bytes; /* of any span ever added: how far back an overlap can start */
} exec_spans;

/* false: out of memory (nothing added). */
bool exec_spans_add(exec_spans *s, uint64_t addr, uint64_t bytes, const void *key);
/* Removes the span of `key` at `addr`; absent: nothing. */
void exec_spans_remove(exec_spans *s, uint64_t addr, const void *key);
/* The first span that may overlap [addr, ...): every span that does is at
 * or after it, and the spans from there on start in address order. */
size_t exec_spans_from(const exec_spans *s, uint64_t addr);
void exec_spans_free(exec_spans *s);

#endif
