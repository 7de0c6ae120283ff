/* Collectives against results computed here sequentially from every rank's
 * (deterministic) input: allreduce and reduce (sum over every dtype, max and
 * min over the real ones), bcast, allgather; views, in place, ordering of
 * collectives whose inputs become ready out of order, and poisoned inputs. */
#include <complex.h>
#include <time.h>
#include "common.h"

static const ta_dtype DTYPES[] = {TA_DTYPE_F32, TA_DTYPE_F64, TA_DTYPE_C64, TA_DTYPE_C128,
                                  TA_DTYPE_I8,  TA_DTYPE_I16, TA_DTYPE_I32, TA_DTYPE_I64,
                                  TA_DTYPE_U8,  TA_DTYPE_U16, TA_DTYPE_U32, TA_DTYPE_U64};
enum { N = 9 };

static int is_cx(ta_dtype d) { return d == TA_DTYPE_C64 || d == TA_DTYPE_C128; }
static int is_unsigned(ta_dtype d) { return d >= TA_DTYPE_U8; }

/* Input element i of rank r: real part, imaginary part. */
static double val_re(ta_dtype d, int r, size_t i) {
  int v = (int)((r * 7 + i * 3) % 11);
  return is_unsigned(d) ? v : v - 5;
}
static double val_im(int r, size_t i) { return (double)r - (double)i; }

static size_t esize(ta_dtype d) {
  switch (d) {
  case TA_DTYPE_I8: case TA_DTYPE_U8: return 1;
  case TA_DTYPE_I16: case TA_DTYPE_U16: return 2;
  case TA_DTYPE_F32: case TA_DTYPE_I32: case TA_DTYPE_U32: return 4;
  case TA_DTYPE_C128: return 16;
  default: return 8;
  }
}

static void put(ta_dtype d, void *p, size_t i, double re, double im) {
  switch (d) {
  case TA_DTYPE_F32: ((float *)p)[i] = (float)re; break;
  case TA_DTYPE_F64: ((double *)p)[i] = re; break;
  case TA_DTYPE_C64: ((float *)p)[2 * i] = (float)re; ((float *)p)[2 * i + 1] = (float)im; break;
  case TA_DTYPE_C128: ((double *)p)[2 * i] = re; ((double *)p)[2 * i + 1] = im; break;
  case TA_DTYPE_I8: ((int8_t *)p)[i] = (int8_t)re; break;
  case TA_DTYPE_I16: ((int16_t *)p)[i] = (int16_t)re; break;
  case TA_DTYPE_I32: ((int32_t *)p)[i] = (int32_t)re; break;
  case TA_DTYPE_I64: ((int64_t *)p)[i] = (int64_t)re; break;
  case TA_DTYPE_U8: ((uint8_t *)p)[i] = (uint8_t)re; break;
  case TA_DTYPE_U16: ((uint16_t *)p)[i] = (uint16_t)re; break;
  case TA_DTYPE_U32: ((uint32_t *)p)[i] = (uint32_t)re; break;
  default: ((uint64_t *)p)[i] = (uint64_t)re; break;
  }
}

static ta_tensor *input(ta_dtype d, int r) {
  unsigned char buf[N * 16];
  for (size_t i = 0; i < N; i++) put(d, buf, i, val_re(d, r, i), val_im(r, i));
  size_t n = N;
  ta_tensor *t;
  OK(ta_tensor_new_copy(d, 1, &n, NULL, TA_ORDER_ROW_MAJOR, buf, &t, NULL));
  return t;
}

/* The expected bytes of the reduction of every rank's input. */
static void expected(ta_dtype d, ta_mpi_op op, unsigned char *out) {
  for (size_t i = 0; i < N; i++) {
    double re = val_re(d, 0, i), im = val_im(0, i);
    for (int r = 1; r < g_size; r++) {
      double x = val_re(d, r, i);
      if (op == TA_MPI_SUM) { re += x; im += val_im(r, i); }
      else if (op == TA_MPI_MAX) re = x > re ? x : re;
      else re = x < re ? x : re;
    }
    put(d, out, i, re, is_cx(d) ? im : 0);
  }
}

