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
  void *tmp;            /* packed input, poison text, scratch */
  void *tmp_out;        /* packed output to unpack on completion */
  int flag_send, flag_recv; /* collective poison flag */
  int poisoned_peer;    /* receive: poison message from the peer */
  msg *m;
  ta_status result;
  char errbuf[512];
  double t_post;
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* inbox grew, or stop */
  pthread_cond_t idle_cv; /* an operation finished */
  int initialised, manual, stop;
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
} E = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0,
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

int ta_mpi_tag_max(void) {
  int ub = E.tag_ub;
  if (ub <= 0) {
    int flag = 0, *p = NULL, init = 0;
    MPI_Initialized(&init);
    if (init) MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag);
    ub = (flag && p) ? *p : 32767;
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
    const char *text = o->tmp ? (const char *)o->tmp : "the sent tensor is poisoned";
    rc = MPI_Isend(text, (int)strlen(text) + 1, MPI_CHAR, dest,
                   internal_tag(o->tag, (int)o->dtype, 1), c->comm, &r);
  } else {
    const ta_view *v = &o->views[0];
    if (v->conj && is_complex(v->dtype)) {
      o->tmp = malloc(o->count * o->esz + 1);
      if (!o->tmp) { op_fail(o, "out of memory packing a conjugate view"); done_push(done, o); return; }
      strided_copy(v, o->tmp, 1, 1);
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
    o->tmp = malloc((size_t)m->bytes + 1);
    if (!o->tmp) { op_fail(o, "out of memory"); done_push(done, o); return; }
    rc = MPI_Imrecv(o->tmp, (int)m->bytes, MPI_CHAR, &m->handle, &r);
  } else if ((size_t)m->bytes != want || m->dtype != (int)o->dtype) {
    op_fail(o, "the message from rank %d (tag %d) holds %lld bytes of %s (%lld elements); "
               "the receiving tensor holds %zu elements of %s (%zu bytes)",
            o->peer, o->tag, (long long)m->bytes, dtype_name(m->dtype),
            (long long)(m->bytes / (MPI_Count)(dtype_size((ta_dtype)m->dtype) ? dtype_size((ta_dtype)m->dtype) : 1)),
            o->count, dtype_name((int)o->dtype), want);
    rc = consume(o, m, &r);
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

/* Collective: data in o->tmp / views, poison flag allreduce alongside. */
static void post_coll(op *o, oplist *done) {
  ta_mpi_comm *c = o->comm;
  c->stats.collectives++;
  if (c->simulated) { done_push(done, o); return; }
  o->t_post = MPI_Wtime();
  MPI_Datatype t = mpi_type(o->dtype);
  int poisoned = o->start_status != TA_STATUS_OK;
  size_t n = o->count, esz = o->esz;
  /* input and output buffers, dense */
  const ta_view *in = NULL, *out = NULL;
  void *inbuf = NULL, *outbuf = NULL;
  int nv = o->nviews;
  if (!poisoned) {
    if (o->kind == K_BCAST) {
      in = out = &o->views[0];
    } else if (o->in_place) {
      in = out = &o->views[0];
    } else {
      in = &o->views[0];
      out = nv > 1 ? &o->views[1] : NULL;
    }
  }
  size_t in_bytes = n * esz;
  size_t out_bytes = (o->kind == K_ALLGATHER ? o->out_count : n) * esz;
  int need_out = o->kind == K_ALLGATHER || o->kind == K_ALLREDUCE || o->kind == K_BCAST ||
                 (o->kind == K_REDUCE && o->is_root);
  /* input */
  if (!poisoned && view_dense(in) && !(in->conj && is_complex(in->dtype))) {
    inbuf = in->data;
  } else {
    o->tmp = calloc(1, in_bytes ? in_bytes : 1);
    if (!o->tmp) { op_fail(o, "out of memory"); done_push(done, o); return; }
    if (!poisoned) strided_copy(in, o->tmp, 1, in->conj && is_complex(in->dtype));
    inbuf = o->tmp;
  }
  if (need_out) {
    if (!poisoned && out && view_dense(out) && !(o->kind == K_BCAST && inbuf != out->data)) {
      outbuf = out->data;
    } else if (o->kind == K_BCAST || (o->in_place && inbuf == o->tmp)) {
      outbuf = inbuf;
      if (!poisoned && out) o->tmp_out = outbuf; /* unpack from the packed buffer */
    } else {
      o->tmp_out = calloc(1, out_bytes ? out_bytes : 1);
      if (!o->tmp_out) { op_fail(o, "out of memory"); done_push(done, o); return; }
      outbuf = o->tmp_out;
    }
  }
  o->flag_send = poisoned ? c->rank + 1 : 0;
  MPI_Request r;
  int rc = MPI_Iallreduce(&o->flag_send, &o->flag_recv, 1, MPI_INT, MPI_MAX, c->comm, &r);
  if (rc != MPI_SUCCESS) { op_mpi_fail(o, "MPI_Iallreduce", rc); done_push(done, o); return; }
  add_req(o, r);
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
    add_req(o, r);
    if (n == 0) break;
  }
  if (rc != MPI_SUCCESS) {
    op_mpi_fail(o, call, rc);
    /* requests already posted must still complete before finishing */
    if (o->nreqs_left == 0) done_push(done, o);
  }
}

/* Complete an operation whose requests have all completed. */
static void complete_op(op *o) {
  ta_mpi_comm *c = o->comm;
  if (o->kind == K_SEND || o->kind == K_RECV) {
    double t1 = MPI_Wtime();
    c->stats.message_seconds += t1 - o->t_post;
    trace_add(c, o->t_post, t1);
  }
  if (o->kind == K_RECV && o->poisoned_peer && o->result == TA_STATUS_OK) {
    op_fail(o, "the tensor sent by rank %d (tag %d) is poisoned: %s", o->peer, o->tag, (char *)o->tmp);
  }
  if (o->kind >= K_BCAST && o->result == TA_STATUS_OK) {
    if (o->flag_recv > 0 && o->start_status == TA_STATUS_OK) {
      op_fail(o, "the input on rank %d is poisoned", o->flag_recv - 1);
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
    chan_pop(ch);
    o->posted = 1;
    if (ch->cls == C_SEND) post_send(o, done);
    else post_coll(o, done);
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
    if (o->start_status != TA_STATUS_OK && o->kind == K_SEND) {
      /* the error to send in place of the data */
      ta_error *e = NULL;
      char text[400];
      snprintf(text, sizeof text, "the sent tensor is poisoned");
      if (o->started_ev && ta_event_error(o->started_ev, &e) == TA_STATUS_OK && e) {
        ta_error_message(e, text, sizeof text, NULL);
        ta_error_free(e);
      }
      o->tmp = strdup(text);
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

static int engine_mpi(oplist *done) {
  int progressed = 0;
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
      if (--o->nreqs_left == 0) {
        complete_op(o);
        done_push(done, o);
      }
      progressed = 1;
    }
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      /* the whole call failed: fail every operation in flight */
      for (int i = 0; i < E.nreq; i++) {
        op *o = E.req_op[i];
        if (!o) continue;
        op_mpi_fail(o, "MPI_Testsome", rc);
        E.req_op[i] = NULL;
        if (--o->nreqs_left == 0) done_push(done, o);
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
  return progressed;
}

static void op_free(op *o) {
  for (int i = 0; i < o->ntypes; i++) MPI_Type_free(&o->types[i]);
  for (int i = 0; i < 2; i++) { free(o->ext[i]); free(o->str[i]); }
  if (o->tmp_out != o->tmp) free(o->tmp_out);
  free(o->tmp);
  free(o->m);
  free(o);
}

static void finish_ops(oplist *done) {
  for (op *o = done->head; o;) {
    op *nx = o->next;
    ta_status st = o->result;
    ta_token_finish(o->token, st, st == TA_STATUS_OK ? NULL : o->errbuf);
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
    if (E.stop && E.pending == 0) { pthread_mutex_unlock(&E.mu); break; }
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

ta_status ta_mpi_init(uint32_t flags) {
  int init = 0, fin = 0, level = 0;
  pthread_mutex_lock(&E.mu);
  if (E.initialised) { pthread_mutex_unlock(&E.mu); return TA_STATUS_OK; }
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
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
  E.manual = (flags & TA_MPI_MANUAL_PROGRESS) != 0;
  const char *fault = getenv("TA_MPI_TEST_INVALID_RANK");
  E.fault_rank = fault && *fault && strcmp(fault, "0") != 0;
  E.stop = 0;
  if (!E.manual && pthread_create(&E.thread, NULL, progress_main, NULL) != 0) {
    pthread_mutex_unlock(&E.mu);
    return fail(TA_STATUS_INTERNAL, "ta_mpi_init: cannot start the progress thread");
  }
  E.initialised = 1;
  pthread_mutex_unlock(&E.mu);
  return TA_STATUS_OK;
}

ta_status ta_mpi_progress(size_t *pending_out) {
  if (!E.initialised) return fail(TA_STATUS_INVALID_ARGUMENT, "ta_mpi_progress: ta_mpi_init was not called");
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
  if (!E.initialised) return TA_STATUS_OK;
  drain(NULL);
  while (ncomms) ta_mpi_comm_free(comms[ncomms - 1]);
  pthread_mutex_lock(&E.mu);
  E.stop = 1;
  pthread_cond_broadcast(&E.cv);
  pthread_mutex_unlock(&E.mu);
  if (!E.manual) pthread_join(E.thread, NULL);
  free(E.reqs); free(E.req_op);
  E.reqs = NULL; E.req_op = NULL; E.nreq = E.req_cap = 0;
  free(comms); comms = NULL; comms_cap = 0;
  E.initialised = 0;
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
  if (!E.initialised) {
    /* without MPI: the progress thread makes no MPI call for simulated ranks */
    E.manual = 0;
    E.stop = 0;
    E.tag_ub = 0x7fffffff;
    if (pthread_create(&E.thread, NULL, progress_main, NULL) != 0) {
      pthread_mutex_unlock(&E.mu);
      return fail(TA_STATUS_INTERNAL, "ta_mpi_comm_new_simulated: cannot start the progress thread");
    }
    E.initialised = 1;
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
  if (!E.initialised) return fail(TA_STATUS_INVALID_ARGUMENT, "%s: ta_mpi_init was not called", who);
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

ta_status ta_mpi_recv(const ta_tensor *t, int src, int tag, size_t rank, const size_t *extents,
                      const ta_mpi_comm *comm, const ta_submit *opts, ta_event **event_out,
                      ta_error **error) {
  if (error) *error = NULL;
  ta_status st = check_comm(comm, "ta_mpi_recv");
  if (st) return st;
  if ((st = check_peer(comm, src, tag, "ta_mpi_recv", "src"))) return st;
  if (unconstructed(t)) {
    if (rank > 0 && !extents) return fail(TA_STATUS_NULL_POINTER, "ta_mpi_recv: `extents` is NULL");
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
    if (unconstructed(out) && (st = construct(out, r, ext, opts, error))) return st;
    ta_dtype odt;
    size_t on, orr, oext[MAXRANK];
    if ((st = tensor_shape(out, &odt, &on, &orr, oext, MAXRANK))) return st;
    if (odt != dt) return fail(TA_STATUS_DTYPE_MISMATCH, "%s: output is %s, input %s", who, dtype_name((int)odt), dtype_name((int)dt));
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
  if (unconstructed(out)) {
    if (r + 1 > MAXRANK) return fail(TA_STATUS_UNSUPPORTED, "rank above %d", MAXRANK);
    size_t oe[MAXRANK];
    oe[0] = (size_t)comm->size;
    memcpy(oe + 1, ext, r * sizeof *ext);
    if ((st = construct(out, r + 1, oe, opts, error))) return st;
  }
  ta_dtype odt;
  size_t on, orr, oext[MAXRANK];
  if ((st = tensor_shape(out, &odt, &on, &orr, oext, MAXRANK))) return st;
  if (odt != dt) return fail(TA_STATUS_DTYPE_MISMATCH, "ta_mpi_allgather: output is %s, input %s", dtype_name((int)odt), dtype_name((int)dt));
  if (on != n * (size_t)comm->size)
    return fail(TA_STATUS_SHAPE_MISMATCH, "ta_mpi_allgather: output has %zu elements, not %d x %zu", on, comm->size, n);
  op *o = op_new(K_ALLGATHER, (ta_mpi_comm *)comm);
  if (!o) return TA_STATUS_OUT_OF_MEMORY;
  o->dtype = dt; o->esz = dtype_size(dt); o->count = n; o->out_count = on;
  ta_access acc[2] = {{in, TA_MODE_READ}, {out, TA_MODE_WRITE}};
  return submit(o, (ta_mpi_comm *)comm, C_COLL, 0, 0, acc, 2, opts, event_out, error);
}
