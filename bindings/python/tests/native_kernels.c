/* Compiled kernels for the tests of submit_native (built by conftest.py). */
#include <sched.h>
#include <stdint.h>
#include "tensorasync.h"

/* Waits until *(int *)userdata becomes non-zero: holds its accesses meanwhile. */
ta_status gate_kernel(const ta_view *views, size_t n, void *userdata, ta_kernel_ctx *ctx) {
  (void)views; (void)n; (void)ctx;
  while (!__atomic_load_n((int *)userdata, __ATOMIC_ACQUIRE)) sched_yield();
  return TA_STATUS_OK;
}

static void add_rec(char *p, const ta_view *v, size_t axis, double x) {
  if (axis == v->rank) { *(double *)p += x; return; }
  for (size_t i = 0; i < v->extents[axis]; i++)
    add_rec(p + (ptrdiff_t)i * v->strides[axis] * (ptrdiff_t)sizeof(double), v, axis + 1, x);
}

/* views[0] (f64, UPDATE) += *(double *)userdata, any rank and strides. */
ta_status add_kernel(const ta_view *views, size_t n, void *userdata, ta_kernel_ctx *ctx) {
  (void)ctx;
  if (n != 1 || views[0].dtype != TA_DTYPE_F64) return 3;
  add_rec((char *)views[0].data, &views[0], 0, *(double *)userdata);
  return TA_STATUS_OK;
}

/* Fails with code 7 and a message. */
ta_status fail_kernel(const ta_view *views, size_t n, void *userdata, ta_kernel_ctx *ctx) {
  (void)views; (void)n; (void)userdata;
  ta_kernel_set_error(ctx, "seven is not a number I like");
  return 7;
}
