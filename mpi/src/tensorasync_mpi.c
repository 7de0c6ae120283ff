/* libtensorasync_mpi: MPI operations ordered on tensorasync epoch queues.
 *
 * Every operation is enrolled with ta_external_submit. When its `started`
 * event completes (the accesses are granted), a callback moves it to the
 * engine's inbox. The engine (the progress thread, or ta_mpi_progress)
 * posts its MPI requests, tests them with MPI_Testsome, and completes the
 * operation with ta_token_finish. No worker of the runtime ever waits on MPI.
 *
 * Ordering. MPI matches point-to-point messages per (source, tag) in the
 * order the sends are posted, and requires collectives in the same order on
 * every rank. Operations start in data order, not in submission order, so
 * every operation belongs to a channel (a FIFO in submission order): sends
 * to one (dest, tag), receives from one (src, tag), and the collectives of a
 * communicator. An operation is posted only at the head of its channel.
 *
 * Matching. Receives are matched by the engine itself: MPI_Improbe on the
 * library's duplicate communicator (any source, any tag) takes each incoming
 * message, whose tag carries the user tag, the sender's dtype and a poison
 * bit; the message is queued on its receive channel and received
 * (MPI_Imrecv) into the receiving tensor once that tensor's receive is at the
 * head. So a size or dtype mismatch is known before the data is read, and a
 * poisoned sender's error message travels in place of the data.
 *
 * Locking. `E.mu` protects the inbox, the channels and the counters; MPI
 * calls are made under it, by one engine step at a time. ta_token_finish and
 * ta_event_on_complete are never called with it held (they may run started
 * callbacks of other operations inline, which take it).
 */
#define _GNU_SOURCE
#include "tensorasync_mpi.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct op op;
static void on_started(ta_status status, void *userdata);

/* ------------------------------------------------------------------------ */

enum kind { K_SEND, K_RECV, K_BCAST, K_REDUCE, K_ALLREDUCE, K_ALLGATHER };
static const char *const KIND_NAME[] = {"ta_mpi_send", "ta_mpi_recv", "ta_mpi_bcast",
                                        "ta_mpi_reduce", "ta_mpi_allreduce", "ta_mpi_allgather"};
enum chan_class { C_SEND = 0, C_RECV = 1, C_COLL = 2 };

#define DT_BITS 5           /* dtype code in the internal tag */
#define TAG_SHIFT (DT_BITS + 1)
#define CHUNK ((size_t)1 << 30) /* elements per collective call / datatype block */
#define NBUCKETS 4096

typedef struct chan chan;
typedef struct msg {
  struct msg *next;
  MPI_Message handle;
  MPI_Count bytes;
  int poison;
  int dtype;
  double matched_at;
} msg;

struct chan {
  chan *hnext;      /* hash bucket chain */
  int cls, peer, tag;
  op *head, *tail;  /* operations in submission order */
  msg *mhead, *mtail; /* receive channels: matched messages in arrival order */
};

#define COMM_LIVE 0x74616d70u /* "tamp" */
#define COMM_DEAD 0x64656164u /* "dead" */

/* A freed communicator keeps this record (without its tables), marked dead,
 * so that using or freeing it again gives a status, not a crash. */
struct ta_mpi_comm {
  uint32_t magic;
  MPI_Comm comm; /* the duplicate (MPI_COMM_NULL when simulated) */
  int rank, size, simulated;
  chan **buckets; /* NBUCKETS hash chains of channels */
  size_t pending; /* operations submitted and not finished */
  ta_mpi_stats stats;
  int tracing;
  double *trace; /* pairs (start, end) in MPI_Wtime seconds */
  size_t ntrace, trace_cap;
};

struct op {
  op *next;        /* channel FIFO, then inbox / done lists */
  op *inext;       /* inbox */
  enum kind kind;
  ta_mpi_comm *comm;
  chan *ch;
  int peer, tag, root, mop;
  ta_token *token;
  ta_event *started_ev;
  int started;          /* started callback seen */
  ta_status start_status;
  int posted;           /* left its channel */
  ta_dtype dtype;
  size_t esz;
  size_t count;         /* elements of the (first) operand */
  size_t out_count;     /* elements of the output (allgather) */
  int in_place;
  int is_root;          /* bcast/reduce: this rank is the root */
  int nviews;
  ta_view views[2];
  size_t *ext[2];
  ptrdiff_t *str[2];
  /* requests */
  MPI_Request *reqs;
  int nreqs, nreqs_left;
  MPI_Datatype types[2];
  int ntypes;
  void *tmp;            /* packed input, received error, scratch */
  void *tmp_out;        /* packed output to unpack on completion */
  int phase;            /* collective: 0 not posted, 1 header in flight, 2 data or error in flight */
  int64_t hdr_send[8], hdr_recv[8]; /* collective header (see post_coll_header) */
  int coll_poison;      /* collective: phase 2 broadcasts the error of rank hdr_recv[0] */
  char *errblob;        /* the error of a poisoned input, as sent (see make_error_blob) */
  size_t errlen;
  int poisoned_peer;    /* receive: poison message from the peer */
  msg *m;
  ta_status result;
  ta_status finish_status; /* the status given to ta_token_finish, when not `result` */
  char *errmsg;         /* a propagated error's message (heap), in place of errbuf */
  ta_error *propagated; /* that error as it was (status, code, origin, message) */
  char errbuf[512];
  double t_post;
};

/* `initialised`: ta_mpi_init succeeded (real MPI, checked). `thread_running`:
 * a progress thread exists, started by ta_mpi_init or, before it, by the
 * first simulated communicator (which needs no MPI). Simulated
 * communicators never mark MPI as initialised. `stop`: 1 stop once idle, 2
 * stop now (ta_mpi_init taking the engine over for manual progress). */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* inbox grew, or stop */
  pthread_cond_t idle_cv; /* an operation finished */
  int initialised, manual, stop, thread_running;
  pthread_t thread;
  op *inbox_head, *inbox_tail;
  size_t pending;
  size_t recv_waiting; /* started receives at a channel head with no message yet */
  /* in-flight requests */
  MPI_Request *reqs;
  op **req_op;
  int nreq, req_cap;
  int tag_ub;
  int fault_rank; /* TA_MPI_TEST_INVALID_RANK: sends go to an invalid rank */
  pthread_mutex_t step_mu;
} E = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0,
       NULL, NULL, 0, 0, NULL, NULL, 0, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER};

static _Thread_local char last_msg[512];

static ta_status fail(ta_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_msg, sizeof last_msg, fmt, ap);
  va_end(ap);
  return st;
}

const char *ta_mpi_last_message(void) { return last_msg; }

/* (MPI_TAG_UB >> 6) - 1: the internal tag is (tag << 6) | (dtype << 1) | poison. */
int ta_mpi_tag_max(void) {
  int ub = E.tag_ub; /* set by ta_mpi_init */
  if (ub <= 0) {
    int flag = 0, *p = NULL, init = 0, fin = 0;
    MPI_Initialized(&init);
    if (init) MPI_Finalized(&fin);
    if (init && !fin) {
      MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag);
      ub = (flag && p) ? *p : 32767;
    } else {
      ub = INT_MAX; /* no MPI: only simulated communicators, which send nothing */
    }
  }
  return (ub >> TAG_SHIFT) - 1;
}

/* ------------------------------------------------------------------------ */
/* dtypes */

static MPI_Datatype mpi_type(ta_dtype d) {
  switch (d) {
  case TA_DTYPE_F32: return MPI_FLOAT;
  case TA_DTYPE_F64: return MPI_DOUBLE;
  case TA_DTYPE_C64: return MPI_C_FLOAT_COMPLEX;
  case TA_DTYPE_C128: return MPI_C_DOUBLE_COMPLEX;
  case TA_DTYPE_I8: return MPI_INT8_T;
  case TA_DTYPE_I16: return MPI_INT16_T;
  case TA_DTYPE_I32: return MPI_INT32_T;
  case TA_DTYPE_I64: return MPI_INT64_T;
  case TA_DTYPE_U8: return MPI_UINT8_T;
  case TA_DTYPE_U16: return MPI_UINT16_T;
  case TA_DTYPE_U32: return MPI_UINT32_T;
  case TA_DTYPE_U64: return MPI_UINT64_T;
  default: return MPI_DATATYPE_NULL;
  }
}

static size_t dtype_size(ta_dtype d) {
  switch (d) {
  case TA_DTYPE_F32: case TA_DTYPE_I32: case TA_DTYPE_U32: return 4;
  case TA_DTYPE_F64: case TA_DTYPE_C64: case TA_DTYPE_I64: case TA_DTYPE_U64: return 8;
  case TA_DTYPE_C128: return 16;
  case TA_DTYPE_I8: case TA_DTYPE_U8: return 1;
  case TA_DTYPE_I16: case TA_DTYPE_U16: return 2;
  default: return 0;
  }
}

static int is_complex(ta_dtype d) { return d == TA_DTYPE_C64 || d == TA_DTYPE_C128; }

static const char *dtype_name(int d) {
  switch (d) {
  case TA_DTYPE_F32: return "f32"; case TA_DTYPE_F64: return "f64";
  case TA_DTYPE_C64: return "complex64"; case TA_DTYPE_C128: return "complex128";
  case TA_DTYPE_I8: return "i8"; case TA_DTYPE_I16: return "i16";
  case TA_DTYPE_I32: return "i32"; case TA_DTYPE_I64: return "i64";
  case TA_DTYPE_U8: return "u8"; case TA_DTYPE_U16: return "u16";
  case TA_DTYPE_U32: return "u32"; case TA_DTYPE_U64: return "u64";
  default: return "?";
  }
}

