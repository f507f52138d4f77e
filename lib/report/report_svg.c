/* The SVG plots of a run: memory over time by tensor kind (memory.svg) and
 * the stream timelines (timeline.svg).  See report_svg.h for what they show
 * and for the layout the coordinates follow. */
#include "report_svg.h"
#include "lib/base/growable.h"
#include "report_internal.h"
#include "lib/base/units.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_WORK 4 /* ms_work_kind values */
#define WIDTH (MS_SVG_LEFT + MS_SVG_PLOT_W + MS_SVG_RIGHT)
#define LANE_PITCH (MS_SVG_LANE_H + MS_SVG_LANE_GAP)
#define DEVICE_GAP 10 /* extra space between the lanes of two devices */

/* Okabe-Ito colours: told apart by colour-blind readers, fixed per kind so
 * plots of different runs compare at a glance. */
static const char *const tensor_colour[MS_TK_COUNT] = {
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#F0E442", "#56B4E9",
};
static const char *const work_colour[N_WORK] = {"#0072B2", "#E69F00", "#D55E00", "#009E73"};

/* ---- what the plots cover ------------------------------------------- */

/* A device, or a (device, stream, work kind) lane. */
typedef struct key {
    int device;
    uint64_t stream;
    int kind;
} key;

typedef struct key_set {
    key *k;
    size_t n, cap;
} key_set;

static int key_cmp(const key *a, const key *b)
{
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->stream != b->stream)
        return a->stream < b->stream ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return 0;
}

/* Index of k in the sorted set, or where it would go (*found false). */
static size_t key_find(const key_set *s, key k, bool *found)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = key_cmp(&s->k[mid], &k);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

/* Sorted, so devices and lanes come out in the same order for any row order. */
static ms_status key_add(key_set *s, key k)
{
    bool found;
    size_t at = key_find(s, k, &found);
    if (found)
        return MS_OK;
    if (!MS_GROW(s->k, s->n, s->cap, 16))
        return MS_ENOMEM;
    memmove(&s->k[at + 1], &s->k[at], (s->n - at) * sizeof *s->k);
    s->k[at] = k;
    s->n++;
    return MS_OK;
}

static const ms_op_row *op_at(const ms_run_record *rec, size_t i)
{
    const ms_op_row *r = NULL;
    r = ms_record_op(rec, i);
    return r;
}

/* An op row the timeline can draw: it ran (device times are known). */
static bool op_ran(const ms_op_row *r)
{
    return r->step >= 0 && r->start_ns >= 0 && r->end_ns >= r->start_ns;
}

/* The last step in the record (one step for both plots) and the time axis
 * of a plot: from the step start to its last op end (device time), or, for
 * memory on the host clock, to its last memory event (host time: the host
 * can run far ahead of the device, so memory in host time would otherwise
 * be squeezed into the start of a device-time axis).  On the device clock
 * memory and timeline share one axis. */
typedef struct span {
    int step;      /* -1: no row of any step */
    int64_t t_max; /* ns, > 0 */
} span;

static int last_step(const ms_run_record *rec)
{
    int step = -1;
    for (size_t i = 0; i < ms_record_n_mem(rec); i++)
        if (ms_record_mem(rec, i)->step > step)
            step = ms_record_mem(rec, i)->step;
    for (size_t i = 0; i < ms_record_n_ops(rec); i++)
        if (op_ran(op_at(rec, i)) && op_at(rec, i)->step > step)
            step = op_at(rec, i)->step;
    return step;
}

static span ops_span(const ms_run_record *rec, int step)
{
    span sp = {.step = step, .t_max = 1};
    for (size_t i = 0; i < ms_record_n_ops(rec); i++) {
        const ms_op_row *r = op_at(rec, i);
        if (op_ran(r) && r->step == step && r->end_ns > sp.t_max)
            sp.t_max = r->end_ns;
    }
    return sp;
}

/* The memory axis: the timeline's on the device clock (widened to the last
 * event, should one fall after every kernel), else to the last event. */
static span memory_span(const ms_run_record *rec, int step, const rep_mem_series *series,
                        ms_memory_clock clock)
{
    span sp = clock == MS_CLOCK_DEVICE ? ops_span(rec, step) : (span){.step = step, .t_max = 1};
    for (size_t i = 0; i < series->n; i++)
        if (series->rows[i].time_ns > sp.t_max)
            sp.t_max = series->rows[i].time_ns;
    return sp;
}

/* The pixel column of time t (integer arithmetic: no rounding drift). */
static int column_of(int64_t t, const span *sp)
{
    if (t <= 0)
        return 0;
    int64_t c = t * MS_SVG_PLOT_W / sp->t_max;
    return c >= MS_SVG_PLOT_W ? MS_SVG_PLOT_W - 1 : (int)c;
}

