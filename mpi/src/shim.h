/* TEMPORARY: deferred completion emulated with a blocking kernel, until the
 * core's ta_external_submit lands. Not for the final build. */
typedef struct ta_token ta_token;
ta_status shim_external_submit(const ta_access *acc, size_t n, const char *name, const ta_submit *opts,
                               ta_token **token_out, void (*cb)(ta_status, void *), void *ud,
                               ta_event **event_out, ta_error **error);
ta_status ta_token_views(const ta_token *token, ta_view *views_out, size_t cap, size_t *count_out);
ta_status ta_token_finish(ta_token *token, ta_status status, const char *message);
