/* Where a test finds the source tree (data, scenarios) and the build tree
 * (the memsim binary): `make check` exports MEMSIM_SRCDIR and
 * MEMSIM_BUILDDIR (Makefile.am); run by hand from the top, ".". */
#ifndef MEMSIM_TEST_PATHS_H
#define MEMSIM_TEST_PATHS_H

#include <stdlib.h>

static inline const char *srcdir(void)
{
    const char *s = getenv("MEMSIM_SRCDIR");
    return s ? s : ".";
}

static inline const char *builddir(void)
{
    const char *s = getenv("MEMSIM_BUILDDIR");
    return s ? s : ".";
}

#endif