/* ---- axes ------------------------------------------------------------- */

/* A tick step of 1, 2 or 5 x 10^k giving about `target` ticks over [0, v]
 * (the nearest on a log scale: v / step is 0.63 to 1.41 times target). */
static double nice_step(double v, int target)
{
    double raw = v / target;
    if (!(raw > 0))
        return 1.0;
    double mag = 1.0;
    while (mag * 10.0 <= raw)
        mag *= 10.0;
    while (mag > raw)
        mag /= 10.0;
    double n = raw / mag;
    return (n < 1.4142 ? 1.0 : n < 3.1623 ? 2.0 : n < 7.0711 ? 5.0 : 10.0) * mag;
}

/* Decimals that show a tick step exactly (0.05 -> 2). */
static int step_decimals(double step)
{
    int d = 0;
    for (double s = step; s < 0.999 && d < 6; s *= 10.0)
        d++;
    return d;
}

static void put_header(FILE *f, int height, const char *title)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            WIDTH, height, WIDTH, height);
    fprintf(f, "<title>%s</title>\n", title);
    fputs("<style>", f);
    for (int k = 0; k < MS_TK_COUNT; k++)
        fprintf(f, ".tk%d{fill:%s}", k, tensor_colour[k]);
    for (int k = 0; k < N_WORK; k++)
        fprintf(f, ".wk%d{fill:%s}", k, work_colour[k]);
    fputs(".grid{stroke:#ddd;stroke-width:1}.frame{fill:none;stroke:#444}"
          ".alloc{fill:none;stroke:#000;stroke-width:1;stroke-opacity:.7}"
          ".resv{fill:none;stroke:#D55E00;stroke-width:1.2;stroke-dasharray:5 3}"
          ".cap{stroke:#C00;stroke-width:1.5;stroke-dasharray:10 3 2 3}"
          ".r{text-anchor:end}.m{text-anchor:middle}"
          ".o1{fill-opacity:.3}.o2{fill-opacity:.5}.o3{fill-opacity:.75}</style>\n", f);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", WIDTH, height);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\">%s</text>\n", MS_SVG_LEFT, title);
}

static void put_no_data(FILE *f)
{
    fprintf(f, "<text id=\"no-data\" x=\"%d\" y=\"%d\" font-size=\"13\">no data: the record "
               "holds no row of a step</text>\n</svg>\n",
            MS_SVG_LEFT, MS_SVG_TOP + 20);
}

/* Vertical grid lines and labels of the time axis under a plot spanning
 * [top, bottom]. */
static void put_time_axis(FILE *f, const span *sp, int top, int bottom)
{
    double ms = (double)sp->t_max / 1e6;
    double step = nice_step(ms, 10);
    int dec = step_decimals(step);
    for (int i = 0;; i++) {
        double t = i * step;
        if (t > ms * (1.0 + 1e-9))
            break;
        double x = MS_SVG_LEFT + t / ms * MS_SVG_PLOT_W;
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>", x, top, x,
                bottom);
        fprintf(f, "<text class=\"m\" x=\"%.1f\" y=\"%d\">%.*f</text>\n", x, bottom + 14, dec, t);
    }
}

static void put_swatch(FILE *f, int x, const char *cls, const char *name)
{
    fprintf(f, "<rect class=\"%s\" x=\"%d\" y=\"36\" width=\"12\" height=\"12\"/>"
               "<text x=\"%d\" y=\"46\">%s</text>\n",
            cls, x, x + 16, name);
}

/* ---- memory.svg ----------------------------------------------------- */

/* One pixel column of one device's memory: the rows it keeps. */
typedef struct mem_col {
    size_t top_row;     /* the row with the largest requested total */
    size_t last_row;    /* the column's last row: the state it hands on */
    int64_t first_ns;   /* time of its first row */
    uint64_t top_total;
    uint64_t allocated; /* largest in the column */
    uint64_t reserved;
    bool used;
} mem_col;

/* Raw peaks of a device in the step, from every row (not the columns). */
typedef struct mem_peaks {
    uint64_t total, allocated, reserved;
    int64_t total_ns, allocated_ns, reserved_ns;
} mem_peaks;

typedef struct mem_plot {
    const ms_mem_row *rows; /* the step's rows on the plot's clock, in time order */
    size_t n_rows;
    ms_memory_clock clock;
    const ms_program_view *programs;
    size_t n_programs;
    uint64_t capacity;
    span sp;
    key_set devices;
    mem_col *cols;      /* devices.n x MS_SVG_PLOT_W */
    mem_peaks *peaks;   /* devices.n */
    double y_max;       /* bytes at the top of every panel */
    double y_step;      /* bytes between y ticks */
} mem_plot;

