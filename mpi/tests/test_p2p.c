/* Point-to-point operations: ordering on the epoch queues, views, shapes,
 * every dtype, and the errors (size and dtype mismatch, a poisoned sender,
 * invalid arguments). Ranks work in pairs (0-1, 2-3, ...) plus a ring. */
#include <time.h>
#include "common.h"

static void ring(ta_mpi_comm *c);

static ta_status write_seq(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  (void)n; (void)ctx;
  double base = *(const double *)ud;
  struct timespec ts = {0, 30 * 1000 * 1000}; /* the data is not ready when the send is submitted */
  nanosleep(&ts, NULL);
  double *x = v[0].data;
  for (size_t i = 0; i < v[0].extents[0]; i++) x[i * v[0].strides[0]] = base + (double)i;
  return TA_STATUS_OK;
}

static ta_status fail_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  (void)v; (void)n; (void)ud;
  ta_kernel_set_error(ctx, "sensor overheated");
  return TA_STATUS_KERNEL_FAILED;
}

/* A kernel failing with its own code. */
static ta_status fail_kernel_1234(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  (void)v; (void)n; (void)ud;
  ta_kernel_set_error(ctx, "valve stuck");
  return 1234;
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

static void ordering(ta_mpi_comm *c, int peer, int sender) {
  enum { N = 1000 };
  size_t n = N;
  double got[N];
  if (sender) {
    ta_tensor *x;
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
    static const double b1 = 10, b2 = 20;
    ta_access acc = {x, TA_MODE_UPDATE};
    OK(ta_kernel_submit(write_seq, (void *)&b1, "write10", &acc, 1, NULL, NULL, NULL)); /* write before */
    OK(ta_mpi_send(x, peer, 1, c, NULL, NULL, NULL));
    OK(ta_fill(x, (ta_scalar){-1, 0}, NULL, NULL, NULL));                               /* writes after */
    OK(ta_kernel_submit(write_seq, (void *)&b2, "write20", &acc, 1, NULL, NULL, NULL));
    OK(ta_mpi_send(x, peer, 1, c, NULL, NULL, NULL));
    read_f64(x, got, N);
    for (size_t i = 0; i < N; i++) CHECK(got[i] == 20 + (double)i);
    ta_tensor_free(x); /* the sends keep it alive */
  } else {
    ta_tensor *a, *b;
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &a, NULL));
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &b, NULL));
    ta_event *ev = NULL;
    OK(ta_mpi_recv(a, peer, 1, 0, NULL, c, NULL, &ev, NULL));
    OK(ta_scale(a, (ta_scalar){2, 0}, NULL, NULL, NULL)); /* ordered after the receive */
    OK(ta_mpi_recv(b, peer, 1, 0, NULL, c, NULL, NULL, NULL));
    read_f64(a, got, N);
    for (size_t i = 0; i < N; i++) CHECK(got[i] == 2 * (10 + (double)i));
    read_f64(b, got, N);
    for (size_t i = 0; i < N; i++) CHECK(got[i] == 20 + (double)i);
    CHECK(ta_event_wait(ev, TA_WAIT_FOREVER) == TA_STATUS_OK);
    ta_event_free(ev);
    ta_tensor_free(a);
    ta_tensor_free(b);
  }
}

