/*
 * Errors made elsewhere travel as they are (SPEC §2.2: propagated, not
 * re-worded): ta_error_new makes an error object from a status, code,
 * origin and message, and ta_token_finish_error poisons a token's outputs
 * with it.
 *
 *   - refused statuses: OK, PENDING, handle and pointer statuses, unknown
 *     values (TA_STATUS_INVALID_ARGUMENT), and a NULL output;
 *   - an error read back field by field, with NULL strings as empty;
 *   - an external operation finished with it: the output and a dependent
 *     operation's output carry that very error (ta_error_same), with any
 *     status, including KERNEL_FAILED with code 41 (which ta_token_finish
 *     would read as a cancellation);
 *   - a stale error handle leaves the token unfinished, and the token can
 *     then be finished normally.
 */
#include "check.h"

static ta_tensor *vec(size_t n) {
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &t, NULL));
    return t;
}

static ta_status fields(const ta_error *e, int64_t *code, char *origin, char *msg) {
    MUST(ta_error_code(e, code));
    err_origin(e, origin, 64);
    err_message(e, msg, 128);
    return err_status(e);
}

static void travels(ta_status status, int64_t code, const char *origin, const char *message) {
    ta_error *e = NULL;
    MUST(ta_error_new(status, code, origin, message, &e));
    ta_tensor *t = vec(2), *u = vec(2);
    ta_access a = {t, TA_MODE_WRITE};
    ta_token *tok = NULL;
    MUST(ta_external_submit(&a, 1, "recv_like", NULL, &tok, NULL, NULL, NULL));
    ta_scalar two = {2, 0};
    ta_event *dep = NULL;
    MUST(ta_axpy(u, two, t, NULL, &dep, NULL)); /* reads t: fails with its error */
    MUST(ta_token_finish_error(tok, e));

    ta_error *got = NULL;
    CHECK_STATUS(ta_tensor_wait(t, SECONDS(20), &got), status);
    int64_t c = 0;
    char o[64], m[128];
    CHECK(got && fields(got, &c, o, m) == status && c == code && !strcmp(o, origin) && !strcmp(m, message),
          "poison: %s %lld '%s' '%s'", ta_status_name(got ? err_status(got) : 0), (long long)c, o, m);
    CHECK(got && err_same(got, e) == 1, "the output's error is the error given");
    ta_error_free(got);
    CHECK_STATUS(ta_event_wait(dep, SECONDS(20)), status);
    ta_error *dep_err = event_error(dep);
    CHECK(dep_err && err_same(dep_err, e) == 1, "the dependent operation fails with the same error");
    ta_error_free(dep_err);
    MUST(ta_event_free(dep));
    MUST(ta_error_free(e));
    MUST(ta_tensor_free(t));
    MUST(ta_tensor_free(u));
}

int main(void) {
    /* Refusals. */
    ta_error *e = NULL, *err = NULL;
    const ta_status refused[] = {TA_STATUS_OK, TA_STATUS_PENDING, TA_STATUS_NULL_HANDLE, TA_STATUS_STALE_HANDLE,
                                 TA_STATUS_DOUBLE_FREE, TA_STATUS_WRONG_HANDLE_TYPE, TA_STATUS_INVALID_HANDLE,
                                 TA_STATUS_NULL_POINTER, 999};
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        CHECK_STATUS(ta_error_new(refused[k], 1, "o", "m", &e), TA_STATUS_INVALID_ARGUMENT);
        CHECK(e == NULL, "an output written on failure");
    }
    CHECK_STATUS(ta_error_new(TA_STATUS_KERNEL_FAILED, 1, "o", "m", NULL), TA_STATUS_NULL_POINTER);
    MUST(ta_last_error(&err));
    char msg[128];
    CHECK(strstr(err_message(err, msg, sizeof msg), "error_out") != NULL, "message: %s", msg);
    ta_error_free(err);

    /* Fields, and NULL strings. */
    MUST(ta_error_new(TA_STATUS_OUT_OF_MEMORY, -3, NULL, NULL, &e));
    int64_t c = 0;
    char o[64], m[128];
    CHECK(fields(e, &c, o, m) == TA_STATUS_OUT_OF_MEMORY && c == -3 && o[0] == 0 && m[0] == 0, "fields");
    MUST(ta_error_free(e));

    travels(TA_STATUS_OUT_OF_MEMORY, 7, "alloc on rank 3", "no room for 2 GiB");
    travels(TA_STATUS_KERNEL_FAILED, 41, "my_kernel", "step 12 diverged");
    travels(TA_STATUS_CANCELLED, 0, "ta_mpi_recv", "cancelled on rank 1");

    /* A stale error handle: the token stays unfinished, then finishes normally. */
    MUST(ta_error_new(TA_STATUS_KERNEL_FAILED, 1, "o", "m", &e));
    MUST(ta_error_free(e));
    ta_tensor *t = vec(1);
    ta_access a = {t, TA_MODE_UPDATE};
    ta_token *tok = NULL;
    MUST(ta_external_submit(&a, 1, "later", NULL, &tok, NULL, NULL, NULL));
    CHECK_STATUS(ta_token_finish_error(tok, e), TA_STATUS_STALE_HANDLE);
    CHECK_STATUS(ta_tensor_wait(t, 0, NULL), TA_STATUS_TIMEOUT);
    MUST(ta_token_finish(tok, TA_STATUS_OK, NULL));
    CHECK_STATUS(ta_tensor_wait(t, SECONDS(20), NULL), TA_STATUS_OK);
    MUST(ta_tensor_free(t));

    size_t live = 1;
    MUST(ta_handles_live(&live));
    CHECK(live == 0, "%zu handles live", live);
    return finish("test_error_new");
}