static uint64_t requested_total(const ms_mem_row *r)
{
    uint64_t t = 0;
    for (int k = 0; k < MS_TK_COUNT; k++)
        t += r->by_kind[k];
    return t;
}

static void mem_take_row(mem_plot *mp, const ms_mem_row *r, size_t i)
{
    bool found;
    size_t p = key_find(&mp->devices, (key){r->device, 0, 0}, &found);
    mem_col *c = &mp->cols[p * MS_SVG_PLOT_W + column_of(r->time_ns, &mp->sp)];
    mem_peaks *pk = &mp->peaks[p];
    uint64_t total = requested_total(r);
    /* The stack shows one real moment (the largest requested total), not
     * per-kind maxima that never coexisted; allocated and reserved are
     * lines of their own and keep their own maxima. */
    if (!c->used || total > c->top_total) {
        c->top_row = i;
        c->top_total = total;
    }
    if (!c->used || r->allocated > c->allocated)
        c->allocated = r->allocated;
    if (!c->used || r->reserved > c->reserved)
        c->reserved = r->reserved;
    if (!c->used)
        c->first_ns = r->time_ns;
    c->last_row = i;
    c->used = true;
    if (total > pk->total || pk->total_ns < 0) {
        pk->total = total;
        pk->total_ns = r->time_ns;
    }
    if (r->allocated > pk->allocated || pk->allocated_ns < 0) {
        pk->allocated = r->allocated;
        pk->allocated_ns = r->time_ns;
    }
    if (r->reserved > pk->reserved || pk->reserved_ns < 0) {
        pk->reserved = r->reserved;
        pk->reserved_ns = r->time_ns;
    }
}

static void mem_plot_free(mem_plot *mp)
{
    free(mp->devices.k);
    free(mp->cols);
    free(mp->peaks);
}

static ms_status mem_plot_build(mem_plot *mp)
{
    size_t n = mp->n_rows;
    for (size_t i = 0; i < n; i++) {
        const ms_mem_row *r = &mp->rows[i];
        if (r->step == mp->sp.step && mp->sp.step >= 0 &&
            key_add(&mp->devices, (key){r->device, 0, 0}) != MS_OK)
            return MS_ENOMEM;
    }
    size_t nd = mp->devices.n;
    mp->cols = calloc(nd * MS_SVG_PLOT_W + 1, sizeof *mp->cols);
    mp->peaks = calloc(nd + 1, sizeof *mp->peaks);
    if (mp->cols == NULL || mp->peaks == NULL)
        return MS_ENOMEM;
    for (size_t p = 0; p < nd; p++)
        mp->peaks[p].total_ns = mp->peaks[p].allocated_ns = mp->peaks[p].reserved_ns = -1;
    double top = (double)mp->capacity;
    for (size_t i = 0; i < n; i++) {
        const ms_mem_row *r = &mp->rows[i];
        if (r->step != mp->sp.step || mp->sp.step < 0)
            continue;
        mem_take_row(mp, r, i);
        double hi = (double)requested_total(r);
        hi = fmax(hi, fmax((double)r->allocated, (double)r->reserved));
        top = fmax(top, hi);
    }
    /* One y scale for every panel: stages compare by eye. */
    double gib = top > 0 ? top / BASE_GIB : 1.0;
    double step = nice_step(gib, 5);
    mp->y_step = step * BASE_GIB;
    mp->y_max = ceil(gib / step - 1e-9) * step * BASE_GIB;
    return MS_OK;
}

/* The first nanosecond of column c: the least t with column_of(t) == c. */
static int64_t column_start(int c, const span *sp)
{
    return ((int64_t)c * sp->t_max + MS_SVG_PLOT_W - 1) / MS_SVG_PLOT_W;
}

/* The value of each series in each column: the column's own rows, and the
 * state the previous rows left (memory holds between allocator events)
 * unless a row replaces it at the column's first nanosecond. */
typedef struct mem_val {
    uint64_t cum[MS_TK_COUNT]; /* requested bytes of kinds 0..k */
    uint64_t allocated, reserved;
    bool valid;                /* false before the device's first row */
} mem_val;

