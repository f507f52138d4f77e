/* Writing one CSV file whole or not at all (private to lib/report/).
 *
 * Fields go through libcsv's quoting (csv_fwrite) whenever they contain
 * anything but a plain token, so names with commas or quotes stay intact;
 * plain numbers and identifiers are written bare, which RFC 4180 allows and
 * keeps files diffable.  The file is written to PATH.tmp and renamed on
 * close, so a run that fails half-way never leaves a CSV that looks whole. */
#ifndef MEMSIM_CSV_OUT_H
#define MEMSIM_CSV_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "memsim/status.h"

typedef struct ms_csv_out {
    FILE *f;
    char *buf; /* stdio buffer: detail reports run to gigabytes */
    char path[4096];
    char tmp[4200];
    int col;
} ms_csv_out;

ms_status rep_csv_open(ms_csv_out *w, const char *path, ms_diag *d);
ms_status rep_csv_str(ms_csv_out *w, const char *s);
ms_status rep_csv_u64(ms_csv_out *w, uint64_t v);
ms_status rep_csv_i64(ms_csv_out *w, int64_t v);
/* Fixed decimals so the same figure always prints the same way. */
ms_status rep_csv_f64(ms_csv_out *w, double v, int decimals);
ms_status rep_csv_header(ms_csv_out *w, const char *const *names, int n);
ms_status rep_csv_end_row(ms_csv_out *w);
/* Flush, check for write errors, rename into place. */
ms_status rep_csv_close(ms_csv_out *w, ms_diag *d);
/* Drop the temporary file (after an error). */
ms_status rep_csv_abort(ms_csv_out *w);

#endif