/* Non-contiguous views on both sides. */
static void views(ta_mpi_comm *c, int peer, int sender) {
  double m[6][8];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 8; j++) m[i][j] = 100 * i + j;
  if (sender) {
    size_t e[2] = {6, 8};
    ta_tensor *M = new_f64(2, e, &m[0][0]), *T, *S;
    OK(ta_tensor_transpose(M, &T, NULL));
    ta_slice sl[2] = {{1, 5, 2, 0}, {0, 8, 3, 0}}; /* rows 1,3; columns 0,3,6 */
    OK(ta_tensor_slice(M, sl, 2, &S, NULL));
    OK(ta_mpi_send(T, peer, 2, c, NULL, NULL, NULL));
    OK(ta_mpi_send(S, peer, 3, c, NULL, NULL, NULL));
    ta_tensor_free(T); ta_tensor_free(S); ta_tensor_free(M);
  } else {
    size_t et[2] = {8, 6}, eb[2] = {4, 4};
    ta_tensor *T, *B, *V;
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, et, TA_ORDER_ROW_MAJOR, &T, NULL));
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 2, eb, TA_ORDER_ROW_MAJOR, &B, NULL));
    ta_slice sl[2] = {{0, 4, 2, 0}, {1, 4, 1, 0}}; /* rows 0,2; columns 1..3 */
    OK(ta_tensor_slice(B, sl, 2, &V, NULL));
    /* receive in the other order than sent: different tags match independently */
    OK(ta_mpi_recv(V, peer, 3, 0, NULL, c, NULL, NULL, NULL));
    OK(ta_mpi_recv(T, peer, 2, 0, NULL, c, NULL, NULL, NULL));
    double t[8][6], b[4][4];
    read_f64(T, &t[0][0], 48);
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 6; j++) CHECK(t[i][j] == m[j][i]);
    read_f64(B, &b[0][0], 16);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) {
        double want = 0;
        if (i % 2 == 0 && j >= 1) want = m[1 + 2 * (i / 2)][3 * (j - 1)];
        CHECK(b[i][j] == want);
      }
    ta_tensor_free(V); ta_tensor_free(B); ta_tensor_free(T);
  }
}

/* A conjugate view is sent conjugated (packed, since MPI has no conjugation). */
static void conj_view(ta_mpi_comm *c, int peer, int sender) {
  double z[8] = {1, 2, -3, 4, 5, -6, 0.5, 0.25}; /* 4 complex128 */
  size_t n = 4;
  if (sender) {
    ta_tensor *x, *cx;
    OK(ta_tensor_new_copy(TA_DTYPE_C128, 1, &n, NULL, TA_ORDER_ROW_MAJOR, z, &x, NULL));
    OK(ta_tensor_conj(x, &cx, NULL));
    OK(ta_mpi_send(cx, peer, 8, c, NULL, NULL, NULL));
    ta_tensor_free(cx);
    ta_tensor_free(x);
  } else {
    ta_tensor *y;
    OK(ta_tensor_new_zeros(TA_DTYPE_C128, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &y, NULL));
    OK(ta_mpi_recv(y, peer, 8, 0, NULL, c, NULL, NULL, NULL));
    double got[8];
    ta_event *ev;
    OK(ta_copy_out(y, got, 4, NULL, NULL, &ev, NULL));
    OK(ta_event_wait(ev, TA_WAIT_FOREVER));
    ta_event_free(ev);
    for (int i = 0; i < 4; i++) CHECK(got[2 * i] == z[2 * i] && got[2 * i + 1] == -z[2 * i + 1]);
    ta_tensor_free(y);
  }
}

/* An unconstructed receiver gets its shape at submission. */
static void unconstructed(ta_mpi_comm *c, int peer, int sender) {
  size_t e[2] = {3, 5};
  double d[15];
  for (int i = 0; i < 15; i++) d[i] = i * 0.5;
  if (sender) {
    ta_tensor *x = new_f64(2, e, d);
    OK(ta_mpi_send(x, peer, 4, c, NULL, NULL, NULL));
    ta_tensor_free(x);
  } else {
    ta_tensor *u;
    OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &u, NULL));
    OK(ta_mpi_recv(u, peer, 4, 2, e, c, NULL, NULL, NULL));
    size_t got_e[2] = {0, 0}, r = 0;
    OK(ta_tensor_rank(u, &r)); /* known now, before the message arrived */
    OK(ta_tensor_extents(u, got_e, 2));
    CHECK(r == 2 && got_e[0] == 3 && got_e[1] == 5);
    OK(ta_scale(u, (ta_scalar){3, 0}, NULL, NULL, NULL));
    double got[15];
    read_f64(u, got, 15);
    for (int i = 0; i < 15; i++) CHECK(got[i] == 3 * d[i]);
    ta_tensor_free(u);
  }
}

static const ta_dtype DTYPES[] = {TA_DTYPE_F32, TA_DTYPE_F64, TA_DTYPE_C64, TA_DTYPE_C128,
                                  TA_DTYPE_I8,  TA_DTYPE_I16, TA_DTYPE_I32, TA_DTYPE_I64,
                                  TA_DTYPE_U8,  TA_DTYPE_U16, TA_DTYPE_U32, TA_DTYPE_U64};