static void mem_resolve(const mem_plot *mp, size_t p, mem_val *v)
{
    const mem_col *cols = &mp->cols[p * MS_SVG_PLOT_W];
    const ms_mem_row *carry = NULL;
    for (int c = 0; c < MS_SVG_PLOT_W; c++) {
        if (cols[c].used && cols[c].first_ns <= column_start(c, &mp->sp))
            carry = NULL;
        const ms_mem_row *top = carry;
        uint64_t alloc = carry ? carry->allocated : 0, resv = carry ? carry->reserved : 0;
        if (cols[c].used) {
            if (top == NULL || cols[c].top_total >= requested_total(top))
                top = &mp->rows[cols[c].top_row];
            alloc = cols[c].allocated > alloc ? cols[c].allocated : alloc;
            resv = cols[c].reserved > resv ? cols[c].reserved : resv;
            carry = &mp->rows[cols[c].last_row];
        }
        v[c].valid = top != NULL;
        if (top == NULL)
            continue;
        uint64_t sum = 0;
        for (int k = 0; k < MS_TK_COUNT; k++)
            v[c].cum[k] = sum += top->by_kind[k];
        v[c].allocated = alloc;
        v[c].reserved = resv;
    }
}

typedef struct panel_geom {
    int top, bottom; /* of the plot area */
} panel_geom;

static panel_geom panel_at(size_t p)
{
    int top = MS_SVG_TOP + (int)p * MS_SVG_PANEL_H + MS_SVG_PANEL_HEAD;
    return (panel_geom){top, top + MS_SVG_PLOT_H};
}

static void y_str(char *buf, size_t n, const mem_plot *mp, panel_geom g, uint64_t bytes)
{
    snprintf(buf, n, "%.1f", g.bottom - (double)bytes / mp->y_max * MS_SVG_PLOT_H);
}

/* Series: 0..MS_TK_COUNT-1 the cumulative kinds, then allocated, reserved. */
#define SERIES_ALLOCATED MS_TK_COUNT
#define SERIES_RESERVED (MS_TK_COUNT + 1)

static uint64_t series_of(const mem_val *v, int s)
{
    return s == SERIES_ALLOCATED ? v->allocated : s == SERIES_RESERVED ? v->reserved : v->cum[s];
}

/* A step function over the columns as H/V path commands, one per change:
 * an area down to the plot bottom, or a line. */
static void put_series(FILE *f, const mem_plot *mp, panel_geom g, const mem_val *v, int s,
                       bool area)
{
    int c0 = 0;
    while (c0 < MS_SVG_PLOT_W && !v[c0].valid)
        c0++;
    if (c0 == MS_SVG_PLOT_W)
        return;
    char prev[32], cur[32];
    y_str(prev, sizeof prev, mp, g, series_of(&v[c0], s));
    if (area)
        fprintf(f, "M%d %dV%s", MS_SVG_LEFT + c0, g.bottom, prev);
    else
        fprintf(f, "M%d %s", MS_SVG_LEFT + c0, prev);
    for (int c = c0 + 1; c < MS_SVG_PLOT_W; c++) {
        y_str(cur, sizeof cur, mp, g, series_of(&v[c], s));
        if (strcmp(cur, prev) != 0) {
            fprintf(f, "H%dV%s", MS_SVG_LEFT + c, cur);
            memcpy(prev, cur, sizeof prev);
        }
    }
    fprintf(f, "H%d", MS_SVG_LEFT + MS_SVG_PLOT_W);
    if (area)
        fprintf(f, "V%dZ", g.bottom);
}

static void put_gib_axis(FILE *f, const mem_plot *mp, panel_geom g)
{
    int dec = step_decimals(mp->y_step / BASE_GIB);
    for (int i = 0;; i++) {
        double b = i * mp->y_step;
        if (b > mp->y_max * (1.0 + 1e-9))
            break;
        double y = g.bottom - b / mp->y_max * MS_SVG_PLOT_H;
        fprintf(f, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
                   "<text class=\"r\" x=\"%d\" y=\"%.1f\">%.*f</text>\n",
                MS_SVG_LEFT, y, MS_SVG_LEFT + MS_SVG_PLOT_W, y, MS_SVG_LEFT - 6, y + 4, dec,
                b / BASE_GIB);
    }
    fprintf(f, "<text class=\"r\" x=\"%d\" y=\"%d\">GiB</text>\n", MS_SVG_LEFT - 6, g.top - 8);
}

static void put_panel_head(FILE *f, const mem_plot *mp, size_t p, panel_geom g)
{
    int dev = mp->devices.k[p].device;
    const mem_peaks *pk = &mp->peaks[p];
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" font-weight=\"bold\">device %d", MS_SVG_LEFT,
            g.top - MS_SVG_PANEL_HEAD + 14, dev);
    if (dev >= 0 && (size_t)dev < mp->n_programs)
        fprintf(f, " (pipeline stage %d)", mp->programs[dev].stage);
    fprintf(f, ", step %d</text>\n", mp->sp.step);
    fprintf(f, "<text x=\"%d\" y=\"%d\">peak requested %.2f GiB at %.3f ms; peak allocated %.2f "
               "GiB at %.3f ms; peak reserved %.2f GiB at %.3f ms</text>\n",
            MS_SVG_LEFT, g.top - MS_SVG_PANEL_HEAD + 30, pk->total / BASE_GIB, pk->total_ns / 1e6,
            pk->allocated / BASE_GIB, pk->allocated_ns / 1e6, pk->reserved / BASE_GIB,
            pk->reserved_ns / 1e6);
}

