/* Test double of CANN's aclnn/acl_meta.h: tensor descriptors for aclnn. */
#ifndef MEMSIM_TEST_ACL_DOUBLE_ACL_META_H
#define MEMSIM_TEST_ACL_DOUBLE_ACL_META_H

#include <stdint.h>

#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t aclnnStatus;
typedef struct aclTensor aclTensor;
typedef struct aclOpExecutor aclOpExecutor;

#define OK 0

ACL_FUNC_VISIBILITY aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum,
                                               aclDataType dataType, const int64_t *stride,
                                               int64_t offset, aclFormat format,
                                               const int64_t *storageDims, uint64_t storageDimsNum,
                                               void *tensorData);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyTensor(const aclTensor *tensor);

#ifdef __cplusplus
}
#endif
#endif