static const size_t DSIZE[] = {4, 8, 8, 16, 1, 2, 4, 8, 1, 2, 4, 8};

static void read_bytes(const ta_tensor *t, void *out, size_t n) {
  ta_event *ev;
  OK(ta_copy_out(t, out, n, NULL, NULL, &ev, NULL));
  OK(ta_event_wait(ev, TA_WAIT_FOREVER));
  ta_event_free(ev);
}

static void all_dtypes(ta_mpi_comm *c, int peer, int sender) {
  enum { N = 7 };
  for (size_t k = 0; k < sizeof DTYPES / sizeof *DTYPES; k++) {
    unsigned char bytes[N * 16], got[N * 16];
    for (size_t i = 0; i < N * DSIZE[k]; i++) bytes[i] = (unsigned char)(17 * i + k + 1);
    /* keep float patterns finite: clear the top exponent bit of each word */
    if (k < 4)
      for (size_t i = 0; i < N * DSIZE[k]; i += (k == 0 || k == 2) ? 4 : 8)
        bytes[i + ((k == 0 || k == 2) ? 3 : 7)] &= 0x3f;
    size_t n = N;
    if (sender) {
      ta_tensor *x;
      OK(ta_tensor_new_copy(DTYPES[k], 1, &n, NULL, TA_ORDER_ROW_MAJOR, bytes, &x, NULL));
      OK(ta_mpi_send(x, peer, 10 + (int)k, c, NULL, NULL, NULL));
      ta_tensor_free(x);
    } else {
      ta_tensor *y;
      OK(ta_tensor_new_zeros(DTYPES[k], TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &y, NULL));
      OK(ta_mpi_recv(y, peer, 10 + (int)k, 0, NULL, c, NULL, NULL, NULL));
      ta_event *ev;
      OK(ta_copy_out(y, got, N, NULL, NULL, &ev, NULL));
      OK(ta_event_wait(ev, TA_WAIT_FOREVER));
      ta_event_free(ev);
      CHECK(memcmp(got, bytes, N * DSIZE[k]) == 0);
      ta_tensor_free(y);
    }
  }
}

/* Views with negative strides, every dtype, against the element order
 * computed here: sent from one (into a dense tensor), received into one
 * (from a dense tensor), and both. Open MPI 4.1 receives 1-byte elements
 * through negative-stride datatypes wrongly: the library packs such views. */
