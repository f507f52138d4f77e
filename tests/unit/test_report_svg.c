/* The SVG plots (memory.svg, timeline.svg) from hand-built run records.
 *
 * Coordinates follow lib/report/report_svg.h: the plot spans x 200..1200 (1000
 * one-pixel columns over 0..t_max), memory panel p has its plot area from
 * y = 64 + 290 p + 40 down 220 pixels, and timeline lane l of the first
 * device sits at y = 64 + 8 + 22 l. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memsim/report.h"
#include "memsim/workload.h"

#include "lib/report/report_internal.h"
#include "lib/report/report_svg.h"

#define GIB 1073741824ull
#define MS 1000000ll

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/memsim-svg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_in(const char *d, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", d, name);
    remove(path);
}

static void teardown(void)
{
    remove_in(dir, "memory.svg");
    remove_in(dir, "timeline.svg");
    rmdir(dir);
}

/* A program whose op 0 runs on the compute stream and op 1 is a collective. */
static ms_op prog_ops[2] = {
    {.id = 0, .name = "layers.0.mlp", .stream = MS_SR_COMPUTE},
    {.id = 1, .name = "grads.allreduce", .stream = MS_SR_COMM,
     .kernel = {.cls = MS_KC_COMM, .comm = MS_COMM_ALLREDUCE}},
};

static ms_program_view programs[2] = {
    {.ops = prog_ops, .n_ops = 2, .stage = 0},
    {.ops = prog_ops, .n_ops = 2, .stage = 1},
};

/* Memory on the host clock: these records hold memory rows without the
 * kernels that would place them on the device clock. */
static ms_status write_host(const ms_run_record *r, size_t n_programs, uint64_t capacity,
                            ms_diag *d)
{
    rep_svg_options o = {.capacity = capacity, .memory_clock = MS_CLOCK_HOST};
    return rep_write_svg_opts(dir, r, programs, n_programs, &o, d);
}

static void add_mem(ms_run_record *r, int step, int dev, int64_t t, uint64_t weight,
                    uint64_t act, uint64_t temp, uint64_t alloc, uint64_t resv)
{
    ms_mem_row m = {.step = step, .device = dev, .time_ns = t, .allocated = alloc,
                    .reserved = resv};
    m.by_kind[MS_TK_WEIGHT] = weight;
    m.by_kind[MS_TK_ACTIVATION] = act;
    m.by_kind[MS_TK_TEMP] = temp;
    ck_assert_int_eq(ms_record_add_mem(r, &m), MS_OK);
}

static void add_op(ms_run_record *r, int step, int dev, uint64_t stream, ms_work_kind kind,
                   uint32_t op, int64_t start, int64_t end)
{
    ms_op_row o = {.step = step, .device = dev, .kind = kind, .op = op, .tensor = UINT32_MAX,
                   .stream_id = stream, .start_ns = start, .end_ns = end};
    ck_assert_int_eq(ms_record_add_op(r, &o), MS_OK);
}

/* One device, step 0 over 4 ms (setup rows of step -1 are not drawn):
 *   t=0    weight 1 GiB                      allocated 1   reserved 2 GiB
 *   t=1ms  + activation 1.5 GiB (total 2.5)  allocated 2.5 reserved 4
 *   t=2ms  + temp 0.5 GiB (total 3, peak)    allocated 3   reserved 4
 *   t=3ms  back to the weights (total 1)     allocated 1   reserved 4
 *   t=4ms  unchanged (the end of the step)
 * Column of t = t * 1000 / 4 ms: 0, 250, 500, 750, 999 -> x 200, 450, 700, 950. */
static ms_run_record *one_device_record(void)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    add_mem(r, -1, 0, 0, 1 * GIB, 0, 0, 1 * GIB, 1 * GIB);
    add_mem(r, 0, 0, 0, 1 * GIB, 0, 0, 1 * GIB, 2 * GIB);
    add_mem(r, 0, 0, 1 * MS, 1 * GIB, 3 * GIB / 2, 0, 5 * GIB / 2, 4 * GIB);
    add_mem(r, 0, 0, 2 * MS, 1 * GIB, 3 * GIB / 2, GIB / 2, 3 * GIB, 4 * GIB);
    add_mem(r, 0, 0, 3 * MS, 1 * GIB, 0, 0, 1 * GIB, 4 * GIB);
    add_mem(r, 0, 0, 4 * MS, 1 * GIB, 0, 0, 1 * GIB, 4 * GIB);
    return r;
}

