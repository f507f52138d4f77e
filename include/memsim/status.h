/* memsim: status codes and diagnostics shared by every layer.
 *
 * Every public function returns an ms_status.  Where a caller needs to tell a
 * user *where* something went wrong (file:line, field name, event index), the
 * function also takes an ms_diag, which carries a human-readable message.  A
 * NULL ms_diag is always allowed: the code is still returned. */
#ifndef MEMSIM_STATUS_H
#define MEMSIM_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What libmemsim exports: the functions declared in include/memsim/.  The
 * library is built with -fvisibility=hidden, so everything else stays
 * inside it, as Lua keeps its internals to LUAI_FUNC. */
#if defined(__GNUC__)
#define MS_API __attribute__((visibility("default")))
#else
#define MS_API
#endif

typedef enum ms_status {
    MS_OK = 0,
    MS_EINVAL,       /* an argument or input value is invalid */
    MS_ENOMEM,       /* out of device (or host) memory; never an abort */
    MS_ENOENT,       /* a file, key or name does not exist */
    MS_EPARSE,       /* syntax or format error in an input file */
    MS_ERANGE,       /* a value is outside its allowed range */
    MS_EIO,          /* reading or writing a file failed */
    MS_ESCRIPT,      /* a Lua scenario or policy raised an error */
    MS_ELIMIT,       /* a script exceeded its instruction or memory budget */
    MS_EHAZARD,      /* the executor detected a data hazard */
    MS_EDEADLOCK,    /* waiting on device work that can never complete */
    MS_EAGAIN,       /* the call would block; retry later */
    MS_EUNSUPPORTED, /* the backend or build does not provide this */
    MS_EMISMATCH,    /* a replay diverged from its recorded trace */
    MS_EINTERNAL,    /* an invariant of memsim itself broke (a bug) */
    MS_ECANCELED,    /* the work was abandoned (another stage ran out of memory) */
    MS_STATUS_COUNT
} ms_status;

/* Short constant description of a status code ("out of memory"). */
MS_API const char *ms_strerror(ms_status s);

#define MS_DIAG_MAX 1024

typedef struct ms_diag {
    ms_status code;
    char msg[MS_DIAG_MAX];
} ms_diag;

/* Record code and a formatted message in d (if non-NULL); returns code so a
 * caller can write `return ms_diag_set(d, MS_EINVAL, "...")`. */
MS_API ms_status ms_diag_set(ms_diag *d, ms_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
MS_API ms_status ms_diag_vset(ms_diag *d, ms_status code, const char *fmt, va_list ap);
/* Prefix the existing message with context ("scenario.lua: " + msg). */
MS_API ms_status ms_diag_prefix(ms_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
MS_API ms_status ms_diag_clear(ms_diag *d);
/* Edit (Levenshtein) distance of two short words, for the "did you mean"
 * of a diagnostic; SIZE_MAX when either is longer than 127 characters (the
 * work stays bounded whatever a user types). */
MS_API size_t ms_diag_edit_distance(const char *a, const char *b);

/* Find a shipped data directory ("policies_lua", "scenarios/devices"):
 * $MEMSIM_DATADIR/sub, then the source tree, then the installed pkgdatadir. */
MS_API ms_status ms_data_path(const char *sub, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