static void negative_strides(ta_mpi_comm *c, int peer, int sender) {
  size_t e34[2] = {3, 4}, e23[2] = {2, 3}, six = 6;
  for (size_t k = 0; k < sizeof DTYPES / sizeof *DTYPES; k++) {
    ta_dtype d = DTYPES[k];
    size_t s = DSIZE[k];
    unsigned char buf[12 * 16], seq[6 * 16], got[12 * 16];
    for (size_t i = 0; i < 12 * s; i++) buf[i] = (unsigned char)((i * 7 + k + 1) & 0x3f); /* finite floats */
    /* the elements of rows 2, 1, 0 and columns 3, 1 of the 3 x 4 tensor, in that order */
    size_t q = 0;
    for (int i = 2; i >= 0; i--)
      for (int j = 3; j >= 0; j -= 2) memcpy(seq + (q++) * s, buf + ((size_t)i * 4 + (size_t)j) * s, s);
    int tag = 40 + 3 * (int)k;
    if (sender) {
      ta_tensor *T, *R, *D;
      OK(ta_tensor_new_copy(d, 2, e34, NULL, TA_ORDER_ROW_MAJOR, buf, &T, NULL));
      ta_slice sl[2] = {{2, -1, -1, 0}, {3, -1, -2, 0}};
      OK(ta_tensor_slice(T, sl, 2, &R, NULL)); /* 3 x 2, strides (-4, -2) */
      OK(ta_tensor_new_copy(d, 1, &six, NULL, TA_ORDER_ROW_MAJOR, seq, &D, NULL));
      OK(ta_mpi_send(R, peer, tag, c, NULL, NULL, NULL));     /* into a dense tensor */
      OK(ta_mpi_send(D, peer, tag + 1, c, NULL, NULL, NULL)); /* into a negative-stride view */
      OK(ta_mpi_send(R, peer, tag + 2, c, NULL, NULL, NULL)); /* both */
      ta_tensor_free(T); ta_tensor_free(R); ta_tensor_free(D);
    } else {
      ta_tensor *A, *Z[2], *Zv[2], *Zvt[2];
      OK(ta_tensor_new(d, TA_DOMAIN_HOST, &A, NULL));
      OK(ta_mpi_recv(A, peer, tag, 1, &six, c, NULL, NULL, NULL));
      for (int b = 0; b < 2; b++) {
        /* 2 x 3 column-major, reversed on both axes, transposed: 3 x 2, strides (-2, -1) */
        OK(ta_tensor_new_zeros(d, TA_DOMAIN_HOST, 2, e23, TA_ORDER_COL_MAJOR, &Z[b], NULL));
        ta_slice zs[2] = {{1, -1, -1, 0}, {2, -1, -1, 0}};
        OK(ta_tensor_slice(Z[b], zs, 2, &Zv[b], NULL));
        OK(ta_tensor_transpose(Zv[b], &Zvt[b], NULL));
        OK(ta_mpi_recv(Zvt[b], peer, tag + 1 + b, 0, NULL, c, NULL, NULL, NULL));
      }
      memset(got, 0, sizeof got);
      read_bytes(A, got, 6);
      CHECK(memcmp(got, seq, 6 * s) == 0);
      for (int b = 0; b < 2; b++) {
        memset(got, 0, sizeof got);
        read_bytes(Zvt[b], got, 6);
        CHECK(memcmp(got, seq, 6 * s) == 0);
        /* and where they landed: Z[i][j] = Zvt[2 - j][1 - i] */
        memset(got, 0, sizeof got);
        read_bytes(Z[b], got, 6);
        for (int i = 0; i < 2; i++)
          for (int j = 0; j < 3; j++)
            CHECK(memcmp(got + (size_t)(i * 3 + j) * s, seq + (size_t)((2 - j) * 2 + (1 - i)) * s, s) == 0);
        ta_tensor_free(Zvt[b]); ta_tensor_free(Zv[b]); ta_tensor_free(Z[b]);
      }
      ta_tensor_free(A);
    }
  }
}

/* A message that does not fit: a clear message, and the
 * next message on the same tag still arrives. A dtype mismatch likewise. */