static void read_bytes(const ta_tensor *t, void *out, size_t n) {
  ta_event *ev;
  OK(ta_copy_out(t, out, n, NULL, NULL, &ev, NULL));
  OK(ta_event_wait(ev, TA_WAIT_FOREVER));
  ta_event_free(ev);
}

static void reductions(ta_mpi_comm *c) {
  for (size_t k = 0; k < sizeof DTYPES / sizeof *DTYPES; k++) {
    ta_dtype d = DTYPES[k];
    for (ta_mpi_op op = TA_MPI_SUM; op <= TA_MPI_MIN; op++) {
      if (is_cx(d) && op != TA_MPI_SUM) continue;
      unsigned char want[N * 16], got[N * 16];
      expected(d, op, want);
      ta_tensor *in = input(d, g_rank), *out;
      OK(ta_tensor_new(d, TA_DOMAIN_HOST, &out, NULL)); /* constructed with the input's shape */
      OK(ta_mpi_allreduce(out, in, op, c, NULL, NULL, NULL));
      read_bytes(out, got, N);
      CHECK(memcmp(got, want, N * esize(d)) == 0);
      /* reduce to the last rank, in place there */
      int root = g_size - 1;
      if (g_rank == root) {
        OK(ta_mpi_reduce(NULL, in, op, root, c, NULL, NULL, NULL));
        read_bytes(in, got, N);
        CHECK(memcmp(got, want, N * esize(d)) == 0);
        /* and out of place, into an unconstructed output */
        ta_tensor *in2 = input(d, g_rank), *o2;
        OK(ta_tensor_new(d, TA_DOMAIN_HOST, &o2, NULL));
        OK(ta_mpi_reduce(o2, in2, op, root, c, NULL, NULL, NULL));
        memset(got, 0, sizeof got);
        read_bytes(o2, got, N);
        CHECK(memcmp(got, want, N * esize(d)) == 0);
        ta_tensor_free(in2);
        ta_tensor_free(o2);
      } else {
        OK(ta_mpi_reduce(NULL, in, op, root, c, NULL, NULL, NULL));
        ta_tensor *in2 = input(d, g_rank);
        OK(ta_mpi_reduce(NULL, in2, op, root, c, NULL, NULL, NULL));
        ta_tensor_free(in2);
        read_bytes(in, got, N); /* a read access: unchanged */
        unsigned char mine[N * 16];
        for (size_t i = 0; i < N; i++) put(d, mine, i, val_re(d, g_rank, i), val_im(g_rank, i));
        CHECK(memcmp(got, mine, N * esize(d)) == 0);
      }
      ta_tensor_free(in);
      ta_tensor_free(out);
    }
  }
  /* max over complex is refused at submission */
  ta_tensor *z = input(TA_DTYPE_C128, g_rank);
  CHECK(ta_mpi_allreduce(NULL, z, TA_MPI_MAX, c, NULL, NULL, NULL) == TA_STATUS_DTYPE_MISMATCH);
  CHECK(strstr(ta_mpi_last_message(), "max and min need a real dtype, not complex128") != NULL);
  ta_tensor_free(z);
}