static MPI_Op mpi_op(ta_mpi_op o) {
  return o == TA_MPI_SUM ? MPI_SUM : o == TA_MPI_MAX ? MPI_MAX : MPI_MIN;
}

static void mpi_err_text(int code, char *buf, size_t cap) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", code);
  snprintf(buf, cap, "%s", s);
}

/* ------------------------------------------------------------------------ */
/* views: datatypes and packing */

static int view_dense(const ta_view *v) {
  ptrdiff_t expect = 1;
  for (size_t k = v->rank; k-- > 0;) {
    if (v->extents[k] == 1) continue;
    if (v->strides[k] != expect) return 0;
    expect *= (ptrdiff_t)v->extents[k];
  }
  return 1;
}

static size_t view_count(const ta_view *v) {
  size_t n = 1;
  for (size_t k = 0; k < v->rank; k++) n *= v->extents[k];
  return n;
}

/* A contiguous datatype of n elements of `base`, n possibly above INT_MAX. */
static int big_contig(size_t n, MPI_Datatype base, MPI_Datatype *out) {
  if (n <= CHUNK) return MPI_Type_contiguous((int)n, base, out);
  MPI_Aint lb, ext;
  MPI_Type_get_extent(base, &lb, &ext);
  size_t q = n / CHUNK, r = n % CHUNK;
  MPI_Datatype block;
  int rc = MPI_Type_contiguous((int)CHUNK, base, &block);
  if (rc != MPI_SUCCESS) return rc;
  MPI_Datatype blocks;
  rc = MPI_Type_contiguous((int)q, block, &blocks);
  if (rc != MPI_SUCCESS) { MPI_Type_free(&block); return rc; }
  if (r == 0) {
    MPI_Type_free(&block);
    *out = blocks;
    return MPI_SUCCESS;
  }
  MPI_Datatype rest;
  rc = MPI_Type_contiguous((int)r, base, &rest);
  if (rc == MPI_SUCCESS) {
    int lens[2] = {1, 1};
    MPI_Aint disp[2] = {0, (MPI_Aint)(q * CHUNK) * ext};
    MPI_Datatype ts[2] = {blocks, rest};
    rc = MPI_Type_create_struct(2, lens, disp, ts, out);
    MPI_Type_free(&rest);
  }
  MPI_Type_free(&blocks);
  MPI_Type_free(&block);
  return rc;
}

/* A datatype describing view `v` (row-major element order) starting at v->data. */
static int view_type(const ta_view *v, MPI_Datatype *out, char *err, size_t cap) {
  MPI_Datatype base = mpi_type(v->dtype);
  int rc;
  if (view_dense(v)) {
    rc = big_contig(view_count(v), base, out);
  } else {
    MPI_Datatype t = base;
    int own = 0;
    rc = MPI_SUCCESS;
    for (size_t k = v->rank; k-- > 0;) {
      if (v->extents[k] > (size_t)INT32_MAX) {
        if (own) MPI_Type_free(&t);
        snprintf(err, cap, "an axis of %zu elements with a stride is too long for one MPI datatype",
                 v->extents[k]);
        return -1;
      }
      MPI_Datatype nt;
      rc = MPI_Type_create_hvector((int)v->extents[k], 1,
                                   (MPI_Aint)v->strides[k] * (MPI_Aint)dtype_size(v->dtype), t, &nt);
      if (own) MPI_Type_free(&t);
      if (rc != MPI_SUCCESS) break;
      t = nt;
      own = 1;
    }
    if (rc == MPI_SUCCESS) *out = t;
  }
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(out);
  if (rc != MPI_SUCCESS) mpi_err_text(rc, err, cap);
  return rc;
}

/* Copy the elements of view `v` to/from a dense buffer in row-major order,
 * conjugating complex elements on the way out when `conj`. */
static void strided_copy(const ta_view *v, char *dense, int to_dense, int conj) {
  size_t esz = dtype_size(v->dtype), n = view_count(v), r = v->rank;
  size_t idx[16] = {0};
  char *p = v->data;
  for (size_t e = 0; e < n; e++) {
    char *dst = to_dense ? dense + e * esz : p;
    const char *src = to_dense ? p : dense + e * esz;
    memcpy(dst, src, esz);
    if (conj) {
      if (v->dtype == TA_DTYPE_C64) { float *f = (float *)dst; f[1] = -f[1]; }
      else { double *d = (double *)dst; d[1] = -d[1]; }
    }
    for (size_t k = r; k-- > 0;) {
      p += v->strides[k] * (ptrdiff_t)esz;
      if (++idx[k] < v->extents[k]) break;
      p -= v->strides[k] * (ptrdiff_t)esz * (ptrdiff_t)v->extents[k];
      idx[k] = 0;
    }
  }
}

/* Whether view `v` goes through a packed dense buffer rather than an MPI
 * datatype: a conjugate view (MPI has no conjugation), and a view with a
 * negative stride (Open MPI 4.1's datatype engine receives hvectors of
 * 1-byte elements with negative strides wrongly; every dtype is packed for
 * simplicity). */