static void mismatch(ta_mpi_comm *c, int peer, int sender) {
  double d[10];
  for (int i = 0; i < 10; i++) d[i] = i + 1;
  if (sender) {
    size_t n10 = 10, n8 = 8, n4 = 4;
    ta_tensor *a = new_f64(1, &n10, d), *b = new_f64(1, &n8, d), *f;
    float fl[4] = {1, 2, 3, 4};
    OK(ta_tensor_new_copy(TA_DTYPE_F32, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, fl, &f, NULL));
    OK(ta_mpi_send(a, peer, 5, c, NULL, NULL, NULL));
    OK(ta_mpi_send(b, peer, 5, c, NULL, NULL, NULL));
    OK(ta_mpi_send(f, peer, 6, c, NULL, NULL, NULL));
    ta_tensor_free(a); ta_tensor_free(b); ta_tensor_free(f);
  } else {
    size_t n8 = 8, n2 = 2;
    ta_tensor *r1, *r2, *r3;
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n8, TA_ORDER_ROW_MAJOR, &r1, NULL));
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n8, TA_ORDER_ROW_MAJOR, &r2, NULL));
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n2, TA_ORDER_ROW_MAJOR, &r3, NULL));
    ta_event *ev;
    OK(ta_mpi_recv(r1, peer, 5, 0, NULL, c, NULL, &ev, NULL));
    OK(ta_mpi_recv(r2, peer, 5, 0, NULL, c, NULL, NULL, NULL));
    OK(ta_mpi_recv(r3, peer, 6, 0, NULL, c, NULL, NULL, NULL));
    char msg[1024], want[256];
    CHECK(state_of(r1, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
    CHECK(ta_event_wait(ev, TA_WAIT_FOREVER) == TA_STATUS_KERNEL_FAILED);
    ta_event_free(ev);
    snprintf(want, sizeof want, "the message from rank %d (tag 5) holds 80 bytes of f64 (10 elements)", peer);
    CHECK(strstr(msg, want) != NULL);
    CHECK(strstr(msg, "the receiving tensor holds 8 elements of f64 (64 bytes)") != NULL);
    double got[8];
    read_f64(r2, got, 8);
    for (int i = 0; i < 8; i++) CHECK(got[i] == d[i]);
    CHECK(state_of(r3, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
    CHECK(strstr(msg, "holds 16 bytes of f32") != NULL);
    CHECK(strstr(msg, "2 elements of f64") != NULL);
    /* a poisoned receiver is an overwrite target: a fill cleans it */
    OK(ta_fill(r1, (ta_scalar){7, 0}, NULL, NULL, NULL));
    CHECK(state_of(r1, msg, sizeof msg) == TA_STATUS_OK);
    ta_tensor_free(r1); ta_tensor_free(r2); ta_tensor_free(r3);
  }
}

/* A poisoned sent tensor poisons the receiver with its error. */
static void poisoned_sender(ta_mpi_comm *c, int peer, int sender) {
  size_t n = 4;
  if (sender) {
    ta_tensor *x;
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
    ta_access acc = {x, TA_MODE_UPDATE};
    OK(ta_kernel_submit(fail_kernel, NULL, "sensor", &acc, 1, NULL, NULL, NULL));
    ta_event *ev;
    OK(ta_mpi_send(x, peer, 7, c, NULL, &ev, NULL));
    CHECK(ta_event_wait(ev, TA_WAIT_FOREVER) != TA_STATUS_OK); /* the send of a poisoned tensor fails */
    ta_event_free(ev);
    /* and the next message on the tag is the data again */
    OK(ta_fill(x, (ta_scalar){5, 0}, NULL, NULL, NULL));
    OK(ta_mpi_send(x, peer, 7, c, NULL, NULL, NULL));
    /* a kernel's own code travels too; here the local error, for reference */
    OK(ta_kernel_submit(fail_kernel_1234, NULL, "valve", &acc, 1, NULL, NULL, NULL));
    int64_t code;
    char origin[64], msg[256];
    CHECK(error_of(x, &code, origin, sizeof origin, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
    CHECK(code == 1234 && strcmp(origin, "valve") == 0 && strcmp(msg, "valve stuck") == 0);
    OK(ta_mpi_send(x, peer, 7, c, NULL, NULL, NULL));
    ta_tensor_free(x);
  } else {
    ta_tensor *y, *z, *u;
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &y, NULL));
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &z, NULL));
    OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &u, NULL));
    OK(ta_mpi_recv(y, peer, 7, 0, NULL, c, NULL, NULL, NULL));
    OK(ta_mpi_recv(z, peer, 7, 0, NULL, c, NULL, NULL, NULL));
    OK(ta_mpi_recv(u, peer, 7, 1, &n, c, NULL, NULL, NULL));
    /* the sender's error as it was: status, message, code and origin */
    int64_t code;
    char origin[64], msg[1024];
    CHECK(error_of(y, &code, origin, sizeof origin, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
    CHECK(strcmp(msg, "sensor overheated") == 0);
    CHECK(code == TA_STATUS_KERNEL_FAILED);
    CHECK(strcmp(origin, "sensor") == 0);
    double got[4];
    read_f64(z, got, 4);
    for (int i = 0; i < 4; i++) CHECK(got[i] == 5);
    CHECK(error_of(u, &code, origin, sizeof origin, msg, sizeof msg) == TA_STATUS_KERNEL_FAILED);
    CHECK(strcmp(msg, "valve stuck") == 0);
    CHECK(code == 1234);
    CHECK(strcmp(origin, "valve") == 0);
    ta_tensor_free(y); ta_tensor_free(z); ta_tensor_free(u);
  }
}