static void mem_put_panel(FILE *f, const mem_plot *mp, size_t p, mem_val *v)
{
    panel_geom g = panel_at(p);
    int dev = mp->devices.k[p].device;
    mem_resolve(mp, p, v);
    put_panel_head(f, mp, p, g);
    put_gib_axis(f, mp, g);
    put_time_axis(f, &mp->sp, g.top, g.bottom);
    /* Painter's order: the area up to the total in the top kind's colour
     * first, each lower cumulative area over it, so every band shows its
     * own kind and each path has one varying edge. */
    for (int k = MS_TK_COUNT - 1; k >= 0; k--) {
        fprintf(f, "<path id=\"dev%d-%s\" class=\"tk%d\" d=\"", dev,
                ms_tensor_kind_name((ms_tensor_kind)k), k);
        put_series(f, mp, g, v, k, true);
        fputs("\"/>\n", f);
    }
    fprintf(f, "<path id=\"dev%d-allocated\" class=\"alloc\" d=\"", dev);
    put_series(f, mp, g, v, SERIES_ALLOCATED, false);
    fprintf(f, "\"/>\n<path id=\"dev%d-reserved\" class=\"resv\" d=\"", dev);
    put_series(f, mp, g, v, SERIES_RESERVED, false);
    fputs("\"/>\n", f);
    if (mp->capacity > 0) {
        char y[32];
        y_str(y, sizeof y, mp, g, mp->capacity);
        fprintf(f, "<line id=\"dev%d-capacity\" class=\"cap\" x1=\"%d\" y1=\"%s\" x2=\"%d\" "
                   "y2=\"%s\"/><text x=\"%d\" y=\"%s\">capacity</text>\n",
                dev, MS_SVG_LEFT, y, MS_SVG_LEFT + MS_SVG_PLOT_W, y,
                MS_SVG_LEFT + MS_SVG_PLOT_W + 4, y);
    }
    fprintf(f, "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n",
            MS_SVG_LEFT, g.top, MS_SVG_PLOT_W, MS_SVG_PLOT_H);
}

static void mem_put_legend(FILE *f, const mem_plot *mp)
{
    int x = MS_SVG_LEFT;
    for (int k = 0; k < MS_TK_COUNT; k++) {
        char cls[16];
        snprintf(cls, sizeof cls, "tk%d", k);
        const char *name = ms_tensor_kind_name((ms_tensor_kind)k);
        put_swatch(f, x, cls, name);
        x += 16 + 6 * (int)strlen(name) + 18;
    }
    static const char *const lines[] = {"alloc", "resv", "cap"};
    static const char *const names[] = {"allocated", "reserved", "capacity"};
    for (int i = 0; i < (mp->capacity > 0 ? 3 : 2); i++) {
        fprintf(f, "<line class=\"%s\" x1=\"%d\" y1=\"42\" x2=\"%d\" y2=\"42\"/>"
                   "<text x=\"%d\" y=\"46\">%s</text>\n",
                lines[i], x, x + 24, x + 28, names[i]);
        x += 28 + 6 * (int)strlen(names[i]) + 18;
    }
}

static ms_status mem_put(FILE *f, const void *ctx)
{
    const mem_plot *mp = ctx;
    size_t nd = mp->devices.n;
    char title[200];
    snprintf(title, sizeof title,
             "memsim: live device memory by tensor kind, step %d (the last "
             "in the record), %s time",
             mp->sp.step, mp->clock == MS_CLOCK_HOST ? "host issue" : "device");
    if (nd == 0) {
        put_header(f, MS_SVG_TOP + 40, "memsim: live device memory by tensor kind");
        put_no_data(f);
        return MS_OK;
    }
    int height = MS_SVG_TOP + (int)nd * MS_SVG_PANEL_H + 16;
    put_header(f, height, title);
    mem_put_legend(f, mp);
    mem_val *v = malloc(MS_SVG_PLOT_W * sizeof *v);
    if (v == NULL)
        return MS_ENOMEM;
    for (size_t p = 0; p < nd; p++)
        mem_put_panel(f, mp, p, v);
    free(v);
    if (mp->clock == MS_CLOCK_HOST)
        fprintf(f,
                "<text class=\"m\" x=\"%d\" y=\"%d\">host issue time since the step start "
                "(ms): when the allocator ran, ahead of the device; stacked: live requested "
                "bytes by tensor kind</text>\n</svg>\n",
                MS_SVG_LEFT + MS_SVG_PLOT_W / 2, height - 6);
    else
        fprintf(f,
                "<text class=\"m\" x=\"%d\" y=\"%d\">device time since the step start (ms), "
                "the timeline's axis: a block from the start of the first kernel that "
                "writes it to the end of the last that reads it; stacked: live requested "
                "bytes by tensor kind</text>\n</svg>\n",
                MS_SVG_LEFT + MS_SVG_PLOT_W / 2, height - 6);
    return MS_OK;
}