static int view_packed(const ta_view *v) {
  if (v->conj && is_complex(v->dtype)) return 1;
  for (size_t k = 0; k < v->rank; k++)
    if (v->extents[k] > 1 && v->strides[k] < 0) return 1;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* errors that travel: a poisoned input's error, sent in place of the data
 *
 * Layout (native byte order, like the data): int32 status, int32 origin
 * length, int64 code, int32 message length, int32 0, then the origin and
 * the message (no NULs). */

#define ERR_HDR 24
#define ERR_MSG_MAX 65536

static void put32(char *p, int32_t v) { memcpy(p, &v, 4); }
static void put64(char *p, int64_t v) { memcpy(p, &v, 8); }
static int32_t get32(const char *p) { int32_t v; memcpy(&v, p, 4); return v; }
static int64_t get64(const char *p) { int64_t v; memcpy(&v, p, 8); return v; }

/* o->errblob: the error of o's failed start (a poisoned input). */
static void make_error_blob(op *o, const char *fallback) {
  ta_status status = o->start_status;
  int64_t code = (int64_t)status;
  char *origin = NULL, *message = NULL;
  size_t olen = 0, mlen = 0;
  ta_error *e = NULL;
  if (o->started_ev && ta_event_error(o->started_ev, &e) == TA_STATUS_OK && e) {
    ta_error_status(e, &status);
    ta_error_code(e, &code);
    if (ta_error_origin(e, NULL, 0, &olen) == TA_STATUS_OK && (origin = malloc(olen + 1)))
      ta_error_origin(e, origin, olen + 1, NULL);
    else olen = 0;
    if (ta_error_message(e, NULL, 0, &mlen) == TA_STATUS_OK && (message = malloc(mlen + 1)))
      ta_error_message(e, message, mlen + 1, NULL);
    else mlen = 0;
    ta_error_free(e);
  }
  if (!message) { message = strdup(fallback); mlen = message ? strlen(message) : 0; }
  if (olen > 256) olen = 256;
  if (mlen > ERR_MSG_MAX) mlen = ERR_MSG_MAX;
  size_t len = ERR_HDR + olen + mlen;
  char *b = calloc(1, len);
  if (b) {
    put32(b, (int32_t)status);
    put32(b + 4, (int32_t)olen);
    put64(b + 8, code);
    put32(b + 16, (int32_t)mlen);
    if (olen) memcpy(b + ERR_HDR, origin, olen);
    if (mlen) memcpy(b + ERR_HDR + olen, message, mlen);
    o->errblob = b;
    o->errlen = len;
  }
  free(origin);
  free(message);
}

/* What ta_token_finish is given to reproduce an error of (status, code):
 * KERNEL_FAILED with `status` as its code, or CANCELLED. */
static ta_status finish_code(int32_t status, int64_t code) {
  if (status == TA_STATUS_CANCELLED) return TA_STATUS_CANCELLED;
  if (status == TA_STATUS_KERNEL_FAILED) {
    if (code > 0 && code <= (int64_t)UINT32_MAX && code != TA_STATUS_CANCELLED) return (ta_status)code;
    return TA_STATUS_KERNEL_FAILED;
  }
  return status > 0 ? (ta_status)status : TA_STATUS_KERNEL_FAILED;
}

static void op_fail(op *o, const char *fmt, ...);

/* Fail `o` with the error that arrived from rank `from` (blob of `len` bytes):
 * the same message and code, not re-worded. */
static void op_fail_propagated(op *o, const char *b, size_t len, int from) {
  if (o->result != TA_STATUS_OK) return;
  int32_t olen = len >= ERR_HDR ? get32(b + 4) : -1, mlen = len >= ERR_HDR ? get32(b + 16) : -1;
  if (olen < 0 || mlen < 0 || (size_t)olen + (size_t)mlen + ERR_HDR > len) {
    op_fail(o, "a malformed error arrived from rank %d in place of the data", from);
    return;
  }
  char *m = malloc((size_t)mlen + 1);
  if (!m) { op_fail(o, "out of memory receiving the error of rank %d", from); return; }
  memcpy(m, b + ERR_HDR + olen, (size_t)mlen);
  m[mlen] = 0;
  o->errmsg = m;
  o->result = TA_STATUS_KERNEL_FAILED;
  o->finish_status = finish_code(get32(b), get64(b + 8));
  /* The error itself, origin included, when its status can be an
   * operation's (else the message and code above, with this op's origin). */
  char *origin = malloc((size_t)olen + 1);
  if (origin) {
    memcpy(origin, b + ERR_HDR, (size_t)olen);
    origin[olen] = 0;
    if (ta_error_new((ta_status)get32(b), get64(b + 8), origin, m, &o->propagated) != TA_STATUS_OK)
      o->propagated = NULL;
    free(origin);
  }
}

/* ------------------------------------------------------------------------ */
/* channels */

static chan *chan_get(ta_mpi_comm *c, int cls, int peer, int tag, int create) {
  unsigned h = ((unsigned)cls * 2654435761u) ^ ((unsigned)peer * 40503u) ^ ((unsigned)tag * 97u);
  h %= NBUCKETS;
  for (chan *ch = c->buckets[h]; ch; ch = ch->hnext)
    if (ch->cls == cls && ch->peer == peer && ch->tag == tag) return ch;
  if (!create) return NULL;
  chan *ch = calloc(1, sizeof *ch);
  if (!ch) return NULL;
  ch->cls = cls; ch->peer = peer; ch->tag = tag;
  ch->hnext = c->buckets[h];
  c->buckets[h] = ch;
  return ch;
}

static void chan_drop_if_empty(ta_mpi_comm *c, chan *ch) {
  if (ch->head || ch->mhead) return;
  unsigned h = ((unsigned)ch->cls * 2654435761u) ^ ((unsigned)ch->peer * 40503u) ^ ((unsigned)ch->tag * 97u);
  h %= NBUCKETS;
  for (chan **pp = &c->buckets[h]; *pp; pp = &(*pp)->hnext)
    if (*pp == ch) { *pp = ch->hnext; free(ch); return; }
}

static void chan_push(chan *ch, op *o) {
  o->next = NULL;
  if (ch->tail) ch->tail->next = o; else ch->head = o;
  ch->tail = o;
}

static void chan_pop(chan *ch) {
  op *o = ch->head;
  ch->head = o->next;
  if (!ch->head) ch->tail = NULL;
  o->next = NULL;
}

/* ------------------------------------------------------------------------ */
/* requests */

static int add_req(op *o, MPI_Request r) {
  if (E.nreq == E.req_cap) {
    int cap = E.req_cap ? 2 * E.req_cap : 256;
    MPI_Request *nr = realloc(E.reqs, (size_t)cap * sizeof *nr);
    if (!nr) return -1;
    E.reqs = nr;
    op **no = realloc(E.req_op, (size_t)cap * sizeof *no);
    if (!no) return -1;
    E.req_op = no;
    E.req_cap = cap;
  }
  E.reqs[E.nreq] = r;
  E.req_op[E.nreq] = o;
  E.nreq++;
  o->nreqs_left++;
  return 0;
}

/* done list, finished after the lock is released */
typedef struct { op *head, *tail; } oplist;
static void done_push(oplist *l, op *o) {
  o->next = NULL;
  if (l->tail) l->tail->next = o; else l->head = o;
  l->tail = o;
}

static void op_fail(op *o, const char *fmt, ...) {
  if (o->result != TA_STATUS_OK) return; /* keep the first reason */
  va_list ap;
  int n = snprintf(o->errbuf, sizeof o->errbuf, "%s: ", KIND_NAME[o->kind]);
  va_start(ap, fmt);
  vsnprintf(o->errbuf + n, sizeof o->errbuf - (size_t)n, fmt, ap);
  va_end(ap);
  o->result = TA_STATUS_KERNEL_FAILED;
}

static void op_mpi_fail(op *o, const char *call, int code) {
  char s[MPI_MAX_ERROR_STRING + 1];
  mpi_err_text(code, s, sizeof s);
  if (o->result != TA_STATUS_OK) {
    /* after the reason this library found, what MPI said about it */
    size_t n = strlen(o->errbuf);
    snprintf(o->errbuf + n, sizeof o->errbuf - n, " (%s: %s)", call, s);
    return;
  }
  op_fail(o, "%s failed: %s", call, s);
}

static void trace_add(ta_mpi_comm *c, double t0, double t1) {
  if (!c->tracing) return;
  if (c->ntrace + 2 > c->trace_cap) {
    size_t cap = c->trace_cap ? 2 * c->trace_cap : 1024;
    double *n = realloc(c->trace, cap * sizeof *n);
    if (!n) return;
    c->trace = n;
    c->trace_cap = cap;
  }
  c->trace[c->ntrace++] = t0;
  c->trace[c->ntrace++] = t1;
}

/* ------------------------------------------------------------------------ */
/* posting (engine step, E.mu held) */

static int internal_tag(int tag, int dtype, int poison) {
  return (tag << TAG_SHIFT) | (dtype << 1) | poison;
}

static void post_send(op *o, oplist *done) {
  ta_mpi_comm *c = o->comm;
  if (c->simulated) {
    c->stats.messages_sent++;
    c->stats.bytes_sent += o->count * o->esz;
    done_push(done, o);
    return;
  }
  MPI_Request r;
  int rc;
  o->t_post = MPI_Wtime();
  int dest = E.fault_rank ? c->size : o->peer; /* a testing aid: a real MPI error */
  if (o->start_status != TA_STATUS_OK) {
    /* the tensor is poisoned: its error travels instead of the data */
    if (!o->errblob) { op_fail(o, "out of memory sending the error of a poisoned tensor"); done_push(done, o); return; }
    rc = MPI_Isend(o->errblob, (int)o->errlen, MPI_BYTE, dest,
                   internal_tag(o->tag, (int)o->dtype, 1), c->comm, &r);
  } else {
    const ta_view *v = &o->views[0];
    if (view_packed(v)) {
      o->tmp = malloc(o->count * o->esz + 1);
      if (!o->tmp) { op_fail(o, "out of memory packing the view"); done_push(done, o); return; }
      strided_copy(v, o->tmp, 1, v->conj && is_complex(v->dtype));
      rc = big_contig(o->count, mpi_type(o->dtype), &o->types[0]);
      if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&o->types[0]);
      if (rc != MPI_SUCCESS) { op_mpi_fail(o, "MPI_Type_contiguous", rc); done_push(done, o); return; }
      o->ntypes = 1;
      rc = MPI_Isend(o->tmp, 1, o->types[0], dest, internal_tag(o->tag, (int)o->dtype, 0), c->comm, &r);
    } else {
      char err[256];
      if (view_type(v, &o->types[0], err, sizeof err) != MPI_SUCCESS) {
        op_fail(o, "%s", err);
        done_push(done, o);
        return;
      }
      o->ntypes = 1;
      rc = MPI_Isend(v->data, 1, o->types[0], dest, internal_tag(o->tag, (int)o->dtype, 0), c->comm, &r);
    }
  }
  if (rc != MPI_SUCCESS) { op_mpi_fail(o, "MPI_Isend", rc); done_push(done, o); return; }
  c->stats.messages_sent++;
  c->stats.bytes_sent += o->count * o->esz;
  if (add_req(o, r) != 0) { op_fail(o, "out of memory"); done_push(done, o); }
}

/* Receive message `m`, which does not go into the tensor, into scratch
 * memory (receiving it truncated would be an MPI error, which some MPIs raise
 * on MPI_COMM_WORLD's handler instead of returning it). */
static int consume(op *o, msg *m, MPI_Request *r) {
  free(o->tmp);
  o->tmp = malloc((size_t)m->bytes + 1);
  if (!o->tmp) return MPI_ERR_NO_MEM;
  int rc = big_contig((size_t)m->bytes, MPI_BYTE, &o->types[o->ntypes]);
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&o->types[o->ntypes]);
  if (rc != MPI_SUCCESS) return rc;
  o->ntypes++;
  return MPI_Imrecv(o->tmp, 1, o->types[o->ntypes - 1], &m->handle, r);
}

/* The head receive `o` of its channel takes message `m`. */
static void post_recv(op *o, msg *m, oplist *done) {
  ta_mpi_comm *c = o->comm;
  MPI_Request r;
  int rc;
  o->m = m;
  o->t_post = m->matched_at;
  size_t want = o->count * o->esz;
  if (o->start_status != TA_STATUS_OK) {
    op_fail(o, "the receive did not start (%s)", ta_status_name(o->start_status));
    rc = consume(o, m, &r);
  } else if (m->poison) {
    o->poisoned_peer = 1;
    rc = consume(o, m, &r);
  } else if ((size_t)m->bytes != want || m->dtype != (int)o->dtype) {
    op_fail(o, "the message from rank %d (tag %d) holds %lld bytes of %s (%lld elements); "
               "the receiving tensor holds %zu elements of %s (%zu bytes)",
            o->peer, o->tag, (long long)m->bytes, dtype_name(m->dtype),
            (long long)(m->bytes / (MPI_Count)(dtype_size((ta_dtype)m->dtype) ? dtype_size((ta_dtype)m->dtype) : 1)),
            o->count, dtype_name((int)o->dtype), want);
    rc = consume(o, m, &r);
  } else if (view_packed(&o->views[0])) {
    /* into a dense buffer, unpacked on completion (complete_op) */
    o->tmp_out = malloc(want + 1);
    if (!o->tmp_out) {
      op_fail(o, "out of memory for the receive buffer of a view with negative strides");
      rc = consume(o, m, &r);
    } else {
      rc = big_contig(o->count, mpi_type(o->dtype), &o->types[0]);
      if (rc == MPI_SUCCESS) { o->ntypes = 1; rc = MPI_Type_commit(&o->types[0]); }
      if (rc == MPI_SUCCESS) rc = MPI_Imrecv(o->tmp_out, 1, o->types[0], &m->handle, &r);
    }
  } else {
    char err[256];
    if (view_type(&o->views[0], &o->types[0], err, sizeof err) != MPI_SUCCESS) {
      op_fail(o, "%s", err);
      rc = consume(o, m, &r);
    } else {
      o->ntypes = 1;
      rc = MPI_Imrecv(o->views[0].data, 1, o->types[0], &m->handle, &r);
    }
  }
  if (rc != MPI_SUCCESS) { op_mpi_fail(o, "MPI_Imrecv", rc); done_push(done, o); return; }
  c->stats.messages_received++;
  c->stats.bytes_received += (uint64_t)m->bytes;
  if (add_req(o, r) != 0) { op_fail(o, "out of memory"); done_push(done, o); }
}