/* Views: a transposed input, a strided output, and an in-place allreduce. */
static void views(ta_mpi_comm *c) {
  size_t e[2] = {3, 4};
  double a[12], want_t[12];
  for (int i = 0; i < 12; i++) a[i] = g_rank * 100 + i;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) {
      double s = 0;
      for (int r = 0; r < g_size; r++) s += r * 100 + (j * 4 + i);
      want_t[i * 3 + j] = s;
    }
  ta_tensor *A = new_f64(2, e, a), *T, *O, *V;
  OK(ta_tensor_transpose(A, &T, NULL));
  size_t eo[2] = {4, 6};
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, eo, TA_ORDER_ROW_MAJOR, &O, NULL));
  ta_slice sl[2] = {{0, 4, 1, 0}, {0, 6, 2, 0}};
  OK(ta_tensor_slice(O, sl, 2, &V, NULL)); /* 4 x 3, column stride 2 */
  OK(ta_mpi_allreduce(V, T, TA_MPI_SUM, c, NULL, NULL, NULL));
  double o[24];
  read_f64(O, o, 24);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) CHECK(o[i * 6 + j] == (j % 2 == 0 ? want_t[i * 3 + j / 2] : 0));
  /* in place on the strided view */
  OK(ta_mpi_allreduce(NULL, V, TA_MPI_SUM, c, NULL, NULL, NULL));
  read_f64(O, o, 24);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) CHECK(o[i * 6 + j] == (j % 2 == 0 ? g_size * want_t[i * 3 + j / 2] : 0));
  ta_tensor_free(V); ta_tensor_free(O); ta_tensor_free(T); ta_tensor_free(A);
}

static void bcast_gather(ta_mpi_comm *c) {
  int root = 1 % g_size;
  size_t n = 6, n2 = 12;
  int32_t src[6] = {5, -4, 3, -2, 1, 0};
  ta_tensor *t, *big, *view;
  if (g_rank == root) {
    OK(ta_tensor_new_copy(TA_DTYPE_I32, 1, &n, NULL, TA_ORDER_ROW_MAJOR, src, &t, NULL));
    OK(ta_mpi_bcast(t, root, c, NULL, NULL, NULL));
    ta_tensor_free(t);
  } else {
    OK(ta_tensor_new_zeros(TA_DTYPE_I32, TA_DOMAIN_HOST, 1, &n2, TA_ORDER_ROW_MAJOR, &big, NULL));
    ta_slice sl = {1, 12, 2, 0};
    OK(ta_tensor_slice(big, &sl, 1, &view, NULL));
    OK(ta_mpi_bcast(view, root, c, NULL, NULL, NULL));
    int32_t got[12];
    ta_event *ev;
    OK(ta_copy_out(big, got, 12, NULL, NULL, &ev, NULL));
    OK(ta_event_wait(ev, TA_WAIT_FOREVER));
    ta_event_free(ev);
    for (int i = 0; i < 12; i++) CHECK(got[i] == (i % 2 ? src[i / 2] : 0));
    ta_tensor_free(view);
    ta_tensor_free(big);
  }
  /* allgather of 5 f32 per rank into an unconstructed output {size, 5} */
  size_t five = 5;
  float mine[5];
  for (int i = 0; i < 5; i++) mine[i] = (float)(g_rank * 10 + i);
  ta_tensor *in, *out;
  OK(ta_tensor_new_copy(TA_DTYPE_F32, 1, &five, NULL, TA_ORDER_ROW_MAJOR, mine, &in, NULL));
  OK(ta_tensor_new(TA_DTYPE_F32, TA_DOMAIN_HOST, &out, NULL));
  OK(ta_mpi_allgather(out, in, c, NULL, NULL, NULL));
  size_t ext[2], r;
  OK(ta_tensor_rank(out, &r));
  OK(ta_tensor_extents(out, ext, 2));
  CHECK(r == 2 && ext[0] == (size_t)g_size && ext[1] == 5);
  float all[64];
  ta_event *ev;
  OK(ta_copy_out(out, all, (size_t)g_size * 5, NULL, NULL, &ev, NULL));
  OK(ta_event_wait(ev, TA_WAIT_FOREVER));
  ta_event_free(ev);
  for (int q = 0; q < g_size; q++)
    for (int i = 0; i < 5; i++) CHECK(all[q * 5 + i] == (float)(q * 10 + i));
  ta_tensor_free(in); ta_tensor_free(out);
}

