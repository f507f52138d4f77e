/* Run directories written whole or not at all (ms_report_dir_*; report.h).
 *
 * A run writes many files, and a half-written set beside an older summary
 * misleads: a compare whose second policy failed once left the first's
 * complete files next to the previous compare's summary.csv.  So a run
 * writes into a staging directory beside its final one and swaps it in once
 * everything is written: the final name holds either the old run's complete
 * set or the new one's, never a mix. */
#include "memsim/report.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "report_internal.h"

#define STAGE_TAG ".memsim-tmp-"
#define OLD_TAG ".memsim-old-"

struct ms_report_dir {
    char final[4096];
    char parent[4096];
    char stage[8300];
};

ms_status rep_make_dirs(const char *dir, ms_diag *d)
{
    char buf[4096];
    if (strlen(dir) >= sizeof buf)
        return ms_diag_set(d, MS_EINVAL, "%s: path too long", dir);
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return ms_diag_set(d, MS_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return ms_diag_set(d, MS_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
    return MS_OK;
}

static ms_status remove_tree_at(char *path, size_t cap)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? MS_OK : MS_EIO;
    if (!S_ISDIR(sb.st_mode))
        return unlink(path) == 0 ? MS_OK : MS_EIO;
    DIR *dir = opendir(path);
    if (dir == NULL)
        return MS_EIO;
    size_t len = strlen(path);
    ms_status st = MS_OK;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (len + 1 + strlen(e->d_name) + 1 > cap) {
            st = MS_EINVAL;
            continue;
        }
        path[len] = '/';
        strcpy(path + len + 1, e->d_name);
        if (remove_tree_at(path, cap) != MS_OK)
            st = MS_EIO;
        path[len] = '\0';
    }
    closedir(dir);
    if (rmdir(path) != 0)
        st = MS_EIO;
    return st;
}

ms_status ms_report_remove_tree(const char *path)
{
    if (path == NULL || path[0] == '\0')
        return MS_EINVAL;
    char buf[8192];
    if (strlen(path) >= sizeof buf)
        return MS_EINVAL;
    snprintf(buf, sizeof buf, "%s", path);
    return remove_tree_at(buf, sizeof buf);
}

/* Staging directories of runs that died (SIGKILL, a crash): their process
 * is gone, so nothing will finish them. */
static void remove_stale(const char *parent, const char *base)
{
    DIR *dir = opendir(parent);
    if (dir == NULL)
        return;
    char prefix[600];
    snprintf(prefix, sizeof prefix, ".%s" STAGE_TAG, base);
    size_t n = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strncmp(e->d_name, prefix, n) != 0)
            continue;
        char *end;
        long pid = strtol(e->d_name + n, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to judge): leave it */
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
        ms_report_remove_tree(path);
    }
    closedir(dir);
}

static ms_status split_path(ms_report_dir *rd, const char *final, ms_diag *d)
{
    size_t n = strlen(final);
    while (n > 1 && final[n - 1] == '/')
        n--; /* "out/" is "out" */
    if (n == 0 || n >= sizeof rd->final)
        return ms_diag_set(d, MS_EINVAL, "'%s': not a usable output directory", final);
    memcpy(rd->final, final, n);
    rd->final[n] = '\0';
    const char *slash = strrchr(rd->final, '/');
    const char *base = slash ? slash + 1 : rd->final;
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || base[0] == '\0')
        return ms_diag_set(d, MS_EINVAL, "'%s': name the output directory itself", final);
    if (slash == NULL)
        snprintf(rd->parent, sizeof rd->parent, ".");
    else if (slash == rd->final)
        snprintf(rd->parent, sizeof rd->parent, "/");
    else
        snprintf(rd->parent, sizeof rd->parent, "%.*s", (int)(slash - rd->final), rd->final);
    snprintf(rd->stage, sizeof rd->stage, "%s/.%s" STAGE_TAG "%ld", rd->parent, base,
             (long)getpid());
    return MS_OK;
}

ms_status ms_report_dir_open(const char *final_dir, ms_report_dir **out, ms_diag *d)
{
    if (final_dir == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_report_dir_open: NULL argument");
    *out = NULL;
    ms_report_dir *rd = calloc(1, sizeof *rd);
    if (rd == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of memory");
    ms_status st = split_path(rd, final_dir, d);
    if (st == MS_OK)
        st = rep_make_dirs(rd->parent, d);
    if (st == MS_OK) {
        const char *slash = strrchr(rd->final, '/');
        remove_stale(rd->parent, slash ? slash + 1 : rd->final);
        ms_report_remove_tree(rd->stage); /* an earlier run of this pid */
        if (mkdir(rd->stage, 0777) != 0)
            st = ms_diag_set(d, MS_EIO, "%s: cannot create directory: %s", rd->stage,
                             strerror(errno));
    }
    if (st != MS_OK) {
        free(rd);
        return st;
    }
    *out = rd;
    return MS_OK;
}

const char *ms_report_dir_path(const ms_report_dir *rd)
{
    return rd != NULL ? rd->stage : NULL;
}

/* Put the staging directory in the final one's place: the old one (if
 * any) is moved aside first and removed once the new one is in. */
ms_status ms_report_dir_commit(ms_report_dir *rd, ms_diag *d)
{
    if (rd == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_report_dir_commit: NULL argument");
    char old[8300];
    const char *slash = strrchr(rd->final, '/');
    snprintf(old, sizeof old, "%s/.%s" OLD_TAG "%ld", rd->parent, slash ? slash + 1 : rd->final,
             (long)getpid());
    ms_status st = MS_OK;
    struct stat sb;
    bool had_old = lstat(rd->final, &sb) == 0;
    if (had_old && !S_ISDIR(sb.st_mode))
        st = ms_diag_set(d, MS_EIO, "%s: exists and is not a directory", rd->final);
    else if (had_old && (ms_report_remove_tree(old), rename(rd->final, old) != 0))
        st = ms_diag_set(d, MS_EIO, "%s: cannot move the previous run aside: %s", rd->final,
                         strerror(errno));
    if (st == MS_OK && rename(rd->stage, rd->final) != 0) {
        st = ms_diag_set(d, MS_EIO, "%s: cannot put the run in place: %s", rd->final,
                         strerror(errno));
        if (had_old)
            rename(old, rd->final);
    }
    if (st == MS_OK && had_old)
        ms_report_remove_tree(old);
    if (st != MS_OK)
        ms_report_remove_tree(rd->stage);
    free(rd);
    return st;
}

ms_status ms_report_dir_abort(ms_report_dir *rd)
{
    if (rd == NULL)
        return MS_EINVAL;
    ms_report_remove_tree(rd->stage);
    free(rd);
    return MS_OK;
}
