/* A message of more than 2^31 elements (u8: 2 GiB + 13 bytes): rank 0 sends,
 * rank 1 receives and checks every byte. Needs about 4.5 GiB of memory on the
 * machine (one tensor per rank); scripts/test-mpi.sh runs it on 2 ranks. */
#include "common.h"

#define COUNT (((size_t)1 << 31) + 13)

static unsigned char pattern(size_t i) { return (unsigned char)(i * 7 + (i >> 20)); }

static ta_status fill(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  (void)n; (void)ud; (void)ctx;
  unsigned char *p = v[0].data;
  for (size_t i = 0; i < v[0].extents[0]; i++) p[i] = pattern(i);
  return TA_STATUS_OK;
}

static ta_status check(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  (void)n; (void)ctx;
  const unsigned char *p = v[0].data;
  size_t bad = 0;
  for (size_t i = 0; i < v[0].extents[0]; i++) bad += p[i] != pattern(i);
  *(size_t *)ud = bad;
  return TA_STATUS_OK;
}

int main(int argc, char **argv) {
  ta_mpi_comm *c = test_init(&argc, &argv);
  size_t n = COUNT;
  ta_tensor *x;
  if (g_rank < 2) {
    OK(ta_tensor_new_zeros(TA_DTYPE_U8, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
    ta_access acc = {x, g_rank == 0 ? TA_MODE_UPDATE : TA_MODE_READ};
    if (g_rank == 0) {
      OK(ta_kernel_submit(fill, NULL, "fill", &acc, 1, NULL, NULL, NULL));
      OK(ta_mpi_send(x, 1, 0, c, NULL, NULL, NULL));
    } else {
      size_t bad = 1;
      OK(ta_mpi_recv(x, 0, 0, 0, NULL, c, NULL, NULL, NULL));
      ta_event *ev;
      OK(ta_kernel_submit(check, &bad, "check", &acc, 1, NULL, &ev, NULL));
      OK(ta_event_wait(ev, TA_WAIT_FOREVER));
      ta_event_free(ev);
      CHECK(bad == 0);
      ta_mpi_stats s;
      OK(ta_mpi_comm_stats(c, &s));
      CHECK(s.bytes_received == COUNT);
    }
    char msg[256];
    CHECK(state_of(x, msg, sizeof msg) == TA_STATUS_OK);
    ta_tensor_free(x);
  }
  OK(ta_mpi_comm_free(c));
  test_done("test_bigcount");
  return 0;
}