static char *read_file(const char *d, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", d, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s missing", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Well-formed enough for a browser: one <svg> root, closing tags match the
 * open ones, every attribute value quoted. */
static void assert_svg(const char *s)
{
    size_t n = strlen(s);
    ck_assert_msg(strncmp(s, "<svg ", 5) == 0, "does not start with <svg");
    ck_assert_msg(n > 7 && strcmp(s + n - 7, "</svg>\n") == 0, "does not end with </svg>");
    char stack[64][16];
    int depth = 0, roots = 0;
    for (const char *p = strchr(s, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>');
        ck_assert_ptr_nonnull(end);
        int quotes = 0;
        for (const char *q = p; q < end; q++)
            quotes += *q == '"';
        ck_assert_msg(quotes % 2 == 0, "unbalanced quotes in a tag");
        char name[16] = {0};
        const char *q = p + 1 + (p[1] == '/');
        for (int i = 0; i < 15 && q[i] && q[i] != ' ' && q[i] != '>' && q[i] != '/'; i++)
            name[i] = q[i];
        if (p[1] == '/') {
            ck_assert_int_gt(depth, 0);
            ck_assert_str_eq(stack[--depth], name);
        } else if (end[-1] != '/') {
            ck_assert_int_lt(depth, 64);
            if (depth == 0)
                roots++;
            memcpy(stack[depth++], name, sizeof name);
        }
    }
    ck_assert_int_eq(depth, 0);
    ck_assert_int_eq(roots, 1);
}

/* The d attribute of the element with the given id (malloc'd). */
static char *path_d(const char *svg, const char *id)
{
    char needle[64];
    snprintf(needle, sizeof needle, "id=\"%s\"", id);
    const char *p = strstr(svg, needle);
    ck_assert_msg(p != NULL, "no element %s", id);
    p = strstr(p, " d=\"");
    ck_assert_ptr_nonnull(p);
    p += 4;
    size_t n = strcspn(p, "\"");
    char *out = malloc(n + 1);
    ck_assert_ptr_nonnull(out);
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

static void assert_path(const char *svg, const char *id, const char *want)
{
    char *got = path_d(svg, id);
    ck_assert_str_eq(got, want);
    free(got);
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

START_TEST(stack_top_at_peak)
{
    ms_run_record *r = one_device_record();
    ms_diag d = {0};
    ck_assert_int_eq(write_host(r, 1, 0, &d), MS_OK);
    char *svg = read_file(dir, "memory.svg");
    assert_svg(svg);
    ck_assert_ptr_nonnull(strstr(svg, "host issue time since the step start (ms)"));
    /* The largest value is reserved, 4 GiB: ticks of 1 GiB (4 / 5 = 0.8 ->
     * 1), axis 0..4 GiB.  Panel 0's plot spans y 104..324, so bytes b sit
     * at 324 - b / 4 GiB * 220: 1 GiB 269.0, 2 GiB 214.0, 2.5 GiB 186.5,
     * 3 GiB 159.0, 4 GiB 104.0.  The first (top-kind) area reaches the
     * requested total: 3 GiB at the peak, x 700 (t = 2 ms). */
    assert_path(svg, "dev0-comm_buffer", "M200 324V269.0H450V186.5H700V159.0H950V269.0H1200V324Z");
    /* Weight only, 1 GiB all the step; activation on top of it. */
    assert_path(svg, "dev0-weight", "M200 324V269.0H1200V324Z");
    assert_path(svg, "dev0-activation", "M200 324V269.0H450V186.5H950V269.0H1200V324Z");
    assert_path(svg, "dev0-allocated", "M200 269.0H450V186.5H700V159.0H950V269.0H1200");
    assert_path(svg, "dev0-reserved", "M200 214.0H450V104.0H1200");
    ck_assert_ptr_nonnull(strstr(svg, "peak requested 3.00 GiB at 2.000 ms"));
    ck_assert_ptr_nonnull(strstr(svg, "peak reserved 4.00 GiB at 1.000 ms"));
    ck_assert_ptr_nonnull(strstr(svg, "device 0 (pipeline stage 0), step 0"));
    /* y ticks 0..4 GiB; x ticks every 0.5 ms (4 / 10 = 0.4 -> 0.5). */
    ck_assert_ptr_nonnull(strstr(svg, "y=\"108.0\">4</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "<text class=\"m\" x=\"450.0\" y=\"338\">1.0</text>"));
    ck_assert_int_eq(count(svg, "class=\"frame\""), 1);
    ck_assert_ptr_null(strstr(svg, "capacity"));
    free(svg);
    ms_record_free(r);
}
END_TEST

START_TEST(capacity_line)
{
    ms_run_record *r = one_device_record();
    ck_assert_int_eq(write_host(r, 1, 8 * GIB, NULL), MS_OK);
    char *svg = read_file(dir, "memory.svg");
    assert_svg(svg);
    /* 8 GiB / 5 = 1.6 -> ticks of 2 GiB, axis 0..8 GiB: the capacity line
     * at the plot top, 104.0; the 3 GiB peak at 324 - 3 / 8 * 220 = 241.5. */
    ck_assert_ptr_nonnull(strstr(svg, "id=\"dev0-capacity\" class=\"cap\" x1=\"200\" y1=\"104.0\""));
    char *got = path_d(svg, "dev0-comm_buffer");
    ck_assert_ptr_nonnull(strstr(got, "H700V241.5H950"));
    free(got);
    free(svg);
    ms_record_free(r);
}
END_TEST

/* 100000 rows 10 ns apart (t_max 999990 ns): 1 GiB of activations, but
 * row 54321 holds 3 GiB for 10 ns.  Its column is 543210 * 1000 / 999990
 * = 543 (x 743); column 544 starts from the last row of 543 (1 GiB). */
START_TEST(downsampling_keeps_the_spike)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    for (int i = 0; i < 100000; i++) {
        uint64_t act = i == 54321 ? 3 * GIB : 1 * GIB;
        add_mem(r, 0, 0, (int64_t)i * 10, 0, act, 0, act, 4 * GIB);
    }
    ck_assert_int_eq(write_host(r, 1, 0, NULL), MS_OK);
    char *svg = read_file(dir, "memory.svg");
    assert_svg(svg);
    assert_path(svg, "dev0-comm_buffer", "M200 324V269.0H743V159.0H744V269.0H1200V324Z");
    assert_path(svg, "dev0-allocated", "M200 269.0H743V159.0H744V269.0H1200");
    ck_assert_ptr_nonnull(strstr(svg, "peak requested 3.00 GiB at 0.543 ms"));
    ck_assert_int_lt(strlen(svg), 20000);
    free(svg);
    ms_record_free(r);
}
END_TEST

/* Lanes of device 0: stream 7's kernels at y 72, its recompute at y 94
 * (a lane per kind of work), stream 8 (swap-out) at y 116.  The last op
 * ends at 4 ms: a column is 4 us. */
START_TEST(timeline_lanes_and_merging)
{
    ms_run_record *r = one_device_record();
    add_op(r, 0, 0, 7, MS_WK_KERNEL, 0, 0, 1 * MS);          /* columns 0..249 */
    add_op(r, 0, 0, 7, MS_WK_RECOMPUTE, 0, 1 * MS, 2 * MS);  /* 250..499 */
    add_op(r, 0, 0, 8, MS_WK_SWAP_OUT, 0, MS / 2, MS / 2 + 100); /* 100 ns: column 125 */
    /* 100 kernels of 10 ns within 3.000..3.002 ms: all in column 750. */
    for (int i = 0; i < 100; i++)
        add_op(r, 0, 0, 7, MS_WK_KERNEL, 0, 3 * MS + i * 20, 3 * MS + i * 20 + 10);
    add_op(r, 0, 0, 7, MS_WK_KERNEL, 0, 3996000, 4 * MS); /* column 999 */
    add_op(r, 0, 0, 7, MS_WK_KERNEL, 0, -1, -1); /* never ran: not drawn */
    ck_assert_int_eq(rep_write_svg(dir, r, programs, 1, NULL), MS_OK);
    char *svg = read_file(dir, "timeline.svg");
    assert_svg(svg);
    /* Whole columns busy are drawn solid ("-100"); column 750 is busy 1 us
     * of 4 (25%) and column 125 100 ns of 4 us: the palest shade, "-25". */
    assert_path(svg, "kernel-100", "M200 72h250v18h-250zM1199 72h1v18h-1z");
    assert_path(svg, "kernel-25", "M950 72h1v18h-1z");
    assert_path(svg, "recompute-100", "M450 94h250v18h-250z");
    assert_path(svg, "swap_out-25", "M325 116h1v18h-1z");
    ck_assert_ptr_null(strstr(svg, "id=\"swap_in"));
    ck_assert_ptr_null(strstr(svg, "-50\""));
    ck_assert_ptr_null(strstr(svg, "-75\""));
    ck_assert_ptr_nonnull(strstr(svg, ">dev 0 stream 7 compute: kernel</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">stream 7: recompute</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">dev 0 stream 8 swap-out D2H</text>"));
    /* Kernels: 1 ms + 100 x 10 ns + 4 us busy of 4 ms: 25.125%; recompute
     * 1 ms of 4. */
    ck_assert_ptr_nonnull(strstr(svg, ">busy 25.1%</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">busy 25.0%</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "step 0 (the last in the record)"));
    free(svg);
    ms_record_free(r);
}
END_TEST

/* Memory on the host clock has an axis of its own, to its last event:
 * memory events up to 1 ms (ticks of 0.1 ms, 1.0 at x 1200), ops up to 4 ms
 * (ticks of 0.5 ms, 1.0 at x 450). */
START_TEST(host_clock_has_its_own_axis)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    add_mem(r, 0, 0, 0, 1 * GIB, 0, 0, 1 * GIB, 1 * GIB);
    add_mem(r, 0, 0, 1 * MS, 1 * GIB, 0, 0, 1 * GIB, 1 * GIB);
    add_op(r, 0, 0, 7, MS_WK_KERNEL, 0, 0, 4 * MS);
    ck_assert_int_eq(write_host(r, 1, 0, NULL), MS_OK);
    char *svg = read_file(dir, "memory.svg");
    ck_assert_ptr_nonnull(strstr(svg, "x=\"1200.0\" y=\"338\">1.0</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "host issue time"));
    free(svg);
    svg = read_file(dir, "timeline.svg");
    ck_assert_ptr_nonnull(strstr(svg, "x=\"450.0\" y=\"108\">1.0</text>"));
    free(svg);
    ms_record_free(r);
}
END_TEST

/* Two stages: a panel each (device 1's plot spans y 394..614), a lane each;
 * only the last step (1) is drawn. */
START_TEST(two_devices_two_panels)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    add_mem(r, 0, 0, 0, 8 * GIB, 0, 0, 8 * GIB, 8 * GIB); /* step 0: not drawn */
    add_mem(r, 1, 1, 0, 1 * GIB, 0, 0, 1 * GIB, 2 * GIB);
    add_mem(r, 1, 0, 0, 2 * GIB, 0, 0, 2 * GIB, 2 * GIB);
    add_mem(r, 1, 1, 2 * MS, 1 * GIB, 1 * GIB, 0, 2 * GIB, 2 * GIB);
    add_mem(r, 1, 0, 4 * MS, 2 * GIB, 0, 0, 2 * GIB, 2 * GIB);
    add_op(r, 1, 1, 3, MS_WK_KERNEL, 1, 0, 4 * MS);
    add_op(r, 1, 0, 5, MS_WK_KERNEL, 0, 0, 1 * MS);
    add_op(r, 0, 0, 5, MS_WK_KERNEL, 0, 0, 9 * MS); /* step 0: not drawn */
    ck_assert_int_eq(write_host(r, 2, 0, NULL), MS_OK);
    char *svg = read_file(dir, "memory.svg");
    assert_svg(svg);
    ck_assert_int_eq(count(svg, "class=\"frame\""), 2);
    /* Axis 0..2 GiB (2 / 5 = 0.4 -> 0.5 GiB ticks).  The last memory
     * event is at 4 ms, so t = 2 ms is column 500. */
    assert_path(svg, "dev0-comm_buffer", "M200 324V104.0H1200V324Z");
    assert_path(svg, "dev1-comm_buffer", "M200 614V504.0H700V394.0H1200V614Z");
    ck_assert_ptr_nonnull(strstr(svg, "device 1 (pipeline stage 1), step 1"));
    ck_assert_ptr_nonnull(strstr(svg, ">0.5</text>"));
    free(svg);
    svg = read_file(dir, "timeline.svg");
    assert_svg(svg);
    ck_assert_ptr_nonnull(strstr(svg, ">dev 0 stream 5 compute</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">dev 1 stream 3 collectives</text>"));
    /* Device 1's lane: 72 + 22 + 10 (the gap between devices). */
    assert_path(svg, "kernel-100", "M200 72h250v18h-250zM200 104h1000v18h-1000z");
    free(svg);
    ms_record_free(r);
}
END_TEST

START_TEST(byte_identical)
{
    ms_run_record *r = one_device_record();
    add_op(r, 0, 0, 7, MS_WK_KERNEL, 0, 0, 1 * MS);
    add_op(r, 0, 0, 9, MS_WK_SWAP_IN, 0, 1 * MS, 3 * MS);
    char dir2[64];
    snprintf(dir2, sizeof dir2, "/tmp/memsim-svg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir2));
    ck_assert_int_eq(rep_write_svg(dir, r, programs, 1, NULL), MS_OK);
    ck_assert_int_eq(rep_write_svg(dir2, r, programs, 1, NULL), MS_OK);
    static const char *const names[] = {"memory.svg", "timeline.svg"};
    for (int i = 0; i < 2; i++) {
        char *a = read_file(dir, names[i]), *b = read_file(dir2, names[i]);
        ck_assert_str_eq(a, b);
        free(a);
        free(b);
        remove_in(dir2, names[i]);
    }
    rmdir(dir2);
    ms_record_free(r);
}
END_TEST

START_TEST(empty_record_says_no_data)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    add_mem(r, -1, 0, 0, 1 * GIB, 0, 0, 1 * GIB, 1 * GIB); /* setup only */
    ck_assert_int_eq(rep_write_svg(dir, r, programs, 1, NULL), MS_OK);
    static const char *const names[] = {"memory.svg", "timeline.svg"};
    for (int i = 0; i < 2; i++) {
        char *svg = read_file(dir, names[i]);
        assert_svg(svg);
        ck_assert_ptr_nonnull(strstr(svg, "id=\"no-data\""));
        free(svg);
    }
    ms_record_free(r);
}
END_TEST

START_TEST(bad_arguments)
{
    ms_run_record *r = one_device_record();
    ms_diag d = {0};
    ck_assert_int_eq(rep_write_svg(NULL, r, programs, 1, &d), MS_EINVAL);
    ck_assert_int_eq(rep_write_svg(dir, NULL, programs, 1, &d), MS_EINVAL);
    ck_assert_int_eq(rep_write_svg(dir, r, NULL, 1, &d), MS_EINVAL);
    ck_assert_int_eq(rep_write_svg(dir, r, programs, 0, NULL), MS_EINVAL);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/no/such/dir", dir);
    ck_assert_int_eq(rep_write_svg(missing, r, programs, 1, &d), MS_EIO);
    ck_assert_int_eq(d.code, MS_EIO);
    ck_assert_ptr_nonnull(strstr(d.msg, missing));
    ck_assert_ptr_nonnull(strstr(d.msg, "memory.svg"));
    ck_assert_int_eq(access(dir, F_OK), 0);
    ms_record_free(r);
}
END_TEST

/* A file that cannot be put in place (a directory holds its name) fails
 * with its path and leaves no NAME.tmp behind. */
START_TEST(failed_rename_leaves_nothing)
{
    ms_run_record *r = one_device_record();
    char blocker[128], tmp[128];
    snprintf(blocker, sizeof blocker, "%s/timeline.svg", dir);
    snprintf(tmp, sizeof tmp, "%s/timeline.svg.tmp", dir);
    ck_assert_int_eq(mkdir(blocker, 0700), 0);
    ms_diag d = {0};
    ck_assert_int_eq(rep_write_svg(dir, r, programs, 1, &d), MS_EIO);
    ck_assert_ptr_nonnull(strstr(d.msg, blocker));
    ck_assert_int_eq(access(tmp, F_OK), -1);
    ck_assert_int_eq(rmdir(blocker), 0);
    ms_record_free(r);
}
END_TEST

/* ---- the device clock ---------------------------------------------- */

/* Three ops on stream 7 and a swap-out of x on stream 8; the host issues
 * everything within 25 us while the device takes 5 ms:
 *   op 0 writes x        issued 0      runs 0 .. 1 ms
 *   op 1 reads x, writes a  issued 10 us  runs 1 .. 3 ms
 *   swap-out of x        issued 12 us  runs 1 .. 5 ms (stream 8)
 *   op 2 reads a, writes b  issued 20 us  runs 3 .. 4 ms
 * Allocator events (host time): alloc x 0, alloc a 5 us, free x 15 us
 * (after its swap-out was issued), alloc b 18 us, free a 25 us.  On the
 * device clock: x from 0, a from 1 ms, b from 3 ms, a freed at 4 ms (end of
 * op 2), x at 5 ms (end of its copy): 4 GiB are held from 3 to 4 ms, which
 * the host clock never shows (its order frees x before b exists). */
static uint32_t in1[] = {0}, out0[] = {0}, out1[] = {1}, in2[] = {1}, out2[] = {2};
static ms_op clock_ops[3] = {
    {.id = 0, .name = "make_x", .stream = MS_SR_COMPUTE, .outputs = out0, .n_outputs = 1},
    {.id = 1,
     .name = "x_to_a",
     .stream = MS_SR_COMPUTE,
     .inputs = in1,
     .n_inputs = 1,
     .outputs = out1,
     .n_outputs = 1},
    {.id = 2,
     .name = "a_to_b",
     .stream = MS_SR_COMPUTE,
     .inputs = in2,
     .n_inputs = 1,
     .outputs = out2,
     .n_outputs = 1},
};
static ms_tensor clock_tensors[3] = {
    {.id = 0, .name = "x", .kind = MS_TK_ACTIVATION, .bytes = GIB},
    {.id = 1, .name = "a", .kind = MS_TK_ACTIVATION, .bytes = 2 * GIB},
    {.id = 2, .name = "b", .kind = MS_TK_ACTIVATION, .bytes = GIB},
};
static ms_program_view clock_program = {
    .ops = clock_ops, .n_ops = 3, .tensors = clock_tensors, .n_tensors = 3};

static void add_issued(ms_run_record *r, uint64_t stream, ms_work_kind kind, uint32_t op,
                       uint32_t tensor, int64_t issue, int64_t start, int64_t end)
{
    ms_op_row o = {.step = 0,
                   .device = 0,
                   .kind = kind,
                   .op = op,
                   .tensor = tensor,
                   .stream_id = stream,
                   .issue_ns = issue,
                   .start_ns = start,
                   .end_ns = end};
    ck_assert_int_eq(ms_record_add_op(r, &o), MS_OK);
}

static void add_event(ms_run_record *r, int action, uint32_t tensor, int64_t t, uint64_t act)
{
    ms_mem_row m = {.step = 0,
                    .device = 0,
                    .time_ns = t,
                    .action = action,
                    .tensor = tensor,
                    .allocated = act,
                    .reserved = 8 * GIB};
    m.by_kind[MS_TK_ACTIVATION] = act;
    ck_assert_int_eq(ms_record_add_mem(r, &m), MS_OK);
}

static ms_run_record *clock_record(void)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    add_issued(r, 7, MS_WK_KERNEL, 0, UINT32_MAX, 0, 0, 1 * MS);
    add_issued(r, 7, MS_WK_KERNEL, 1, UINT32_MAX, 10000, 1 * MS, 3 * MS);
    add_issued(r, 8, MS_WK_SWAP_OUT, 1, 0, 12000, 1 * MS, 5 * MS);
    add_issued(r, 7, MS_WK_KERNEL, 2, UINT32_MAX, 20000, 3 * MS, 4 * MS);
    add_event(r, MS_AA_ALLOC, 0, 0, 1 * GIB);
    add_event(r, MS_AA_ALLOC, 1, 5000, 3 * GIB);
    add_event(r, MS_AA_FREE_REQUESTED, 0, 15000, 2 * GIB);
    add_event(r, MS_AA_ALLOC, 2, 18000, 3 * GIB);
    add_event(r, MS_AA_FREE_REQUESTED, 1, 25000, 1 * GIB);
    return r;
}

START_TEST(device_clock_follows_the_kernels)
{
    ms_run_record *r = clock_record();
    int64_t *t = NULL;
    ck_assert_int_eq(rep_mem_device_times(r, &clock_program, 1, &t), MS_OK);
    static const int64_t want[5] = {0, 1 * MS, 5 * MS, 3 * MS, 4 * MS};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(t[i] == want[i], "row %d at %lld ns, expected %lld", i, (long long)t[i],
                      (long long)want[i]);
    /* The series in device order, summed again: 1, 3, 4, 2, 1 GiB. */
    rep_mem_series ser;
    ck_assert_int_eq(rep_mem_series_build(r, t, MS_CLOCK_DEVICE, 0, &ser), MS_OK);
    ck_assert_uint_eq(ser.n, 5);
    static const uint64_t held[5] = {1, 3, 4, 2, 1};
    for (int i = 0; i < 5; i++) {
        ck_assert_uint_eq(ser.rows[i].allocated, held[i] * GIB);
        ck_assert_uint_eq(ser.rows[i].by_kind[MS_TK_ACTIVATION], held[i] * GIB);
    }
    rep_mem_series_free(&ser);
    free(t);
    ck_assert_int_eq(rep_write_svg(dir, r, &clock_program, 1, NULL), MS_OK);
    char *mem = read_file(dir, "memory.svg"), *tl = read_file(dir, "timeline.svg");
    assert_svg(mem);
    ck_assert_ptr_nonnull(strstr(mem, "peak allocated 4.00 GiB at 3.000 ms"));
    ck_assert_ptr_nonnull(strstr(mem, "device time since the step start (ms), the timeline's"));
    ck_assert_ptr_nonnull(strstr(mem, "step 0 (the last in the record), device time"));
    /* One axis for both plots, 0 .. 5 ms: the 1.0 ms tick at x 400. */
    ck_assert_ptr_nonnull(strstr(mem, "x=\"400.0\" y=\"338\">1.0</text>"));
    ck_assert_ptr_nonnull(strstr(tl, "x=\"400.0\""));
    ck_assert_ptr_nonnull(strstr(tl, ">1.0</text>"));
    /* Allocated: 1 GiB from x 200, 3 from 400 (1 ms), 4 from 800 (3 ms),
     * 2 from 1000 (4 ms); the free at 5 ms, the axis end, falls in the last
     * column, which keeps its largest value (peaks are never averaged
     * away).  Axis 0..8 GiB (reserved): y = 324 - b / 8 GiB * 220. */
    assert_path(mem, "dev0-allocated", "M200 296.5H400V241.5H800V214.0H1000V269.0H1200");
    free(mem);
    free(tl);
    /* The host clock keeps the allocator's order and time. */
    rep_svg_options o = {.memory_clock = MS_CLOCK_HOST};
    ck_assert_int_eq(rep_write_svg_opts(dir, r, &clock_program, 1, &o, NULL), MS_OK);
    mem = read_file(dir, "memory.svg");
    ck_assert_ptr_nonnull(strstr(mem, "peak allocated 3.00 GiB at 0.005 ms"));
    free(mem);
    ms_record_free(r);
}
END_TEST

/* A step without work that ran has no device time: its memory rows are
 * left out of the device-clock plot (and say -1 in memory.csv). */
START_TEST(device_clock_without_kernels)
{
    ms_run_record *r = one_device_record();
    int64_t *t = NULL;
    ck_assert_int_eq(rep_mem_device_times(r, programs, 1, &t), MS_OK);
    for (size_t i = 0; i < ms_record_n_mem(r); i++)
        ck_assert_int_eq(t[i], -1);
    free(t);
    ck_assert_int_eq(rep_write_svg(dir, r, programs, 1, NULL), MS_OK);
    char *mem = read_file(dir, "memory.svg");
    assert_svg(mem);
    ck_assert_ptr_null(strstr(mem, "id=\"dev0-allocated\""));
    free(mem);
    ms_record_free(r);
}
END_TEST

/* ---- trace.json ------------------------------------------------------ */

static int count_in(const char *s, const char *needle)
{
    return count(s, needle);
}

/* 1100 steps (more than the 1024 the trace once kept), process and thread
 * names, and a counter event per change of memory only. */
START_TEST(trace_keeps_every_step_and_names_its_tracks)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    for (int step = 0; step < 1100; step++) {
        ms_op_row o = {.step = step,
                       .device = 0,
                       .kind = MS_WK_KERNEL,
                       .op = 0,
                       .tensor = UINT32_MAX,
                       .stream_id = 7,
                       .issue_ns = 0,
                       .start_ns = 0,
                       .end_ns = 1000};
        ck_assert_int_eq(ms_record_add_op(r, &o), MS_OK);
        /* alloc then free: the free repeats nothing, the second alloc of
         * the same instant replaces the first. */
        ms_mem_row m = {.step = step,
                        .device = 0,
                        .time_ns = 0,
                        .action = MS_AA_ALLOC,
                        .tensor = 0,
                        .allocated = 512,
                        .reserved = 2048};
        ck_assert_int_eq(ms_record_add_mem(r, &m), MS_OK);
        m.allocated = 1024;
        ck_assert_int_eq(ms_record_add_mem(r, &m), MS_OK);
        m.action = MS_AA_FREE_REQUESTED;
        m.time_ns = 1;
        m.allocated = 0;
        ck_assert_int_eq(ms_record_add_mem(r, &m), MS_OK);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/trace.json", dir);
    ms_diag d = {0};
    ck_assert_int_eq(ms_report_write_chrome_trace(path, r, &clock_program, 1, &d), MS_OK);
    char *t = read_file(dir, "trace.json");
    ck_assert_int_eq(count_in(t, "\"ph\":\"X\""), 1100);
    ck_assert_ptr_nonnull(strstr(t, "\"args\":{\"step\":1099,"));
    ck_assert_ptr_nonnull(strstr(t, "\"name\":\"process_name\",\"args\":{\"name\":\"device 0"));
    ck_assert_ptr_nonnull(strstr(t, "\"tid\":7,\"name\":\"thread_name\",\"args\":{\"name\":"
                                    "\"stream 7 compute\"}"));
    ck_assert_ptr_nonnull(strstr(t, "\"memory_clock\":\"device\""));
    /* Per step: 1024 at the op's start (the 512 of the same instant is
     * superseded), 0 at its end; never the same value twice in a row. */
    ck_assert_int_eq(count_in(t, "\"ph\":\"C\""), 2200);
    ck_assert_int_eq(count_in(t, "\"allocated\":512"), 0);
    /* Steps of 1 us laid end to end: step 1099 starts at 1099 us. */
    ck_assert_ptr_nonnull(strstr(t, "\"ts\":1099.000,\"name\":\"memory\",\"args\":{"
                                    "\"allocated\":1024,"));
    free(t);
    remove_in(dir, "trace.json");
    ms_record_free(r);
}
END_TEST

static Suite *svg_suite(void)
{
    Suite *s = suite_create("report_svg");
    TCase *tc = tcase_create("svg");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stack_top_at_peak);
    tcase_add_test(tc, capacity_line);
    tcase_add_test(tc, downsampling_keeps_the_spike);
    tcase_add_test(tc, timeline_lanes_and_merging);
    tcase_add_test(tc, host_clock_has_its_own_axis);
    tcase_add_test(tc, two_devices_two_panels);
    tcase_add_test(tc, byte_identical);
    tcase_add_test(tc, empty_record_says_no_data);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, failed_rename_leaves_nothing);
    tcase_add_test(tc, device_clock_follows_the_kernels);
    tcase_add_test(tc, device_clock_without_kernels);
    tcase_add_test(tc, trace_keeps_every_step_and_names_its_tracks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(svg_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
