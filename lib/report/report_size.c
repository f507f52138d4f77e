/* How large a run's detail files will be, known from the record's row counts
 * before any is written, so a run over its size limit (report.max_bytes)
 * can keep less instead of writing a partial folder (ms_run_detail).
 *
 * Bytes a row: the median over the 114 detail folders of main's shipped
 * scenario x policy runs (the 70B scenarios without detail), per file:
 * ops.csv 136-160 (op names differ by model), memory.csv 126-144,
 * tensors.csv 71-89, segments.csv 91-102; trace.json is a complete event per
 * ops.csv row and a counter event per memory.csv row (a least-squares fit
 * over the same folders).  The plots are drawn in at most 1000 columns, so
 * they grow with the devices only (at most 52 KiB a device).  The whole is
 * 0.99-1.02 times the files written for the 66 of those folders over 10 MB
 * and 1.16 times for one step of scenarios/llama2-70b.lua (docs/
 * scenario-format.md): an estimate that errs high, so the limit holds. */
#include "memsim/report.h"

enum {
    OPS_CSV_ROW = 150,
    MEM_CSV_ROW = 140,
    TENSOR_CSV_ROW = 80,
    SEGMENT_CSV_ROW = 97,
    TRACE_OP_EVENT = 174,
    TRACE_MEM_EVENT = 108,
    PLOTS_PER_DEVICE = 64 * 1024,
};

uint64_t ms_report_detail_bytes(const ms_run_record *record, size_t n_devices)
{
    if (record == NULL)
        return 0;
    uint64_t ops = ms_record_n_ops(record), mem = ms_record_n_mem(record);
    return ops * (OPS_CSV_ROW + TRACE_OP_EVENT) + mem * (MEM_CSV_ROW + TRACE_MEM_EVENT) +
           (uint64_t)ms_record_n_tensors(record) * TENSOR_CSV_ROW +
           (uint64_t)ms_record_n_segments(record) * SEGMENT_CSV_ROW +
           (uint64_t)n_devices * PLOTS_PER_DEVICE;
}
