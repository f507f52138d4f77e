/* The address index of in-flight copies (exec_spans.h). */
#include "exec_spans.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"
#include "lib/base/range_set.h"

/* The first span whose addr is >= addr. */
static size_t lower_bound(const exec_spans *s, uint64_t addr)
{
    _Static_assert(offsetof(exec_span, addr) == 0, "spans are searched by a leading address");
    return base_addr_lower_bound(s->v, s->n, sizeof *s->v, addr);
}

bool exec_spans_add(exec_spans *s, uint64_t addr, uint64_t bytes, const void *key)
{
    if (!MS_GROW(s->v, s->n, s->cap, 64))
        return false;
    size_t at = lower_bound(s, addr);
    memmove(s->v + at + 1, s->v + at, (s->n - at) * sizeof *s->v);
    s->v[at] = (exec_span){addr, bytes, key};
    s->n++;
    if (bytes > s->max_bytes)
        s->max_bytes = bytes;
    return true;
}

void exec_spans_remove(exec_spans *s, uint64_t addr, const void *key)
{
    for (size_t i = lower_bound(s, addr); i < s->n && s->v[i].addr == addr; i++)
        if (s->v[i].key == key) {
            memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
            s->n--;
            return;
        }
}

/* A span over addr starts after addr - max_bytes: none is longer. */
size_t exec_spans_from(const exec_spans *s, uint64_t addr)
{
    return lower_bound(s, addr > s->max_bytes ? addr - s->max_bytes + 1 : 0);
}

void exec_spans_free(exec_spans *s)
{
    free(s->v);
    *s = (exec_spans){0};
}
