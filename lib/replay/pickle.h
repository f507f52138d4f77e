/* Private to the trace importer: opcode names for messages and the typed
 * dict reads snapshot.c builds its model from. */
#ifndef MEMSIM_CORE_PICKLE_H
#define MEMSIM_CORE_PICKLE_H

#include <stdbool.h>
#include <stdint.h>

#include "memsim/trace.h"

/* "BINUNICODE", ...; NULL for a byte that is no opcode of protocols 0-5. */
const char *rpl_pickle_opcode_name(uint8_t op);

/* dict[key] as an int/float/bool/str, with the key path in the message
 * ("segments[3].blocks[0].size: expected int, got str").  where is the path
 * of dict itself. */
ms_status rpl_pickle_get_int(const ms_pickle_value *dict, const char *where, const char *key,
                             int64_t *out, ms_diag *d);
ms_status rpl_pickle_get_float(const ms_pickle_value *dict, const char *where, const char *key,
                               double *out, ms_diag *d);
ms_status rpl_pickle_get_bool(const ms_pickle_value *dict, const char *where, const char *key,
                              bool *out, ms_diag *d);
ms_status rpl_pickle_get_str(const ms_pickle_value *dict, const char *where, const char *key,
                             const char **out, ms_diag *d);
/* dict[key] of the given container kind (MS_PK_LIST, MS_PK_DICT, ...). */
ms_status rpl_pickle_get_kind(const ms_pickle_value *dict, const char *where, const char *key,
                              ms_pickle_kind kind, const ms_pickle_value **out, ms_diag *d);

#endif
