#include <stdio.h>
#include <stdlib.h>
#include "tensorasync.h"
static ta_status k(const ta_view *v, size_t n, void *u, ta_kernel_ctx *ctx) { (void)ctx; (void)v; (void)n; (void)u; return TA_STATUS_OK; }
int main(void) {
  ta_runtime *rt; if (ta_runtime_new(2, &rt, NULL)) return 2;
  ta_submit o = {0}; o.runtime = rt;
  ta_tensor *t; size_t e = 16;
  if (ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &e, TA_ORDER_ROW_MAJOR, &t, NULL)) return 3;
  ta_access a = { t, TA_MODE_UPDATE };
  for (int i = 0; i < 20000; i++) { if (ta_kernel_submit(k, NULL, NULL, &a, 1, &o, NULL, NULL) != TA_STATUS_OK) return 1; }
  ta_runtime_wait_idle(rt, -1, NULL);
  ta_tensor_free(t); ta_runtime_free(rt);
  return 0;
}