/* ---- timeline.svg --------------------------------------------------- */

typedef struct lane_info {
    const char *role; /* from the lane's first row: what the stream carries */
    int64_t busy_ns;
} lane_info;

/* One lane per (device, stream, work kind): a compute stream that also
 * replays recomputed ops gets a lane of its own for them, so a minority
 * kind shows however thinly it is spread (a lane colouring each pixel
 * column by its majority kind hid 194,560 recomputed ops a step on 70B). */
typedef struct timeline {
    const ms_run_record *rec;
    const ms_program_view *programs;
    size_t n_programs;
    span sp;
    key_set lanes;
    lane_info *info;  /* lanes.n */
    double *cover;    /* lanes.n x MS_SVG_PLOT_W x N_WORK: columns covered, in pixels */
} timeline;

static void timeline_free(timeline *tl)
{
    free(tl->lanes.k);
    free(tl->info);
    free(tl->cover);
}

static int work_kind_of(const ms_op_row *r)
{
    return (unsigned)r->kind < N_WORK ? (int)r->kind : MS_WK_KERNEL;
}

/* Spread an op over the columns it touches, by the share of each it covers. */
static void timeline_cover(timeline *tl, size_t lane, const ms_op_row *r)
{
    double scale = (double)MS_SVG_PLOT_W / (double)tl->sp.t_max;
    double x0 = (double)r->start_ns * scale, x1 = (double)r->end_ns * scale;
    int c = column_of(r->start_ns, &tl->sp);
    unsigned kind = work_kind_of(r);
    double *cov = &tl->cover[lane * MS_SVG_PLOT_W * N_WORK];
    for (; c < MS_SVG_PLOT_W; c++) {
        double lo = fmax(x0, c), hi = fmin(x1, c + 1.0);
        if (hi > lo)
            cov[c * N_WORK + kind] += hi - lo;
        if (x1 <= c + 1.0)
            break;
    }
}

static ms_status timeline_build(timeline *tl)
{
    size_t n = 0;
    n = ms_record_n_ops(tl->rec);
    for (size_t i = 0; i < n; i++) {
        const ms_op_row *r = op_at(tl->rec, i);
        if (op_ran(r) && r->step == tl->sp.step &&
            key_add(&tl->lanes, (key){r->device, r->stream_id, work_kind_of(r)}) != MS_OK)
            return MS_ENOMEM;
    }
    size_t nl = tl->lanes.n;
    tl->info = calloc(nl + 1, sizeof *tl->info);
    tl->cover = calloc(nl * MS_SVG_PLOT_W * N_WORK + 1, sizeof *tl->cover);
    if (tl->info == NULL || tl->cover == NULL)
        return MS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const ms_op_row *r = op_at(tl->rec, i);
        if (!op_ran(r) || r->step != tl->sp.step)
            continue;
        bool found;
        size_t l = key_find(&tl->lanes, (key){r->device, r->stream_id, work_kind_of(r)}, &found);
        if (tl->info[l].role == NULL)
            tl->info[l].role = rep_stream_role(r, tl->programs, tl->n_programs);
        tl->info[l].busy_ns += r->end_ns - r->start_ns;
        if (r->end_ns > r->start_ns)
            timeline_cover(tl, l, r);
    }
    return MS_OK;
}

static int lane_y(const timeline *tl, size_t l)
{
    int groups = 0;
    for (size_t i = 1; i <= l; i++)
        groups += tl->lanes.k[i].device != tl->lanes.k[i - 1].device;
    return MS_SVG_TOP + 8 + (int)l * LANE_PITCH + groups * DEVICE_GAP;
}

/* How busy a column is, in quarters: a 100 ns copy in a 4 us column still
 * shows (pale), and a compute stream busy 82% of the step does not read as
 * solid when its columns are only partly covered. */
#define LEVELS 4

/* Column c of lane l as kind * LEVELS + (quarters busy - 1), the kind being
 * the one covering most of it; -1 when nothing ran. */
