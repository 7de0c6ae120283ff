#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <tensorasync.h>
#include "shim.h"
struct ta_token {
  pthread_mutex_t mu; pthread_cond_t cv; int finished; ta_status st; char msg[512];
  ta_view v[2]; size_t n; size_t ext[2][16]; ptrdiff_t str[2][16];
  void (*cb)(ta_status, void *); void *ud;
};
static ta_status k(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
  ta_token *t = ud;
  t->n = n;
  for (size_t i = 0; i < n; i++) {
    t->v[i] = v[i];
    memcpy(t->ext[i], v[i].extents, v[i].rank * sizeof(size_t));
    memcpy(t->str[i], v[i].strides, v[i].rank * sizeof(ptrdiff_t));
    t->v[i].extents = t->ext[i]; t->v[i].strides = t->str[i];
  }
  t->cb(TA_STATUS_OK, t->ud);
  pthread_mutex_lock(&t->mu);
  while (!t->finished) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  ta_status st = t->st;
  if (st) ta_kernel_set_error(ctx, t->msg);
  free(t);
  return st;
}
ta_status shim_external_submit(const ta_access *acc, size_t n, const char *name, const ta_submit *opts,
                               ta_token **token_out, void (*cb)(ta_status, void *), void *ud,
                               ta_event **event_out, ta_error **error) {
  ta_token *t = calloc(1, sizeof *t);
  pthread_mutex_init(&t->mu, NULL); pthread_cond_init(&t->cv, NULL);
  t->cb = cb; t->ud = ud;
  *token_out = t;
  ta_status st = ta_kernel_submit(k, t, name, acc, n, opts, event_out, error);
  if (st) free(t);
  return st;
}
ta_status ta_token_views(const ta_token *t, ta_view *v, size_t cap, size_t *count) {
  for (size_t i = 0; i < t->n && i < cap; i++) v[i] = t->v[i];
  *count = t->n;
  return TA_STATUS_OK;
}
ta_status ta_token_finish(ta_token *t, ta_status st, const char *msg) {
  pthread_mutex_lock(&t->mu);
  t->st = st; if (msg) strncpy(t->msg, msg, 511);
  t->finished = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  return TA_STATUS_OK;
}
