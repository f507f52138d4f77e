/* Integers written as decimal text without printf (private to lib/): the
 * detail reports (ops.csv, memory.csv, trace.json) are mostly numbers, and
 * a 70B step writes tens of millions of them. */
#ifndef MEMSIM_DECIMAL_H
#define MEMSIM_DECIMAL_H

#include <stdint.h>

/* Writes v at p (at most 20 characters, no terminator); returns the end. */
static inline char *base_put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

/* At most 20 characters, a sign included. */
static inline char *base_put_i64(char *p, int64_t v)
{
    if (v < 0)
        *p++ = '-';
    return base_put_u64(p, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

#endif