static int column_cell(const timeline *tl, size_t l, int c)
{
    const double *cov = &tl->cover[(l * MS_SVG_PLOT_W + (size_t)c) * N_WORK];
    int best = -1;
    double busy = 0;
    for (int k = 0; k < N_WORK; k++) {
        busy += cov[k];
        if (cov[k] > 0 && (best < 0 || cov[k] > cov[best]))
            best = k;
    }
    if (best < 0)
        return -1;
    int level = (int)ceil(busy * LEVELS - 1e-9);
    level = level < 1 ? 1 : level > LEVELS ? LEVELS : level;
    return best * LEVELS + level - 1;
}

/* One path per kind and level ("kernel-100", "swap_in-25"), a subpath per
 * run of such columns in a lane; none when no column is of it. */
static void timeline_put_cell(FILE *f, const timeline *tl, int cell)
{
    bool open = false;
    for (size_t l = 0; l < tl->lanes.n; l++) {
        int y = lane_y(tl, l);
        for (int c = 0; c < MS_SVG_PLOT_W;) {
            if (column_cell(tl, l, c) != cell) {
                c++;
                continue;
            }
            int c1 = c + 1;
            while (c1 < MS_SVG_PLOT_W && column_cell(tl, l, c1) == cell)
                c1++;
            if (!open)
                fprintf(f, "<path id=\"%s-%d\" class=\"wk%d o%d\" d=\"",
                        ms_work_kind_name((ms_work_kind)(cell / LEVELS)),
                        100 * (cell % LEVELS + 1) / LEVELS, cell / LEVELS, cell % LEVELS + 1);
            open = true;
            fprintf(f, "M%d %dh%dv%dh-%dz", MS_SVG_LEFT + c, y, c1 - c, MS_SVG_LANE_H, c1 - c);
            c = c1;
        }
    }
    if (open)
        fputs("\"/>\n", f);
}

static bool same_stream(const key *a, const key *b)
{
    return a->device == b->device && a->stream == b->stream;
}

static void timeline_put_lanes(FILE *f, const timeline *tl)
{
    for (size_t l = 0; l < tl->lanes.n; l++) {
        int y = lane_y(tl, l);
        const key *k = &tl->lanes.k[l];
        /* A stream with several kinds names the kind of each of its lanes;
         * the lanes after its first only that (they sit right below it). */
        bool shared = (l > 0 && same_stream(&tl->lanes.k[l - 1], k)) ||
                      (l + 1 < tl->lanes.n && same_stream(&tl->lanes.k[l + 1], k));
        bool first = l == 0 || !same_stream(&tl->lanes.k[l - 1], k);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>",
                MS_SVG_LEFT, y, MS_SVG_PLOT_W, MS_SVG_LANE_H);
        if (first)
            fprintf(f,
                    "<text class=\"r\" x=\"%d\" y=\"%d\">dev %d stream %" PRIu64 "%s%s%s%s</text>",
                    MS_SVG_LEFT - 6, y + 13, k->device, k->stream, *tl->info[l].role ? " " : "",
                    tl->info[l].role, shared ? ": " : "",
                    shared ? ms_work_kind_name((ms_work_kind)k->kind) : "");
        else
            fprintf(f, "<text class=\"r\" x=\"%d\" y=\"%d\">stream %" PRIu64 ": %s</text>",
                    MS_SVG_LEFT - 6, y + 13, k->stream, ms_work_kind_name((ms_work_kind)k->kind));
        fprintf(f, "<text x=\"%d\" y=\"%d\">busy %.1f%%</text>\n", MS_SVG_LEFT + MS_SVG_PLOT_W + 6,
                y + 13, 100.0 * (double)tl->info[l].busy_ns / (double)tl->sp.t_max);
    }
}

static ms_status timeline_put(FILE *f, const void *ctx)
{
    const timeline *tl = ctx;
    size_t nl = tl->lanes.n;
    if (nl == 0) {
        put_header(f, MS_SVG_TOP + 40, "memsim: stream timelines");
        put_no_data(f);
        return MS_OK;
    }
    int bottom = lane_y(tl, nl - 1) + MS_SVG_LANE_H + 4;
    int height = bottom + 44;
    char title[160];
    snprintf(title, sizeof title, "memsim: stream timelines, step %d (the last in the record), "
                                  "device time",
             tl->sp.step);
    put_header(f, height, title);
    int x = MS_SVG_LEFT;
    for (int k = 0; k < N_WORK; k++) {
        char cls[16];
        snprintf(cls, sizeof cls, "wk%d", k);
        const char *name = ms_work_kind_name((ms_work_kind)k);
        put_swatch(f, x, cls, name);
        x += 16 + 6 * (int)strlen(name) + 18;
    }
    timeline_put_lanes(f, tl);
    put_time_axis(f, &tl->sp, MS_SVG_TOP, bottom);
    for (int cell = 0; cell < N_WORK * LEVELS; cell++)
        timeline_put_cell(f, tl, cell);
    fprintf(f,
            "<text class=\"m\" x=\"%d\" y=\"%d\">device time since the step start (ms); a "
            "pixel column is %.3f ms; a lane per stream and kind of work, paler where it "
            "is busy for at most 3/4, 1/2 or 1/4 of a column</text>\n</svg>\n",
            MS_SVG_LEFT + MS_SVG_PLOT_W / 2, height - 8,
            (double)tl->sp.t_max / 1e6 / MS_SVG_PLOT_W);
    return MS_OK;
}