/* Collectives go in two phases, one collective of the communicator at a
 * time at the head of its channel (so every rank posts the same MPI
 * collectives in the same order):
 *
 * 1. a header, MPI_Iallreduce (MPI_MIN) of 8 int64: the lowest rank whose
 *    input is poisoned (size if none), the element count, the dtype, and
 *    the kind, root and reduction operation (each also negated, giving the
 *    maximum), and the longest error to send (negated);
 * 2. then, on every rank alike: if an input is poisoned, MPI_Ibcast of that
 *    rank's error (see make_error_blob) in place of the data; if the counts,
 *    dtypes or kinds differ, nothing (the outputs are poisoned, saying so:
 *    posting the data would be an MPI error, which Open MPI raises on
 *    MPI_COMM_WORLD's handler from MPI_Testsome, or undetected garbage);
 *    otherwise the data collective. */
static int post_coll_header(op *o) {
  ta_mpi_comm *c = o->comm;
  c->stats.collectives++;
  o->t_post = MPI_Wtime();
  int poisoned = o->start_status != TA_STATUS_OK;
  int64_t key = ((int64_t)o->root << 8) | ((int64_t)o->mop << 4) | (int64_t)o->kind;
  int64_t *h = o->hdr_send;
  h[0] = poisoned ? c->rank : c->size;
  h[1] = (int64_t)o->count;
  h[2] = -h[1];
  h[3] = (int64_t)o->dtype;
  h[4] = -h[3];
  h[5] = key;
  h[6] = -key;
  h[7] = poisoned ? -(int64_t)o->errlen : 0;
  o->phase = 1;
  MPI_Request r;
  int rc = MPI_Iallreduce(o->hdr_send, o->hdr_recv, 8, MPI_INT64_T, MPI_MIN, c->comm, &r);
  if (rc != MPI_SUCCESS) { op_mpi_fail(o, "MPI_Iallreduce", rc); return -1; }
  if (add_req(o, r) != 0) { op_fail(o, "out of memory"); return -1; }
  return 0;
}

/* Phase 2, data: o->tmp / views. */
static void post_coll_data(op *o) {
  ta_mpi_comm *c = o->comm;
  MPI_Datatype t = mpi_type(o->dtype);
  size_t n = o->count, esz = o->esz;
  /* input and output buffers, dense */
  const ta_view *in = NULL, *out = NULL;
  void *inbuf = NULL, *outbuf = NULL;
  int nv = o->nviews;
  if (o->kind == K_BCAST || o->in_place) {
    in = out = &o->views[0];
  } else {
    in = &o->views[0];
    out = nv > 1 ? &o->views[1] : NULL;
  }
  size_t in_bytes = n * esz;
  size_t out_bytes = (o->kind == K_ALLGATHER ? o->out_count : n) * esz;
  int need_out = o->kind == K_ALLGATHER || o->kind == K_ALLREDUCE || o->kind == K_BCAST ||
                 (o->kind == K_REDUCE && o->is_root);
  /* input */
  if (view_dense(in) && !(in->conj && is_complex(in->dtype))) {
    inbuf = in->data;
  } else {
    o->tmp = calloc(1, in_bytes ? in_bytes : 1);
    if (!o->tmp) { op_fail(o, "out of memory"); return; }
    strided_copy(in, o->tmp, 1, in->conj && is_complex(in->dtype));
    inbuf = o->tmp;
  }
  if (need_out) {
    if (out && view_dense(out) && !(o->kind == K_BCAST && inbuf != out->data)) {
      outbuf = out->data;
    } else if (o->kind == K_BCAST || (o->in_place && inbuf == o->tmp)) {
      outbuf = inbuf;
      if (out) o->tmp_out = outbuf; /* unpack from the packed buffer */
    } else {
      o->tmp_out = calloc(1, out_bytes ? out_bytes : 1);
      if (!o->tmp_out) { op_fail(o, "out of memory"); return; }
      outbuf = o->tmp_out;
    }
  }
  MPI_Request r;
  int rc = MPI_SUCCESS;
  const char *call = "";
  for (size_t off = 0; off < n || (n == 0 && off == 0); off += CHUNK) {
    int k = (int)(n - off < CHUNK ? n - off : CHUNK);
    char *ib = (char *)inbuf + off * esz, *ob = outbuf ? (char *)outbuf + off * esz : NULL;
    switch (o->kind) {
    case K_BCAST:
      call = "MPI_Ibcast";
      rc = MPI_Ibcast(ib, k, t, o->root, c->comm, &r);
      break;
    case K_REDUCE:
      call = "MPI_Ireduce";
      if (o->is_root && inbuf == outbuf) rc = MPI_Ireduce(MPI_IN_PLACE, ob, k, t, mpi_op(o->mop), o->root, c->comm, &r);
      else rc = MPI_Ireduce(ib, ob, k, t, mpi_op(o->mop), o->root, c->comm, &r);
      break;
    case K_ALLREDUCE:
      call = "MPI_Iallreduce";
      if (inbuf == outbuf) rc = MPI_Iallreduce(MPI_IN_PLACE, ob, k, t, mpi_op(o->mop), c->comm, &r);
      else rc = MPI_Iallreduce(ib, ob, k, t, mpi_op(o->mop), c->comm, &r);
      break;
    default: /* K_ALLGATHER: one call, a (possibly large) contiguous type */
      call = "MPI_Iallgather";
      if (o->ntypes == 0) {
        rc = big_contig(n, t, &o->types[0]);
        if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&o->types[0]);
        if (rc != MPI_SUCCESS) break;
        o->ntypes = 1;
      }
      rc = MPI_Iallgather(inbuf, 1, o->types[0], outbuf, 1, o->types[0], c->comm, &r);
      off = n; /* done in one call */
      break;
    }
    if (rc != MPI_SUCCESS) break;
    if (add_req(o, r) != 0) { op_fail(o, "out of memory"); return; }
    if (n == 0) break;
  }
  if (rc != MPI_SUCCESS) op_mpi_fail(o, call, rc);
}

/* The header of collective `o` completed: post phase 2 (or nothing). */
static void post_coll_phase2(op *o) {
  ta_mpi_comm *c = o->comm;
  o->phase = 2;
  if (o->result != TA_STATUS_OK) return; /* the header failed */
  const int64_t *h = o->hdr_recv;
  if (h[0] < c->size) {
    /* rank h[0]'s input is poisoned: its error in place of the data */
    int from = (int)h[0];
    size_t len = (size_t)-h[7];
    if (len < ERR_HDR || len > ERR_HDR + 256 + ERR_MSG_MAX) len = ERR_HDR; /* cannot be: ours are so */
    char *b = calloc(1, len);
    if (!b) { op_fail(o, "out of memory receiving the error of rank %d", from); return; }
    if (c->rank == from && o->errblob) memcpy(b, o->errblob, o->errlen < len ? o->errlen : len);
    free(o->tmp);
    o->tmp = b;
    o->coll_poison = 1;
    MPI_Request r;
    int rc = MPI_Ibcast(b, (int)len, MPI_BYTE, from, c->comm, &r);
    if (rc != MPI_SUCCESS) { op_mpi_fail(o, "MPI_Ibcast", rc); return; }
    if (add_req(o, r) != 0) op_fail(o, "out of memory");
    return;
  }
  if (h[1] != -h[2]) {
    op_fail(o, "the ranks' tensors differ in size: from %lld to %lld elements (every rank must pass "
               "the same number of elements)", (long long)h[1], (long long)-h[2]);
    return;
  }
  if (h[3] != -h[4]) {
    op_fail(o, "the ranks' tensors differ in dtype: %s and %s (every rank must pass the same dtype)",
            dtype_name((int)h[3]), dtype_name((int)-h[4]));
    return;
  }
  if (h[5] != -h[6]) {
    op_fail(o, "the ranks called different collectives, or with different roots or reduction "
               "operations, in this position of the communicator's collectives");
    return;
  }
  post_coll_data(o);
}

/* Complete an operation whose requests have all completed. */
static void complete_op(op *o) {
  ta_mpi_comm *c = o->comm;
  if (o->kind == K_SEND || o->kind == K_RECV) {
    double t1 = MPI_Wtime();
    c->stats.message_seconds += t1 - o->t_post;
    trace_add(c, o->t_post, t1);
  }
  if (o->kind == K_RECV && o->result == TA_STATUS_OK) {
    if (o->poisoned_peer)
      op_fail_propagated(o, (const char *)o->tmp, o->m ? (size_t)o->m->bytes : 0, o->peer);
    else if (o->tmp_out)
      strided_copy(&o->views[0], o->tmp_out, 0, o->views[0].conj && is_complex(o->views[0].dtype));
  }
  if (o->kind >= K_BCAST && o->result == TA_STATUS_OK) {
    if (o->coll_poison) {
      if (o->start_status == TA_STATUS_OK)
        op_fail_propagated(o, (const char *)o->tmp, (size_t)-o->hdr_recv[7], (int)o->hdr_recv[0]);
    } else if (o->start_status == TA_STATUS_OK && o->tmp_out) {
      const ta_view *out = (o->kind == K_BCAST || o->in_place || o->nviews == 1) ? &o->views[0] : &o->views[1];
      int need = o->kind != K_REDUCE || o->is_root;
      if (need && !(o->kind == K_BCAST && o->is_root)) strided_copy(out, o->tmp_out, 0, 0);
    }
  }
}