static void invalid(ta_mpi_comm *c) {
  size_t n = 2;
  ta_tensor *x;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
  CHECK(ta_mpi_send(x, g_size, 0, c, NULL, NULL, NULL) == TA_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(ta_mpi_last_message(), "is not a rank of the communicator") != NULL);
  CHECK(ta_mpi_recv(x, 0, -1, 0, NULL, c, NULL, NULL, NULL) == TA_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(ta_mpi_last_message(), "tag -1 is not in [0, ") != NULL);
  CHECK(ta_mpi_tag_max() >= 32767 / 64 - 1);
  /* the documented limit, (MPI_TAG_UB >> 6) - 1, is the real one */
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  CHECK(flag && ub);
  int tmax = ta_mpi_tag_max();
  CHECK(tmax == (*ub >> 6) - 1);
  CHECK(ta_mpi_send(x, g_rank, tmax + 1, c, NULL, NULL, NULL) == TA_STATUS_INVALID_ARGUMENT);
  ta_tensor *self;
  OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &self, NULL));
  OK(ta_fill(x, (ta_scalar){3, 0}, NULL, NULL, NULL));
  OK(ta_mpi_send(x, g_rank, tmax, c, NULL, NULL, NULL));
  OK(ta_mpi_recv(self, g_rank, tmax, 1, &n, c, NULL, NULL, NULL));
  double sv[2];
  read_f64(self, sv, 2);
  CHECK(sv[0] == 3 && sv[1] == 3);
  ta_tensor_free(self);
  size_t e3[1] = {3};
  CHECK(ta_mpi_recv(x, 0, 0, 1, e3, c, NULL, NULL, NULL) == TA_STATUS_SHAPE_MISMATCH);
  CHECK(ta_mpi_send(x, 0, 0, NULL, NULL, NULL, NULL) == TA_STATUS_NULL_HANDLE);
  ta_tensor *u;
  OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &u, NULL));
  CHECK(ta_mpi_send(u, 0, 0, c, NULL, NULL, NULL) == TA_STATUS_UNCONSTRUCTED);
  ta_tensor_free(u);
  ta_tensor_free(x);
}

/* Every rank sends to the next one and receives from the previous one. */
/* The same through a communicator given by its Fortran handle. */
static void fortran_handle(void) {
  ta_mpi_comm *f;
  OK(ta_mpi_comm_new_f(MPI_Comm_c2f(MPI_COMM_WORLD), &f));
  int r = -1, s = -1;
  OK(ta_mpi_comm_rank(f, &r));
  OK(ta_mpi_comm_size(f, &s));
  CHECK(r == g_rank && s == g_size);
  ring(f);
  OK(ta_mpi_comm_free(f));
  /* a freed communicator is a status, not a crash */
  CHECK(ta_mpi_comm_free(f) == TA_STATUS_DOUBLE_FREE);
  CHECK(ta_mpi_comm_rank(f, &r) == TA_STATUS_STALE_HANDLE);
  size_t n = 1;
  ta_tensor *x;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
  CHECK(ta_mpi_send(x, 0, 0, f, NULL, NULL, NULL) == TA_STATUS_STALE_HANDLE);
  CHECK(strstr(ta_mpi_last_message(), "ta_mpi_send: the communicator was freed") != NULL);
  ta_tensor_free(x);
}

static void ring(ta_mpi_comm *c) {
  size_t n = 64;
  double d[64], got[64];
  for (int i = 0; i < 64; i++) d[i] = g_rank * 1000 + i;
  ta_tensor *x = new_f64(1, &n, d), *y;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &y, NULL));
  int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  OK(ta_mpi_recv(y, prev, 99, 0, NULL, c, NULL, NULL, NULL));
  OK(ta_mpi_send(x, next, 99, c, NULL, NULL, NULL));
  read_f64(y, got, 64);
  for (int i = 0; i < 64; i++) CHECK(got[i] == prev * 1000 + i);
  ta_tensor_free(x); ta_tensor_free(y);
}

int main(int argc, char **argv) {
  ta_mpi_comm *c = test_init(&argc, &argv);
  int peer = g_rank ^ 1, sender = g_rank % 2 == 0;
  if (peer < g_size) {
    ordering(c, peer, sender);
    views(c, peer, sender);
    unconstructed(c, peer, sender);
    conj_view(c, peer, sender);
    all_dtypes(c, peer, sender);
    negative_strides(c, peer, sender);
    mismatch(c, peer, sender);
    poisoned_sender(c, peer, sender);
  }
  invalid(c);
  ring(c);
  fortran_handle();
  OK(ta_mpi_comm_free(c));
  test_done("test_p2p");
  return 0;
}