static ta_status slow_fill(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  (void)n; (void)ctx;
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  double *x = v[0].data;
  for (size_t i = 0; i < v[0].extents[0]; i++) x[i * v[0].strides[0]] = *(const double *)ud;
  return TA_STATUS_OK;
}

/* Rank 0's first collective waits for a slow kernel, its second is ready at
 * once: both must still be posted in submission order. */
static void ordering(ta_mpi_comm *c) {
  size_t n = 4;
  ta_tensor *x, *y;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &y, NULL));
  static double one = 1;
  if (g_rank == 0) {
    ta_access acc = {x, TA_MODE_WRITE};
    OK(ta_kernel_submit(slow_fill, &one, "slow", &acc, 1, NULL, NULL, NULL));
  } else {
    OK(ta_fill(x, (ta_scalar){1, 0}, NULL, NULL, NULL));
  }
  OK(ta_fill(y, (ta_scalar){1000, 0}, NULL, NULL, NULL));
  OK(ta_mpi_allreduce(NULL, x, TA_MPI_SUM, c, NULL, NULL, NULL));
  OK(ta_mpi_allreduce(NULL, y, TA_MPI_MAX, c, NULL, NULL, NULL));
  double gx[4], gy[4];
  read_f64(x, gx, 4);
  read_f64(y, gy, 4);
  for (int i = 0; i < 4; i++) CHECK(gx[i] == g_size && gy[i] == 1000);
  ta_tensor_free(x); ta_tensor_free(y);
}

static ta_status fail_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  (void)v; (void)n; (void)ud;
  ta_kernel_set_error(ctx, "sensor overheated");
  return TA_STATUS_KERNEL_FAILED;
}

static ta_status fail_kernel_77(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  (void)v; (void)n; (void)ud;
  ta_kernel_set_error(ctx, "valve stuck");
  return 77;
}

/* The status, code, origin and message of the error `t` is poisoned with. */
static ta_status error_of(const ta_tensor *t, int64_t *code, char *origin, size_t ocap, char *msg, size_t mcap) {
  ta_error *e = NULL;
  ta_status st = ta_tensor_wait(t, TA_WAIT_FOREVER, &e);
  ta_status est = TA_STATUS_OK;
  *code = 0; origin[0] = 0; msg[0] = 0;
  if (e) {
    OK(ta_error_status(e, &est));
    OK(ta_error_code(e, code));
    OK(ta_error_origin(e, origin, ocap, NULL));
    OK(ta_error_message(e, msg, mcap, NULL));
    ta_error_free(e);
    CHECK(est == st);
  }
  return st;
}