/* The head(s) of a channel that can go. */
static void chan_advance(chan *ch, oplist *done) {
  ta_mpi_comm *c = NULL;
  while (ch->head && ch->head->started) {
    op *o = ch->head;
    c = o->comm;
    if (ch->cls == C_RECV) {
      if (c->simulated) {
        chan_pop(ch);
        o->posted = 1;
        c->stats.messages_received++;
        c->stats.bytes_received += o->count * o->esz;
        done_push(done, o);
        continue;
      }
      if (!ch->mhead) break;
      msg *m = ch->mhead;
      ch->mhead = m->next;
      if (!ch->mhead) ch->mtail = NULL;
      chan_pop(ch);
      o->posted = 1;
      E.recv_waiting--;
      post_recv(o, m, done);
      /* the next receive waits for a message, if it has started */
      if (ch->head && ch->head->started) E.recv_waiting++;
      continue;
    }
    if (ch->cls == C_COLL) {
      if (c->simulated) {
        chan_pop(ch);
        o->posted = 1;
        c->stats.collectives++;
        done_push(done, o);
        continue;
      }
      if (o->phase != 0) break; /* its header is in flight: the next one waits */
      if (post_coll_header(o) == 0) break;
      /* the header could not be posted: the operation failed */
      chan_pop(ch);
      o->posted = 1;
      if (o->nreqs_left == 0) done_push(done, o);
      continue;
    }
    chan_pop(ch);
    o->posted = 1;
    post_send(o, done);
  }
  if (c && !ch->head && !ch->mhead) chan_drop_if_empty(c, ch);
}

static void finish_ops(oplist *done);

/* One step of the engine. Returns 1 if anything happened. */
static int engine_step(void) {
  oplist done = {NULL, NULL};
  int progressed = 0;
  pthread_mutex_lock(&E.mu);
  op *in = E.inbox_head;
  E.inbox_head = E.inbox_tail = NULL;
  for (op *o = in; o;) {
    op *nx = o->inext;
    progressed = 1;
    o->started = 1;
    /* the views of the granted accesses */
    if (o->start_status == TA_STATUS_OK && !o->comm->simulated) {
      ta_view vs[2];
      size_t cnt = 0;
      ta_status st = ta_token_views(o->token, vs, 2, &cnt);
      if (st != TA_STATUS_OK) {
        o->start_status = st;
      } else {
        o->nviews = (int)cnt;
        for (size_t i = 0; i < cnt; i++) {
          o->views[i] = vs[i];
          o->ext[i] = malloc((vs[i].rank ? vs[i].rank : 1) * sizeof(size_t));
          o->str[i] = malloc((vs[i].rank ? vs[i].rank : 1) * sizeof(ptrdiff_t));
          memcpy(o->ext[i], vs[i].extents, vs[i].rank * sizeof(size_t));
          memcpy(o->str[i], vs[i].strides, vs[i].rank * sizeof(ptrdiff_t));
          o->views[i].extents = o->ext[i];
          o->views[i].strides = o->str[i];
        }
      }
    }
    if (o->start_status != TA_STATUS_OK && o->kind != K_RECV && !o->comm->simulated) {
      /* the error to send in place of the data */
      make_error_blob(o, o->kind == K_SEND ? "the sent tensor is poisoned" : "the input is poisoned");
    }
    if (o->ch->head == o && o->kind == K_RECV && !o->comm->simulated) E.recv_waiting++;
    chan_advance(o->ch, &done);
    o = nx;
  }
  pthread_mutex_unlock(&E.mu);
  finish_ops(&done);
  return progressed;
}

/* Probe and test (E.mu held). Returns 1 if anything happened. */
static int engine_mpi(oplist *done);

static ta_mpi_comm **comms;
static size_t ncomms, comms_cap;

/* The last request of `o` completed. A collective whose header completed
 * goes to `hdrs`, linked through `inext` (`next` links its channel), and
 * its phase 2 is posted after the requests are compacted. */
static void op_requests_done(op *o, oplist *done, oplist *hdrs) {
  if (o->kind >= K_BCAST && o->phase == 1) {
    o->inext = NULL;
    if (hdrs->tail) hdrs->tail->inext = o; else hdrs->head = o;
    hdrs->tail = o;
    return;
  }
  complete_op(o);
  done_push(done, o);
}

static int engine_mpi(oplist *done) {
  int progressed = 0;
  oplist hdrs = {NULL, NULL};
  if (E.recv_waiting > 0) {
    for (size_t i = 0; i < ncomms; i++) {
      ta_mpi_comm *c = comms[i];
      if (c->simulated) continue;
      for (;;) {
        int flag = 0;
        MPI_Message mh;
        MPI_Status s;
        if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &flag, &mh, &s) != MPI_SUCCESS || !flag) break;
        progressed = 1;
        msg *m = calloc(1, sizeof *m);
        m->handle = mh;
        MPI_Get_elements_x(&s, MPI_BYTE, &m->bytes);
        m->poison = s.MPI_TAG & 1;
        m->dtype = (s.MPI_TAG >> 1) & ((1 << DT_BITS) - 1);
        m->matched_at = MPI_Wtime();
        chan *ch = chan_get(c, C_RECV, s.MPI_SOURCE, s.MPI_TAG >> TAG_SHIFT, 1);
        if (ch->mtail) ch->mtail->next = m; else ch->mhead = m;
        ch->mtail = m;
        chan_advance(ch, done);
      }
    }
  }
  if (E.nreq > 0) {
    int outcount = 0;
    int *idx = malloc((size_t)E.nreq * sizeof *idx);
    MPI_Status *st = malloc((size_t)E.nreq * sizeof *st);
    int rc = MPI_Testsome(E.nreq, E.reqs, &outcount, idx, st);
    if (outcount == MPI_UNDEFINED) outcount = 0;
    for (int i = 0; i < outcount; i++) {
      op *o = E.req_op[idx[i]];
      int err = rc == MPI_ERR_IN_STATUS ? st[i].MPI_ERROR : MPI_SUCCESS;
      if (err != MPI_SUCCESS) op_mpi_fail(o, o->kind == K_SEND ? "MPI_Isend" : o->kind == K_RECV ? "MPI_Imrecv" : "the collective", err);
      E.req_op[idx[i]] = NULL;
      if (--o->nreqs_left == 0) op_requests_done(o, done, &hdrs);
      progressed = 1;
    }
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      /* the whole call failed: fail every operation in flight */
      for (int i = 0; i < E.nreq; i++) {
        op *o = E.req_op[i];
        if (!o) continue;
        op_mpi_fail(o, "MPI_Testsome", rc);
        E.req_op[i] = NULL;
        if (--o->nreqs_left == 0) op_requests_done(o, done, &hdrs);
      }
    }
    /* compact */
    int j = 0;
    for (int i = 0; i < E.nreq; i++)
      if (E.req_op[i]) { E.reqs[j] = E.reqs[i]; E.req_op[j] = E.req_op[i]; j++; }
    E.nreq = j;
    free(idx);
    free(st);
  }
  /* collectives whose header completed: phase 2, then the next collective */
  for (op *o = hdrs.head; o;) {
    op *nx = o->inext;
    chan *ch = o->ch;
    post_coll_phase2(o);
    chan_pop(ch); /* o is its head */
    o->posted = 1;
    if (o->nreqs_left == 0) {
      complete_op(o);
      done_push(done, o);
    }
    if (ch->head) chan_advance(ch, done); /* drops the channel if it empties */
    else chan_drop_if_empty(o->comm, ch);
    o = nx;
  }
  return progressed;
}

static void op_free(op *o) {
  for (int i = 0; i < o->ntypes; i++) MPI_Type_free(&o->types[i]);
  for (int i = 0; i < 2; i++) { free(o->ext[i]); free(o->str[i]); }
  if (o->tmp_out != o->tmp) free(o->tmp_out);
  free(o->tmp);
  free(o->errblob);
  free(o->errmsg);
  ta_error_free(o->propagated);
  free(o->m);
  free(o);
}

static void finish_ops(oplist *done) {
  for (op *o = done->head; o;) {
    op *nx = o->next;
    ta_status st = o->result;
    if (st != TA_STATUS_OK && o->finish_status != TA_STATUS_OK) st = o->finish_status;
    if (st != TA_STATUS_OK && o->propagated)
      ta_token_finish_error(o->token, o->propagated);
    else
      ta_token_finish(o->token, st, st == TA_STATUS_OK ? NULL : o->errmsg ? o->errmsg : o->errbuf);
    if (o->started_ev) ta_event_free(o->started_ev);
    pthread_mutex_lock(&E.mu);
    o->comm->pending--;
    E.pending--;
    pthread_cond_broadcast(&E.idle_cv);
    pthread_mutex_unlock(&E.mu);
    /* types are freed with the lock not needed: MPI calls from the stepper only */
    op_free(o);
    o = nx;
  }
}

static int full_step(void) {
  int p = 0;
  /* one step at a time; a step already running (on another thread, or
   * below us on this one: a completion callback calling ta_mpi_progress)
   * does the work */
  if (pthread_mutex_trylock(&E.step_mu) != 0) return 0;
  p |= engine_step();
  oplist done = {NULL, NULL};
  pthread_mutex_lock(&E.mu);
  p |= engine_mpi(&done);
  pthread_mutex_unlock(&E.mu);
  finish_ops(&done);
  pthread_mutex_unlock(&E.step_mu);
  return p;
}

