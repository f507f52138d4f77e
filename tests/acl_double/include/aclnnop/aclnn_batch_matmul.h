/* Test double of CANN's aclnnop/aclnn_batch_matmul.h: out = self @ mat2 on
 * 3-D tensors [batch, m, k] x [batch, k, n], in aclnn's two phases. */
#ifndef MEMSIM_TEST_ACL_DOUBLE_ACLNN_BATCH_MATMUL_H
#define MEMSIM_TEST_ACL_DOUBLE_ACLNN_BATCH_MATMUL_H

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnBatchMatMulGetWorkspaceSize(
    const aclTensor *self, const aclTensor *mat2, aclTensor *out, int8_t cubeMathType,
    uint64_t *workspaceSize, aclOpExecutor **executor);
ACL_FUNC_VISIBILITY aclnnStatus aclnnBatchMatMul(void *workspace, uint64_t workspaceSize,
                                                 aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