/* ---- files ---------------------------------------------------------- */

/* Written whole to NAME.tmp and renamed: a failed run never leaves a file
 * that looks complete. */
static ms_status write_file(const char *dir, const char *name,
                            ms_status (*put)(FILE *, const void *), const void *ctx, ms_diag *d)
{
    char path[4096], tmp[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return ms_diag_set(d, MS_EINVAL, "%s/%s: path too long", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write: %s", tmp, strerror(errno));
    ms_status st = put(f, ctx);
    if (st != MS_OK) {
        fclose(f);
        remove(tmp);
        return ms_diag_set(d, st, "%s: %s", path, ms_strerror(st));
    }
    return rep_file_commit(f, tmp, path, d);
}

static ms_status write_memory(const char *dir, const ms_run_record *rec,
                              const ms_program_view *programs, size_t n_programs,
                              const rep_svg_options *opt, int step, ms_diag *d)
{
    rep_mem_series series;
    ms_status st = rep_mem_series_build(rec, opt->device_times, opt->memory_clock, step, &series);
    if (st != MS_OK)
        return ms_diag_set(d, st, "%s/memory.svg: %s", dir, ms_strerror(st));
    mem_plot mp = {.rows = series.rows,
                   .n_rows = series.n,
                   .clock = opt->memory_clock,
                   .programs = programs,
                   .n_programs = n_programs,
                   .capacity = opt->capacity,
                   .sp = memory_span(rec, step, &series, opt->memory_clock)};
    st = mem_plot_build(&mp);
    if (st != MS_OK)
        st = ms_diag_set(d, st, "%s/memory.svg: %s", dir, ms_strerror(st));
    else
        st = write_file(dir, "memory.svg", mem_put, &mp, d);
    mem_plot_free(&mp);
    rep_mem_series_free(&series);
    return st;
}

static ms_status write_timeline(const char *dir, const ms_run_record *rec,
                                const ms_program_view *programs, size_t n_programs, span sp,
                                ms_diag *d)
{
    timeline tl = {.rec = rec, .programs = programs, .n_programs = n_programs, .sp = sp};
    ms_status st = timeline_build(&tl);
    if (st != MS_OK)
        st = ms_diag_set(d, st, "%s/timeline.svg: %s", dir, ms_strerror(st));
    else
        st = write_file(dir, "timeline.svg", timeline_put, &tl, d);
    timeline_free(&tl);
    return st;
}

ms_status rep_write_svg_opts(const char *dir, const ms_run_record *record,
                             const ms_program_view *programs, size_t n_programs,
                             const rep_svg_options *opt, ms_diag *d)
{
    if (dir == NULL || record == NULL || programs == NULL || n_programs == 0)
        return ms_diag_set(d, MS_EINVAL, "svg report: %s is missing",
                           dir == NULL ? "the directory" : record == NULL ? "the run record"
                                                                          : "the programs");
    rep_svg_options o = opt != NULL ? *opt : (rep_svg_options){0};
    int64_t *own = NULL;
    if (o.memory_clock == MS_CLOCK_DEVICE && o.device_times == NULL) {
        if (rep_mem_device_times(record, programs, n_programs, &own) != MS_OK)
            return ms_diag_set(d, MS_ENOMEM, "%s/memory.svg: out of memory", dir);
        o.device_times = own;
    }
    int step = last_step(record);
    ms_status st = write_memory(dir, record, programs, n_programs, &o, step, d);
    if (st == MS_OK)
        st = write_timeline(dir, record, programs, n_programs, ops_span(record, step), d);
    free(own);
    return st;
}

ms_status rep_write_svg(const char *dir, const ms_run_record *record,
                        const ms_program_view *programs, size_t n_programs, ms_diag *d)
{
    return rep_write_svg_opts(dir, record, programs, n_programs, NULL, d);
}