static void *progress_main(void *arg) {
  (void)arg;
  unsigned idle = 0;
  for (;;) {
    int p = full_step();
    pthread_mutex_lock(&E.mu);
    if (E.stop == 2 || (E.stop && E.pending == 0)) { pthread_mutex_unlock(&E.mu); break; }
    int busy = E.nreq > 0 || E.recv_waiting > 0;
    if (!E.inbox_head && !p) {
      if (!busy) {
        pthread_cond_wait(&E.cv, &E.mu);
        idle = 0;
      } else {
        /* requests in flight: poll, backing off from 2 us to 64 us */
        unsigned us = idle < 5 ? (2u << idle) : 64u;
        idle++;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)us * 1000;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&E.cv, &E.mu, &ts);
      }
    } else {
      idle = 0;
    }
    pthread_mutex_unlock(&E.mu);
  }
  return NULL;
}

static void on_started(ta_status status, void *userdata) {
  op *o = userdata;
  pthread_mutex_lock(&E.mu);
  o->start_status = status;
  o->inext = NULL;
  if (E.inbox_tail) E.inbox_tail->inext = o; else E.inbox_head = o;
  E.inbox_tail = o;
  pthread_cond_signal(&E.cv);
  pthread_mutex_unlock(&E.mu);
}

/* ------------------------------------------------------------------------ */
/* public: init, progress */

/* Stop the progress thread (E.mu held; released and taken again while
 * joining). `how`: 1 once every operation finished, 2 after its current step. */
static void stop_thread(int how) {
  if (!E.thread_running) return;
  E.stop = how;
  pthread_cond_broadcast(&E.cv);
  pthread_t th = E.thread;
  pthread_mutex_unlock(&E.mu);
  pthread_join(th, NULL);
  pthread_mutex_lock(&E.mu);
  E.thread_running = 0;
  E.stop = 0;
}

static int start_thread(void) {
  E.stop = 0;
  if (pthread_create(&E.thread, NULL, progress_main, NULL) != 0) return -1;
  E.thread_running = 1;
  return 0;
}

ta_status ta_mpi_init(uint32_t flags) {
  int init = 0, fin = 0, level = 0;
  pthread_mutex_lock(&E.mu);
  if (E.initialised) { pthread_mutex_unlock(&E.mu); return TA_STATUS_OK; }
  MPI_Initialized(&init);
  if (init) MPI_Finalized(&fin);
  if (!init || fin) { pthread_mutex_unlock(&E.mu); return fail(TA_STATUS_UNSUPPORTED, "ta_mpi_init: MPI is not initialised"); }
  MPI_Query_thread(&level);
  if (level == MPI_THREAD_SINGLE) {
    pthread_mutex_unlock(&E.mu);
    return fail(TA_STATUS_UNSUPPORTED, "ta_mpi_init: MPI was initialised with MPI_THREAD_SINGLE; "
                                       "FUNNELED or SERIALIZED with TA_MPI_MANUAL_PROGRESS, or MULTIPLE, is needed");
  }
  if (level != MPI_THREAD_MULTIPLE && !(flags & TA_MPI_MANUAL_PROGRESS)) {
    pthread_mutex_unlock(&E.mu);
    return fail(TA_STATUS_UNSUPPORTED, "ta_mpi_init: the progress thread needs MPI_THREAD_MULTIPLE "
                                       "(MPI provides a lower level); pass TA_MPI_MANUAL_PROGRESS");
  }
  int flag = 0, *ub = NULL;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  E.tag_ub = (flag && ub) ? *ub : 32767;
  const char *fault = getenv("TA_MPI_TEST_INVALID_RANK");
  E.fault_rank = fault && *fault && strcmp(fault, "0") != 0;
  int manual = (flags & TA_MPI_MANUAL_PROGRESS) != 0;
  if (manual && E.thread_running && pthread_equal(pthread_self(), E.thread)) {
    E.tag_ub = 0;
    E.fault_rank = 0;
    pthread_mutex_unlock(&E.mu);
    return fail(TA_STATUS_INVALID_ARGUMENT, "ta_mpi_init: called from the library's progress thread "
                                            "(a completion callback), which manual progress stops");
  }
  /* a progress thread started for simulated communicators: with manual
   * progress, no library thread may call MPI, so it stops here (their
   * operations then progress through ta_mpi_progress, too) */
  if (manual) stop_thread(2);
  E.manual = manual;
  if (!manual && !E.thread_running && start_thread() != 0) {
    E.tag_ub = 0;
    E.fault_rank = 0;
    pthread_mutex_unlock(&E.mu);
    return fail(TA_STATUS_INTERNAL, "ta_mpi_init: cannot start the progress thread");
  }
  E.initialised = 1;
  pthread_mutex_unlock(&E.mu);
  return TA_STATUS_OK;
}

ta_status ta_mpi_progress(size_t *pending_out) {
  if (!E.initialised && !E.thread_running)
    return fail(TA_STATUS_INVALID_ARGUMENT, "ta_mpi_progress: ta_mpi_init was not called");
  if (E.manual) full_step();
  if (pending_out) {
    pthread_mutex_lock(&E.mu);
    *pending_out = E.pending;
    pthread_mutex_unlock(&E.mu);
  }
  return TA_STATUS_OK;
}

static void idle_pause(void) {
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
}

ta_status ta_mpi_wait(const ta_event *event) {
  if (!E.initialised || !E.manual) return ta_event_wait(event, TA_WAIT_FOREVER);
  for (;;) {
    ta_status st = ta_event_poll(event);
    if (st != TA_STATUS_PENDING) return st;
    if (!full_step()) idle_pause();
  }
}

/* Wait until `c` (or everything, c == NULL) has no pending operation. */
static void drain(ta_mpi_comm *c) {
  for (;;) {
    pthread_mutex_lock(&E.mu);
    size_t p = c ? c->pending : E.pending;
    if (p == 0) { pthread_mutex_unlock(&E.mu); return; }
    if (!E.manual) {
      pthread_cond_wait(&E.idle_cv, &E.mu);
      pthread_mutex_unlock(&E.mu);
    } else {
      pthread_mutex_unlock(&E.mu);
      if (!full_step()) idle_pause();
    }
  }
}

