/* A pickle writer (private to lib/report/): the data opcodes of protocol 4
 * that a PyTorch memory snapshot needs (dict, list, 2-tuple, str, int, float,
 * bool, None), written straight to a stream without memo or frames, both of
 * which protocol 4 makes optional (PEP 3154).  Python's pickle.load and
 * memsim's own decoder (lib/replay/pickle.c) read the result.
 *
 * Containers are written as EMPTY_DICT / EMPTY_LIST followed by batches of
 * at most REP_PICKLE_BATCH items between MARK and SETITEMS / APPENDS, as
 * Python's pickler batches them, so no reader's stack holds a whole trace. */
#ifndef MEMSIM_REPORT_PICKLE_OUT_H
#define MEMSIM_REPORT_PICKLE_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define REP_PICKLE_BATCH 1000

typedef struct rep_pickle {
    FILE *f;
    /* Items written into each open container, to close a batch on time. */
    uint32_t items[64];
    bool is_dict[64];
    int depth;
} rep_pickle;

void rep_pkl_begin(rep_pickle *p, FILE *f); /* PROTO 4 */
void rep_pkl_end(rep_pickle *p);            /* STOP */
void rep_pkl_none(rep_pickle *p);
void rep_pkl_bool(rep_pickle *p, bool v);
void rep_pkl_int(rep_pickle *p, int64_t v);
void rep_pkl_float(rep_pickle *p, double v);
void rep_pkl_str(rep_pickle *p, const char *s);
/* A dict: begin, then key and value pairs (rep_pkl_key, then the value),
 * then end; a list: begin, its items, end.  Nesting up to 64 deep. */
void rep_pkl_dict_begin(rep_pickle *p);
void rep_pkl_key(rep_pickle *p, const char *key);
void rep_pkl_dict_end(rep_pickle *p);
void rep_pkl_list_begin(rep_pickle *p);
void rep_pkl_list_end(rep_pickle *p);
/* The tuple (a, b) of two ints (TUPLE2). */
void rep_pkl_tuple2_int(rep_pickle *p, int64_t a, int64_t b);

#endif