/* A poisoned input on rank 1 poisons every rank's output. */
static void poisoned(ta_mpi_comm *c) {
  if (g_size < 2) return;
  size_t n = 3;
  ta_tensor *x, *y;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &y, NULL));
  if (g_rank == 1) {
    ta_access acc = {x, TA_MODE_UPDATE};
    OK(ta_kernel_submit(fail_kernel, NULL, "sensor", &acc, 1, NULL, NULL, NULL));
  }
  OK(ta_mpi_allreduce(y, x, TA_MPI_SUM, c, NULL, NULL, NULL));
  /* every rank's output has rank 1's error as it was: status, message,
   * code and origin */
  char msg[1024], origin[64];
  int64_t code;
  CHECK(error_of(y, &code, origin, sizeof origin, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
  CHECK(strcmp(msg, "sensor overheated") == 0);
  CHECK(code == TA_STATUS_KERNEL_FAILED);
  CHECK(strcmp(origin, "sensor") == 0);
  /* the communicator still works afterwards */
  OK(ta_fill(x, (ta_scalar){2, 0}, NULL, NULL, NULL));
  OK(ta_mpi_allreduce(y, x, TA_MPI_SUM, c, NULL, NULL, NULL));
  double got[3];
  read_f64(y, got, 3);
  for (int i = 0; i < 3; i++) CHECK(got[i] == 2 * g_size);
  /* a poisoned root's bcast: the others get its error (a kernel's own code) */
  if (g_rank == 1) {
    ta_access acc = {x, TA_MODE_UPDATE};
    OK(ta_kernel_submit(fail_kernel_77, NULL, "valve", &acc, 1, NULL, NULL, NULL));
  }
  OK(ta_mpi_bcast(x, 1, c, NULL, NULL, NULL));
  CHECK(error_of(x, &code, origin, sizeof origin, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
  CHECK(strcmp(msg, "valve stuck") == 0);
  CHECK(code == 77);
  CHECK(strcmp(origin, "valve") == 0);
  /* a reduce to rank 0 where every rank's input is now poisoned: rank 0 has
   * its own error, the lowest poisoned rank's */
  ta_tensor *r;
  OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &r, NULL));
  OK(ta_mpi_reduce(g_rank == 0 ? r : NULL, x, TA_MPI_SUM, 0, c, NULL, NULL, NULL));
  if (g_rank == 0) {
    CHECK(error_of(r, &code, origin, sizeof origin, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
    CHECK(strcmp(msg, "valve stuck") == 0 && code == 77);
  }
  /* and then data again */
  OK(ta_fill(x, (ta_scalar){g_rank, 0}, NULL, NULL, NULL));
  OK(ta_mpi_bcast(x, 1, c, NULL, NULL, NULL));
  read_f64(x, got, 3);
  for (int i = 0; i < 3; i++) CHECK(got[i] == 1);
  ta_tensor_free(x); ta_tensor_free(y); ta_tensor_free(r);
}

/* Collectives whose ranks pass different counts or dtypes (a program's
 * error that MPI reports fatally or not at all): every rank's outputs are
 * poisoned, saying so, and the communicator goes on working. */
static void rank_mismatch(ta_mpi_comm *c) {
  if (g_size < 2) return;
  size_t n = g_rank == 1 ? 6 : 4;
  char msg[1024];
  ta_tensor *x, *y, *g, *r;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
  OK(ta_fill(x, (ta_scalar){1, 0}, NULL, NULL, NULL));
  OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &y, NULL));
  OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &g, NULL));
  OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &r, NULL));
  static const char *const want[4] = {"ta_mpi_bcast: ", "ta_mpi_allreduce: ", "ta_mpi_allgather: ", "ta_mpi_reduce: "};
  for (int k = 0; k < 4; k++) {
    ta_event *ev;
    const ta_tensor *out = k == 0 ? x : k == 1 ? y : k == 2 ? g : r;
    if (k == 0) OK(ta_mpi_bcast(x, 0, c, NULL, &ev, NULL));
    else if (k == 1) OK(ta_mpi_allreduce(y, x, TA_MPI_SUM, c, NULL, &ev, NULL));
    else if (k == 2) OK(ta_mpi_allgather(g, x, c, NULL, &ev, NULL));
    else OK(ta_mpi_reduce(g_rank == 0 ? r : NULL, x, TA_MPI_SUM, 0, c, NULL, &ev, NULL));
    CHECK(ta_event_wait(ev, TA_WAIT_FOREVER) == TA_STATUS_KERNEL_FAILED);
    ta_event_free(ev);
    /* the outputs: not the bcast root's tensor (read), not a non-root's reduce (none) */
    if ((k == 0 && g_rank != 0) || k == 1 || k == 2 || (k == 3 && g_rank == 0)) {
      CHECK(state_of(out, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
      CHECK(strstr(msg, want[k]) == msg);
      CHECK(strstr(msg, "the ranks' tensors differ in size: from 4 to 6 elements") != NULL);
    }
    if (k == 0) OK(ta_fill(x, (ta_scalar){1, 0}, NULL, NULL, NULL)); /* clean again */
  }
  /* dtypes */
  size_t four = 4;
  ta_tensor *d;
  OK(ta_tensor_new_zeros(g_rank == 1 ? TA_DTYPE_I64 : TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &four,
                         TA_ORDER_ROW_MAJOR, &d, NULL));
  OK(ta_mpi_allreduce(NULL, d, TA_MPI_SUM, c, NULL, NULL, NULL));
  CHECK(state_of(d, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
  CHECK(strstr(msg, "ta_mpi_allreduce: the ranks' tensors differ in dtype: f64 and i64") == msg);
  /* different roots */
  ta_tensor *b;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &four, TA_ORDER_ROW_MAJOR, &b, NULL));
  ta_event *ev;
  OK(ta_mpi_bcast(b, g_rank == 0 ? 0 : 1, c, NULL, &ev, NULL));
  CHECK(ta_event_wait(ev, TA_WAIT_FOREVER) == TA_STATUS_KERNEL_FAILED);
  ta_event_free(ev);
  CHECK(state_of(b, msg, sizeof msg) == (g_rank <= 1 ? TA_STATUS_OK : TA_STATUS_KERNEL_FAILED)); /* roots read */
  if (g_rank > 1) CHECK(strstr(msg, "the ranks called different collectives") != NULL);
  /* the communicator still works */
  OK(ta_fill(b, (ta_scalar){g_rank + 1, 0}, NULL, NULL, NULL));
  OK(ta_mpi_allreduce(NULL, b, TA_MPI_SUM, c, NULL, NULL, NULL));
  double got[4];
  read_f64(b, got, 4);
  for (int i = 0; i < 4; i++) CHECK(got[i] == g_size * (g_size + 1) / 2.0);
  ta_tensor_free(x); ta_tensor_free(y); ta_tensor_free(g); ta_tensor_free(r); ta_tensor_free(d); ta_tensor_free(b);
}

/* A call refused at submission enrolls nothing: its unconstructed output
 * stays unconstructed. */
static void refused(ta_mpi_comm *c) {
  size_t n = 3, rk;
  ta_tensor *in, *out;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &in, NULL));
  OK(ta_tensor_new(TA_DTYPE_F32, TA_DOMAIN_HOST, &out, NULL));
  CHECK(ta_mpi_allreduce(out, in, TA_MPI_SUM, c, NULL, NULL, NULL) == TA_STATUS_DTYPE_MISMATCH);
  CHECK(strcmp(ta_mpi_last_message(), "ta_mpi_allreduce: output is f32, input f64") == 0);
  CHECK(ta_tensor_rank(out, &rk) == TA_STATUS_UNCONSTRUCTED);
  CHECK(ta_mpi_allgather(out, in, c, NULL, NULL, NULL) == TA_STATUS_DTYPE_MISMATCH);
  CHECK(strcmp(ta_mpi_last_message(), "ta_mpi_allgather: output is f32, input f64") == 0);
  CHECK(ta_tensor_rank(out, &rk) == TA_STATUS_UNCONSTRUCTED);
  CHECK(ta_mpi_reduce(out, in, TA_MPI_SUM, g_rank, c, NULL, NULL, NULL) == TA_STATUS_DTYPE_MISMATCH);
  CHECK(strcmp(ta_mpi_last_message(), "ta_mpi_reduce: output is f32, input f64") == 0);
  CHECK(ta_tensor_rank(out, &rk) == TA_STATUS_UNCONSTRUCTED);
  ta_tensor_free(in); ta_tensor_free(out);
}

int main(int argc, char **argv) {
  ta_mpi_comm *c = test_init(&argc, &argv);
  reductions(c);
  views(c);
  bcast_gather(c);
  ordering(c);
  poisoned(c);
  rank_mismatch(c);
  refused(c);
  OK(ta_mpi_comm_free(c));
  test_done("test_coll");
  return 0;
}