ta_status ta_mpi_finalize(void) {
  if (!E.initialised && !E.thread_running) return TA_STATUS_OK;
  drain(NULL);
  while (ncomms) ta_mpi_comm_free(comms[ncomms - 1]);
  pthread_mutex_lock(&E.mu);
  stop_thread(1);
  free(E.reqs); free(E.req_op);
  E.reqs = NULL; E.req_op = NULL; E.nreq = E.req_cap = 0;
  free(comms); comms = NULL; comms_cap = 0;
  E.initialised = 0;
  E.manual = 0;
  E.tag_ub = 0;
  E.fault_rank = 0;
  pthread_mutex_unlock(&E.mu);
  return TA_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* communicators */

static ta_status comm_register(ta_mpi_comm *c, ta_mpi_comm **out) {
  c->magic = COMM_LIVE;
  pthread_mutex_lock(&E.mu);
  if (ncomms == comms_cap) {
    size_t cap = comms_cap ? 2 * comms_cap : 8;
    ta_mpi_comm **n = realloc(comms, cap * sizeof *n);
    if (!n) { pthread_mutex_unlock(&E.mu); return TA_STATUS_OUT_OF_MEMORY; }
    comms = n;
    comms_cap = cap;
  }
  comms[ncomms++] = c;
  pthread_mutex_unlock(&E.mu);
  *out = c;
  return TA_STATUS_OK;
}

ta_status ta_mpi_comm_new(MPI_Comm comm, ta_mpi_comm **comm_out) {
  if (!comm_out) return fail(TA_STATUS_NULL_POINTER, "ta_mpi_comm_new: argument `comm_out` is NULL");
  if (!E.initialised) return fail(TA_STATUS_INVALID_ARGUMENT, "ta_mpi_comm_new: ta_mpi_init was not called");
  if (comm == MPI_COMM_NULL) return fail(TA_STATUS_INVALID_ARGUMENT, "ta_mpi_comm_new: MPI_COMM_NULL");
  ta_mpi_comm *c = calloc(1, sizeof *c);
  if (c) c->buckets = calloc(NBUCKETS, sizeof *c->buckets);
  if (!c || !c->buckets) { free(c); return TA_STATUS_OUT_OF_MEMORY; }
  int rc = MPI_Comm_dup(comm, &c->comm);
  if (rc != MPI_SUCCESS) {
    char s[MPI_MAX_ERROR_STRING + 1];
    mpi_err_text(rc, s, sizeof s);
    free(c->buckets);
    free(c);
    return fail(TA_STATUS_INVALID_ARGUMENT, "ta_mpi_comm_new: MPI_Comm_dup failed: %s", s);
  }
  MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  return comm_register(c, comm_out);
}

ta_status ta_mpi_comm_new_f(MPI_Fint comm, ta_mpi_comm **comm_out) {
  return ta_mpi_comm_new(MPI_Comm_f2c(comm), comm_out);
}

ta_status ta_mpi_comm_new_simulated(int size, int rank, ta_mpi_comm **comm_out) {
  if (!comm_out) return fail(TA_STATUS_NULL_POINTER, "ta_mpi_comm_new_simulated: argument `comm_out` is NULL");
  if (size < 1 || rank < 0 || rank >= size)
    return fail(TA_STATUS_INVALID_ARGUMENT, "ta_mpi_comm_new_simulated: rank %d is not in [0, %d)", rank, size);
  pthread_mutex_lock(&E.mu);
  if (!E.initialised && !E.thread_running) {
    /* without ta_mpi_init: a progress thread that makes no MPI call (there
     * are only simulated communicators until ta_mpi_init, which checks MPI
     * and takes this thread over, or stops it for manual progress) */
    E.manual = 0;
    if (start_thread() != 0) {
      pthread_mutex_unlock(&E.mu);
      return fail(TA_STATUS_INTERNAL, "ta_mpi_comm_new_simulated: cannot start the progress thread");
    }
  }
  pthread_mutex_unlock(&E.mu);
  ta_mpi_comm *c = calloc(1, sizeof *c);
  if (c) c->buckets = calloc(NBUCKETS, sizeof *c->buckets);
  if (!c || !c->buckets) { free(c); return TA_STATUS_OUT_OF_MEMORY; }
  c->comm = MPI_COMM_NULL;
  c->simulated = 1;
  c->rank = rank;
  c->size = size;
  return comm_register(c, comm_out);
}

/* OK for a live communicator; a status naming what is wrong otherwise. */
static ta_status comm_valid(const ta_mpi_comm *c, const char *who) {
  if (!c) return fail(TA_STATUS_NULL_HANDLE, "%s: argument `comm` is NULL", who);
  if (c->magic == COMM_DEAD) return fail(TA_STATUS_STALE_HANDLE, "%s: the communicator was freed", who);
  if (c->magic != COMM_LIVE) return fail(TA_STATUS_WRONG_HANDLE_TYPE, "%s: `comm` is not a ta_mpi_comm", who);
  return TA_STATUS_OK;
}

ta_status ta_mpi_comm_free(ta_mpi_comm *c) {
  if (!c) return TA_STATUS_OK;
  if (c->magic == COMM_DEAD) return fail(TA_STATUS_DOUBLE_FREE, "ta_mpi_comm_free: the communicator was freed already");
  ta_status st = comm_valid(c, "ta_mpi_comm_free");
  if (st) return st;
  drain(c);
  pthread_mutex_lock(&E.mu);
  for (size_t i = 0; i < ncomms; i++)
    if (comms[i] == c) { comms[i] = comms[--ncomms]; break; }
  /* stashed messages nobody received */
  for (size_t b = 0; b < NBUCKETS; b++) {
    for (chan *ch = c->buckets[b]; ch;) {
      chan *nx = ch->hnext;
      for (msg *m = ch->mhead; m;) { msg *mn = m->next; free(m); m = mn; }
      free(ch);
      ch = nx;
    }
  }
  free(c->buckets);
  c->buckets = NULL;
  c->magic = COMM_DEAD;
  pthread_mutex_unlock(&E.mu);
  if (!c->simulated) MPI_Comm_free(&c->comm);
  free(c->trace);
  c->trace = NULL;
  return TA_STATUS_OK;
}

ta_status ta_mpi_comm_rank(const ta_mpi_comm *c, int *rank_out) {
  ta_status st = comm_valid(c, "ta_mpi_comm_rank");
  if (st) return st;
  if (!rank_out) return TA_STATUS_NULL_POINTER;
  *rank_out = c->rank;
  return TA_STATUS_OK;
}

ta_status ta_mpi_comm_size(const ta_mpi_comm *c, int *size_out) {
  ta_status st = comm_valid(c, "ta_mpi_comm_size");
  if (st) return st;
  if (!size_out) return TA_STATUS_NULL_POINTER;
  *size_out = c->size;
  return TA_STATUS_OK;
}

ta_status ta_mpi_comm_stats(const ta_mpi_comm *c, ta_mpi_stats *stats_out) {
  ta_status st = comm_valid(c, "ta_mpi_comm_stats");
  if (st) return st;
  if (!stats_out) return TA_STATUS_NULL_POINTER;
  pthread_mutex_lock(&E.mu);
  *stats_out = c->stats;
  pthread_mutex_unlock(&E.mu);
  return TA_STATUS_OK;
}

ta_status ta_mpi_comm_trace(ta_mpi_comm *c, int enable, double *intervals, size_t cap, size_t *count_out) {
  ta_status st = comm_valid(c, "ta_mpi_comm_trace");
  if (st) return st;
  pthread_mutex_lock(&E.mu);
  c->tracing = enable;
  size_t n = c->ntrace / 2;
  if (count_out) *count_out = n;
  if (intervals) memcpy(intervals, c->trace, (n < cap ? n : cap) * 2 * sizeof(double));
  pthread_mutex_unlock(&E.mu);
  return TA_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* submission */

static ta_status tensor_shape(const ta_tensor *t, ta_dtype *dt, size_t *count, size_t *rank,
                              size_t *ext, size_t cap) {
  ta_status st = ta_tensor_dtype(t, dt);
  if (st != TA_STATUS_OK) return st;
  st = ta_tensor_rank(t, rank);
  if (st != TA_STATUS_OK) return st;
  if (*rank > cap) return fail(TA_STATUS_UNSUPPORTED, "tensors of rank above %zu are not supported", cap);
  st = ta_tensor_extents(t, ext, cap);
  if (st != TA_STATUS_OK) return st;
  size_t n = 1;
  for (size_t k = 0; k < *rank; k++) n *= ext[k];
  *count = n;
  return TA_STATUS_OK;
}

/* Enrol `o` with these accesses: channel, then the core. */
static ta_status submit(op *o, ta_mpi_comm *c, int cls, int peer, int tag, const ta_access *acc,
                        size_t nacc, const ta_submit *opts, ta_event **event_out, ta_error **error) {
  o->comm = c;
  ta_event *started = NULL;
  pthread_mutex_lock(&E.mu);
  chan *ch = chan_get(c, cls, peer, tag, 1);
  if (!ch) { pthread_mutex_unlock(&E.mu); free(o); return TA_STATUS_OUT_OF_MEMORY; }
  o->ch = ch;
  ta_status st = ta_external_submit(acc, nacc, KIND_NAME[o->kind], opts, &o->token, &started, event_out, error);
  if (st != TA_STATUS_OK) {
    chan_drop_if_empty(c, ch);
    pthread_mutex_unlock(&E.mu);
    free(o);
    return st;
  }
  chan_push(ch, o);
  o->started_ev = started;
  c->pending++;
  E.pending++;
  pthread_mutex_unlock(&E.mu);
  /* may run on_started right here */
  ta_event_on_complete(started, on_started, o);
  return TA_STATUS_OK;
}

static op *op_new(enum kind k, ta_mpi_comm *c) {
  op *o = calloc(1, sizeof *o);
  if (o) { o->kind = k; o->comm = c; }
  return o;
}

static ta_status check_comm(const ta_mpi_comm *c, const char *who) {
  ta_status st = comm_valid(c, who);
  if (st) return st;
  if (!E.initialised && !(c->simulated && E.thread_running))
    return fail(TA_STATUS_INVALID_ARGUMENT, "%s: ta_mpi_init was not called", who);
  return TA_STATUS_OK;
}

static ta_status check_peer(const ta_mpi_comm *c, int peer, int tag, const char *who, const char *what) {
  if (peer < 0 || peer >= c->size)
    return fail(TA_STATUS_INVALID_ARGUMENT, "%s: %s %d is not a rank of the communicator (size %d)", who, what, peer, c->size);
  if (tag < 0 || tag > ta_mpi_tag_max())
    return fail(TA_STATUS_INVALID_ARGUMENT, "%s: tag %d is not in [0, %d]", who, tag, ta_mpi_tag_max());
  return TA_STATUS_OK;
}

#define MAXRANK 16

ta_status ta_mpi_send(const ta_tensor *t, int dest, int tag, const ta_mpi_comm *comm,
                      const ta_submit *opts, ta_event **event_out, ta_error **error) {
  if (error) *error = NULL;
  ta_status st = check_comm(comm, "ta_mpi_send");
  if (st) return st;
  if ((st = check_peer(comm, dest, tag, "ta_mpi_send", "dest"))) return st;
  ta_dtype dt;
  size_t n, r, ext[MAXRANK];
  if ((st = tensor_shape(t, &dt, &n, &r, ext, MAXRANK))) return st;
  op *o = op_new(K_SEND, (ta_mpi_comm *)comm);
  if (!o) return TA_STATUS_OUT_OF_MEMORY;
  o->peer = dest; o->tag = tag; o->dtype = dt; o->esz = dtype_size(dt); o->count = n;
  ta_access acc = {t, TA_MODE_READ};
  return submit(o, (ta_mpi_comm *)comm, C_SEND, dest, tag, &acc, 1, opts, event_out, error);
}

/* Construct an unconstructed tensor now, with `rank` `extents`, zero-filled. */
static ta_status construct(const ta_tensor *t, size_t rank, const size_t *extents, const ta_submit *opts,
                           ta_error **error) {
  static const char zero[16];
  ptrdiff_t zs[MAXRANK] = {0};
  if (rank > MAXRANK) return fail(TA_STATUS_UNSUPPORTED, "rank above %d", MAXRANK);
  ta_submit so = {0};
  if (opts) so.runtime = opts->runtime;
  return ta_copy_in(t, zero, rank, extents, zs, &so, NULL, error);
}

static int unconstructed(const ta_tensor *t) {
  size_t r;
  return ta_tensor_rank(t, &r) == TA_STATUS_UNCONSTRUCTED;
}

/* Before constructing the unconstructed `out` (a fill enrolled at once):
 * the checks the submission would otherwise fail after it, so that a
 * refused call enrolls nothing (host tensors, a writable output). */
static ta_status check_before_construct(const char *who, const ta_tensor *out, const ta_tensor *in) {
  const ta_tensor *ts[2] = {out, in};
  for (int i = 0; i < 2; i++) {
    if (!ts[i]) continue;
    ta_domain d = TA_DOMAIN_HOST;
    ta_status st = ta_tensor_domain(ts[i], &d);
    if (st != TA_STATUS_OK) return st;
    if (d != TA_DOMAIN_HOST)
      return fail(TA_STATUS_DOMAIN_MISMATCH, "%s: MPI operations take host tensors; the %s lives on device %d",
                  who, i == 0 ? "output" : "input", (int)d);
  }
  int32_t ro = 0;
  ta_status st = ta_tensor_is_read_only(out, &ro);
  if (st != TA_STATUS_OK) return st;
  if (ro) return fail(TA_STATUS_READ_ONLY, "%s: the output is read-only", who);
  return TA_STATUS_OK;
}

ta_status ta_mpi_recv(const ta_tensor *t, int src, int tag, size_t rank, const size_t *extents,
                      const ta_mpi_comm *comm, const ta_submit *opts, ta_event **event_out,
                      ta_error **error) {
  if (error) *error = NULL;
  ta_status st = check_comm(comm, "ta_mpi_recv");
  if (st) return st;
  if ((st = check_peer(comm, src, tag, "ta_mpi_recv", "src"))) return st;
  if (unconstructed(t)) {
    if (rank > 0 && !extents) return fail(TA_STATUS_NULL_POINTER, "ta_mpi_recv: `extents` is NULL");
    if (rank > MAXRANK) return fail(TA_STATUS_UNSUPPORTED, "ta_mpi_recv: rank above %d", MAXRANK);
    if ((st = check_before_construct("ta_mpi_recv", t, NULL))) return st;
    if ((st = construct(t, rank, extents, opts, error))) return st;
  }
  ta_dtype dt;
  size_t n, r, ext[MAXRANK];
  if ((st = tensor_shape(t, &dt, &n, &r, ext, MAXRANK))) return st;
  if (extents && (r != rank || memcmp(ext, extents, r * sizeof *ext) != 0))
    return fail(TA_STATUS_SHAPE_MISMATCH, "ta_mpi_recv: the tensor's shape differs from the given extents");
  op *o = op_new(K_RECV, (ta_mpi_comm *)comm);
  if (!o) return TA_STATUS_OUT_OF_MEMORY;
  o->peer = src; o->tag = tag; o->dtype = dt; o->esz = dtype_size(dt); o->count = n;
  ta_access acc = {t, TA_MODE_WRITE};
  return submit(o, (ta_mpi_comm *)comm, C_RECV, src, tag, &acc, 1, opts, event_out, error);
}

ta_status ta_mpi_bcast(const ta_tensor *t, int root, const ta_mpi_comm *comm, const ta_submit *opts,
                       ta_event **event_out, ta_error **error) {
  if (error) *error = NULL;
  ta_status st = check_comm(comm, "ta_mpi_bcast");
  if (st) return st;
  if ((st = check_peer(comm, root, 0, "ta_mpi_bcast", "root"))) return st;
  ta_dtype dt;
  size_t n, r, ext[MAXRANK];
  if ((st = tensor_shape(t, &dt, &n, &r, ext, MAXRANK))) return st;
  op *o = op_new(K_BCAST, (ta_mpi_comm *)comm);
  if (!o) return TA_STATUS_OUT_OF_MEMORY;
  o->root = root; o->is_root = comm->rank == root;
  o->dtype = dt; o->esz = dtype_size(dt); o->count = n;
  ta_access acc = {t, o->is_root ? TA_MODE_READ : TA_MODE_WRITE};
  return submit(o, (ta_mpi_comm *)comm, C_COLL, 0, 0, &acc, 1, opts, event_out, error);
}

static ta_status reduce_common(enum kind k, const ta_tensor *out, const ta_tensor *in, ta_mpi_op mop,
                               int root, const ta_mpi_comm *comm, const ta_submit *opts,
                               ta_event **event_out, ta_error **error) {
  const char *who = KIND_NAME[k];
  if (error) *error = NULL;
  ta_status st = check_comm(comm, who);
  if (st) return st;
  if (k == K_REDUCE && (st = check_peer(comm, root, 0, who, "root"))) return st;
  if (!in) return fail(TA_STATUS_NULL_HANDLE, "%s: argument `input` is NULL", who);
  if (mop > TA_MPI_MIN) return fail(TA_STATUS_INVALID_ARGUMENT, "%s: %u is not a ta_mpi_op", who, mop);
  int is_root = k == K_ALLREDUCE || comm->rank == root;
  ta_dtype dt;
  size_t n, r, ext[MAXRANK];
  if ((st = tensor_shape(in, &dt, &n, &r, ext, MAXRANK))) return st;
  if (mop != TA_MPI_SUM && is_complex(dt))
    return fail(TA_STATUS_DTYPE_MISMATCH, "%s: max and min need a real dtype, not %s", who, dtype_name((int)dt));
  ta_access acc[2];
  size_t nacc;
  int in_place = 0;
  if (!is_root || out == NULL) {
    if (is_root) { in_place = 1; acc[0] = (ta_access){in, TA_MODE_UPDATE}; }
    else acc[0] = (ta_access){in, TA_MODE_READ};
    nacc = 1;
  } else {
    /* every check before the construction of an unconstructed output */
    ta_dtype odt;
    if ((st = ta_tensor_dtype(out, &odt))) return st;
    if (odt != dt) return fail(TA_STATUS_DTYPE_MISMATCH, "%s: output is %s, input %s", who, dtype_name((int)odt), dtype_name((int)dt));
    if (unconstructed(out)) {
      if ((st = check_before_construct(who, out, in))) return st;
      if ((st = construct(out, r, ext, opts, error))) return st;
    }
    size_t on, orr, oext[MAXRANK];
    if ((st = tensor_shape(out, &odt, &on, &orr, oext, MAXRANK))) return st;
    if (on != n) return fail(TA_STATUS_SHAPE_MISMATCH, "%s: output has %zu elements, input %zu", who, on, n);
    acc[0] = (ta_access){in, TA_MODE_READ};
    acc[1] = (ta_access){out, TA_MODE_WRITE};
    nacc = 2;
  }
  op *o = op_new(k, (ta_mpi_comm *)comm);
  if (!o) return TA_STATUS_OUT_OF_MEMORY;
  o->root = root; o->is_root = is_root; o->mop = (int)mop; o->in_place = in_place;
  o->dtype = dt; o->esz = dtype_size(dt); o->count = n;
  return submit(o, (ta_mpi_comm *)comm, C_COLL, 0, 0, acc, nacc, opts, event_out, error);
}

ta_status ta_mpi_reduce(const ta_tensor *out, const ta_tensor *in, ta_mpi_op op_, int root,
                        const ta_mpi_comm *comm, const ta_submit *opts, ta_event **event_out,
                        ta_error **error) {
  return reduce_common(K_REDUCE, out, in, op_, root, comm, opts, event_out, error);
}

ta_status ta_mpi_allreduce(const ta_tensor *out, const ta_tensor *in, ta_mpi_op op_,
                           const ta_mpi_comm *comm, const ta_submit *opts, ta_event **event_out,
                           ta_error **error) {
  return reduce_common(K_ALLREDUCE, out, in, op_, 0, comm, opts, event_out, error);
}

ta_status ta_mpi_allgather(const ta_tensor *out, const ta_tensor *in, const ta_mpi_comm *comm,
                           const ta_submit *opts, ta_event **event_out, ta_error **error) {
  if (error) *error = NULL;
  ta_status st = check_comm(comm, "ta_mpi_allgather");
  if (st) return st;
  if (!in || !out) return fail(TA_STATUS_NULL_HANDLE, "ta_mpi_allgather: `input` or `output` is NULL");
  ta_dtype dt;
  size_t n, r, ext[MAXRANK];
  if ((st = tensor_shape(in, &dt, &n, &r, ext, MAXRANK))) return st;
  /* every check before the construction of an unconstructed output */
  ta_dtype odt;
  if ((st = ta_tensor_dtype(out, &odt))) return st;
  if (odt != dt) return fail(TA_STATUS_DTYPE_MISMATCH, "ta_mpi_allgather: output is %s, input %s", dtype_name((int)odt), dtype_name((int)dt));
  if (unconstructed(out)) {
    if (r + 1 > MAXRANK) return fail(TA_STATUS_UNSUPPORTED, "ta_mpi_allgather: rank above %d", MAXRANK);
    if ((st = check_before_construct("ta_mpi_allgather", out, in))) return st;
    size_t oe[MAXRANK];
    oe[0] = (size_t)comm->size;
    memcpy(oe + 1, ext, r * sizeof *ext);
    if ((st = construct(out, r + 1, oe, opts, error))) return st;
  }
  size_t on, orr, oext[MAXRANK];
  if ((st = tensor_shape(out, &odt, &on, &orr, oext, MAXRANK))) return st;
  if (on != n * (size_t)comm->size)
    return fail(TA_STATUS_SHAPE_MISMATCH, "ta_mpi_allgather: output has %zu elements, not %d x %zu", on, comm->size, n);
  op *o = op_new(K_ALLGATHER, (ta_mpi_comm *)comm);
  if (!o) return TA_STATUS_OUT_OF_MEMORY;
  o->dtype = dt; o->esz = dtype_size(dt); o->count = n; o->out_count = on;
  ta_access acc[2] = {{in, TA_MODE_READ}, {out, TA_MODE_WRITE}};
  return submit(o, (ta_mpi_comm *)comm, C_COLL, 0, 0, acc, 2, opts, event_out, error);
}
