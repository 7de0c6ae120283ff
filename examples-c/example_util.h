/*
 * example_util.h: error reporting and deterministic inputs shared by the
 * tiled examples (not part of the library API).
 *
 *   OK(call)              a call that has to succeed; on failure prints the
 *                         library's message and where the error started, exits 1
 *   wait_event(ev, what)  waits for an event and frees it; on failure prints the
 *                         operation's error (a failed tile task poisons its tile,
 *                         and everything that reads it later reports that error)
 *   rnd()                 deterministic values in [-1, 1) (xorshift64; define
 *                         EXAMPLE_RNG_SEED before including to pick the sequence)
 *   real(x)               the ta_scalar x + 0i
 *   example_finish(name, failures)
 *                         the end of main: counts a leak if any handle is still
 *                         live, prints the verdict, returns main's exit status
 */
#ifndef TA_EXAMPLE_UTIL_H
#define TA_EXAMPLE_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <tensorasync.h>

#ifndef EXAMPLE_RNG_SEED
#define EXAMPLE_RNG_SEED 88172645463325252ULL
#endif

/* Stop on a failed call, printing the library's message for it. Calls that
 * take an error argument get `&err`; the others fall back to ta_last_error. */
static void check(ta_status s, ta_error *err, const char *what, const char *file, int line) {
    if (s == TA_STATUS_OK) return;
    char msg[512] = "", origin[64] = "";
    if (!err) ta_last_error(&err);
    if (err) {
        ta_error_message(err, msg, sizeof msg, NULL);
        ta_error_origin(err, origin, sizeof origin, NULL);
    }
    fprintf(stderr, "%s:%d: %s failed: %s (started in %s): %s\n", file, line, what, ta_status_name(s), origin, msg);
    exit(1);
}
#define OK(call)                                                                                                      \
    do {                                                                                                              \
        ta_error *err = NULL;                                                                                         \
        ta_status s_ = (call);                                                                                        \
        check(s_, err, #call, __FILE__, __LINE__);                                                                    \
        ta_error_free(err);                                                                                           \
    } while (0)

static void wait_event(ta_event *ev, const char *what) {
    ta_status s = ta_event_wait(ev, TA_WAIT_FOREVER);
    if (s != TA_STATUS_OK) {
        char msg[512] = "", origin[64] = "";
        ta_error *e = NULL;
        if (ta_event_error(ev, &e) == TA_STATUS_OK && e) {
            ta_error_message(e, msg, sizeof msg, NULL);
            ta_error_origin(e, origin, sizeof origin, NULL);
            ta_error_free(e);
        }
        fprintf(stderr, "%s failed: %s (started in %s): %s\n", what, ta_status_name(s), origin, msg);
        exit(1);
    }
    OK(ta_event_free(ev));
}

static unsigned long long rng_state = EXAMPLE_RNG_SEED;
static double rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static ta_scalar real(double x) {
    ta_scalar s;
    s.re = x;
    s.im = 0.0;
    return s;
}

/* The end of an example's main, after its runtime is freed: every handle
 * must be gone, and any failed case fails the program. */
static int example_finish(const char *name, int failures) {
    size_t live = 0;
    OK(ta_handles_live(&live));
    if (live != 0) {
        printf("LEAK: %zu handles still live at exit\n", live);
        failures++;
    }
    if (failures) {
        printf("%s: %d case(s) FAILED\n", name, failures);
        return 1;
    }
    printf("%s: all cases verified\n", name);
    return 0;
}

#endif
