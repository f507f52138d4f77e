/* The pickle writer: see pickle_out.h.  Opcodes as Python's pickletools
 * lists them (Lib/pickletools.py); integers in the shortest form Python's
 * own pickler would pick. */
#include "pickle_out.h"

#include <string.h>

enum {
    OP_MARK = '(',
    OP_STOP = '.',
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_BININT2 = 'M',
    OP_NONE = 'N',
    OP_BINUNICODE = 'X',
    OP_APPENDS = 'e',
    OP_EMPTY_DICT = '}',
    OP_EMPTY_LIST = ']',
    OP_SETITEMS = 'u',
    OP_BINFLOAT = 'G',
    OP_PROTO = 0x80,
    OP_TUPLE2 = 0x86,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a,
    OP_SHORT_BINUNICODE = 0x8c,
};

static void put_le(FILE *f, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        putc((int)((v >> (8 * i)) & 0xff), f);
}

/* The value just written is one more item of the open container; a full
 * batch is closed and the next one opened. */
static void item_done(rep_pickle *p)
{
    if (p->depth == 0 || p->depth > 64)
        return;
    int d = p->depth - 1;
    if (++p->items[d] < REP_PICKLE_BATCH)
        return;
    putc(p->is_dict[d] ? OP_SETITEMS : OP_APPENDS, p->f);
    putc(OP_MARK, p->f);
    p->items[d] = 0;
}

void rep_pkl_begin(rep_pickle *p, FILE *f)
{
    memset(p, 0, sizeof *p);
    p->f = f;
    putc(OP_PROTO, f);
    putc(4, f);
}

void rep_pkl_end(rep_pickle *p)
{
    putc(OP_STOP, p->f);
}

void rep_pkl_none(rep_pickle *p)
{
    putc(OP_NONE, p->f);
    item_done(p);
}

void rep_pkl_bool(rep_pickle *p, bool v)
{
    putc(v ? OP_NEWTRUE : OP_NEWFALSE, p->f);
    item_done(p);
}

static void put_int(FILE *f, int64_t v)
{
    if (v >= 0 && v <= 0xff) {
        putc(OP_BININT1, f);
        put_le(f, (uint64_t)v, 1);
    } else if (v >= 0 && v <= 0xffff) {
        putc(OP_BININT2, f);
        put_le(f, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        putc(OP_BININT, f);
        put_le(f, (uint64_t)(uint32_t)(int32_t)v, 4);
    } else {
        /* LONG1: little-endian two's complement, as few bytes as keep the
         * sign. */
        int n = 8;
        while (n > 1) {
            int64_t top = v >> (8 * (n - 1) - 1);
            if (top != 0 && top != -1)
                break;
            n--;
        }
        putc(OP_LONG1, f);
        putc(n, f);
        put_le(f, (uint64_t)v, n);
    }
}

void rep_pkl_int(rep_pickle *p, int64_t v)
{
    put_int(p->f, v);
    item_done(p);
}

void rep_pkl_float(rep_pickle *p, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    putc(OP_BINFLOAT, p->f);
    for (int i = 7; i >= 0; i--) /* big-endian */
        putc((int)((bits >> (8 * i)) & 0xff), p->f);
    item_done(p);
}

static void put_str(FILE *f, const char *s)
{
    size_t n = strlen(s);
    if (n < 256) {
        putc(OP_SHORT_BINUNICODE, f);
        putc((int)n, f);
    } else {
        putc(OP_BINUNICODE, f);
        put_le(f, n, 4);
    }
    fwrite(s, 1, n, f);
}

void rep_pkl_str(rep_pickle *p, const char *s)
{
    put_str(p->f, s);
    item_done(p);
}

void rep_pkl_key(rep_pickle *p, const char *key)
{
    put_str(p->f, key); /* the pair counts once, after its value */
}

static void open_container(rep_pickle *p, bool dict)
{
    putc(dict ? OP_EMPTY_DICT : OP_EMPTY_LIST, p->f);
    putc(OP_MARK, p->f);
    if (p->depth < 64) {
        p->items[p->depth] = 0;
        p->is_dict[p->depth] = dict;
    }
    p->depth++;
}

static void close_container(rep_pickle *p, bool dict)
{
    putc(dict ? OP_SETITEMS : OP_APPENDS, p->f);
    p->depth--;
    item_done(p);
}

void rep_pkl_dict_begin(rep_pickle *p)
{
    open_container(p, true);
}

void rep_pkl_dict_end(rep_pickle *p)
{
    close_container(p, true);
}

void rep_pkl_list_begin(rep_pickle *p)
{
    open_container(p, false);
}

void rep_pkl_list_end(rep_pickle *p)
{
    close_container(p, false);
}

void rep_pkl_tuple2_int(rep_pickle *p, int64_t a, int64_t b)
{
    put_int(p->f, a);
    put_int(p->f, b);
    putc(OP_TUPLE2, p->f);
    item_done(p);
}
