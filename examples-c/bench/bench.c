/*
 * tensorasync vs StarPU 1.3 vs OpenMP tasks: per-task overhead and memory.
 *
 * One run measures, through each runtime's public C API, the same task
 * patterns with the same thread count (2 workers) and the same trivially
 * cheap kernel bodies:
 *
 *   (a) 100k dependent tasks, each incrementing one 1-double tensor
 *   (b) 100k independent tasks, each incrementing its own 1-double tensor
 *   (c) 10k rounds of 1 writer + 8 readers on one 1-double tensor (90k tasks)
 *   (d) create + free of a 1-double tensor (ns per pair)
 *   (e) memory: bytes per pending operation (10^6 queued behind one blocked
 *       writer) and bytes per live 1-element tensor handle (10^6 handles);
 *       each memory phase runs in a fresh process (this binary re-executed
 *       with --mem=MODE) so that one phase's peak RSS does not hide another.
 *
 * Timed patterns: 6 rounds (the first is the warm-up); median and min of the
 * other 5 are reported. In every round each runtime is started, runs every
 * pattern once, and is shut down, and the order of the runtimes rotates from
 * round to round: slow spells of a shared machine then hit all three alike
 * instead of one runtime's 5 runs in a row. Runtimes never run at the same
 * time, and one starts only when no thread of the previous one is running.
 *
 * Usage: bench [--quick] [--only=mem,ta,sp,omp]
 *   --quick  divides every count by 10 (smoke test only: too short to trust)
 *   --only   runs a subset (memory phases, tensorasync, StarPU, OpenMP)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <omp.h>
#include <sched.h>
#include <starpu.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tensorasync.h"
#include "harness.h"

#define NTHREADS 2
#define NREP 5                 /* timed rounds, after one warm-up round */
#define PATTERN_BUDGET_NS 15e9 /* no new round of a pattern after this much */

static long N_CHAIN = 100000;  /* (a) */
static long N_INDEP = 100000;  /* (b) */
static long N_ROUNDS = 10000;  /* (c) 1 writer + 8 readers each */
#define N_READERS 8
static long N_CREATE = 100000; /* (d) */
static long N_MEM = 1000000;   /* (e) */
/* StarPU handles cost ~4 KB each and unregistering 10^6 takes ~30 s here:
 * 10^5 gives the same per-handle figure. */
static long N_MEM_SP_HANDLES = 100000;

/* ------------------------------------------------------------------ util */

/* A timed run of (a) or (c) stops submitting after this long (normal runs
 * take well under 1 s): a runtime that degrades to milliseconds per task
 * must not hold `make run` for minutes. The run then reports ns per task
 * over the tasks it did submit, and its line says "truncated". */
#ifndef RUN_LIMIT_NS
#define RUN_LIMIT_NS 8e9
#endif
static int g_truncated; /* set by a run that stopped early */
#define OVER_TIME(i, t0) ((((i) & 1023) == 1023) && now_ns() - (t0) > RUN_LIMIT_NS && (g_truncated = 1))

static void die(const char *what) {
    fprintf(stderr, "bench: FATAL: %s\n", what);
    exit(2);
}

static void ta_check(ta_status s, const char *what) {
    if (s == TA_STATUS_OK) return;
    char msg[512] = "";
    ta_error *e = NULL;
    if (ta_last_error(&e) == TA_STATUS_OK && e) {
        ta_error_message(e, msg, sizeof msg, NULL);
        ta_error_free(e);
    }
    fprintf(stderr, "bench: FATAL: %s -> %s (%s)\n", what, ta_status_name(s), msg);
    exit(2);
}
#define TA(expr) ta_check((expr), #expr)

static void sp_check(int rc, const char *what) {
    if (rc == 0) return;
    fprintf(stderr, "bench: FATAL: %s -> %d (%s)\n", what, rc, strerror(rc < 0 ? -rc : rc));
    exit(2);
}
#define SP(expr) sp_check((expr), #expr)

static void expect(double got, double want, const char *what) {
    if (got != want) {
        fprintf(stderr, "bench: FATAL: wrong result in %s: got %.17g, want %.17g\n", what, got, want);
        exit(3);
    }
}

typedef struct {
    int valid;
    double med, min;
    const char *note; /* shown next to the number when not the same thing */
    int partial;      /* fewer than NREP runs, or a run was truncated */
} stat_t;

static const stat_t NA = {0, 0, 0, NULL, 0};

static stat_t stat_of(const double *v, int n) {
    if (n <= 0) return NA;
    double s[NREP];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    double med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    stat_t r = {1, med, s[0], NULL, 0};
    return r;
}

/* Reads VmRSS and VmHWM (kB) of this process. */
static void read_rss(long *rss_kb, long *hwm_kb) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) die("cannot open /proc/self/status");
    char line[256];
    *rss_kb = *hwm_kb = -1;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "VmRSS:", 6)) *rss_kb = strtol(line + 6, NULL, 10);
        if (!strncmp(line, "VmHWM:", 6)) *hwm_kb = strtol(line + 6, NULL, 10);
    }
    fclose(f);
    if (*rss_kb < 0 || *hwm_kb < 0) die("VmRSS/VmHWM not found");
}

/* Waits (up to 1 s) until no other thread of this process has been running
 * for 3 polls in a row, so the previous runtime's exiting or spinning
 * workers do not compete with the next one; optionally says what it saw. */
static void settle_threads(const char *label) {
    char names[512];
    int running = 0, n = 0;
    settle(500, 0, &n, &running, names, sizeof names);
    if (label)
        printf("%s: other threads of this process at start: %d, running: %d%s%s%s\n", label, n, running,
               n > 0 ? " (" : "", n > 0 ? names + 1 : "", n > 0 ? ")" : "");
}
/* Polite spin: keeps the CPU for the submitting thread (2 cores only). */
static void wait_flag(atomic_int *f) {
    while (!atomic_load_explicit(f, memory_order_acquire)) usleep(50);
}

/* ------------------------------------------------------- kernels (bodies) */
/* The same bodies for all three runtimes: increment, or read into a sink. */

static inline void body_inc(double *p) { *p += 1.0; }
static inline void body_read(const double *p) {
    volatile double sink = *(const volatile double *)p;
    (void)sink;
}

/* ============================================================ tensorasync */

static ta_runtime *g_rt;
static ta_submit g_opts; /* {.runtime = g_rt}, everything else 0 */
static ta_tensor *ta_x_a, *ta_x_c, **ta_xs;
static double ta_exp_a, ta_exp_b, ta_exp_c;

static ta_status k_inc(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *c) {
    (void)n; (void)ud; (void)c;
    body_inc((double *)v[0].data);
    return TA_STATUS_OK;
}

static ta_status k_read(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *c) {
    (void)n; (void)ud; (void)c;
    body_read((const double *)v[0].data);
    return TA_STATUS_OK;
}

/* Holds an UPDATE access until flags[0] is set; flags[1] = started. */
static ta_status k_block(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *c) {
    (void)v; (void)n; (void)c;
    atomic_int *flags = ud;
    atomic_store(&flags[1], 1);
    wait_flag(&flags[0]);
    return TA_STATUS_OK;
}

static ta_tensor *ta_scalar_tensor(void) {
    size_t ext[1] = {1};
    ta_tensor *t = NULL;
    TA(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, ext, TA_ORDER_ROW_MAJOR, &t, NULL));
    return t;
}

/* Kernels are submitted with name = NULL: a non-NULL name is copied into a
 * new string on every submission (StarPU codelet names are static). */
static inline void ta_submit1(ta_kernel_fn k, ta_tensor *t, ta_mode mode, const ta_submit *opts) {
    ta_access a = {t, mode};
    ta_status s = ta_kernel_submit(k, NULL, NULL, &a, 1, opts, NULL, NULL);
    if (s != TA_STATUS_OK) ta_check(s, "ta_kernel_submit");
}

/* Reads the value of a 1-double tensor (outside timed regions). */
static double ta_value(ta_tensor *t) {
    double v = -1;
    ta_event *ev = NULL;
    TA(ta_copy_out(t, &v, 1, NULL, &g_opts, &ev, NULL));
    TA(ta_event_wait(ev, TA_WAIT_FOREVER));
    TA(ta_event_free(ev));
    return v;
}

static void ta_setup(void) {
    TA(ta_runtime_new(NTHREADS, &g_rt, NULL));
    size_t nth = 0;
    TA(ta_runtime_threads(g_rt, &nth));
    if (nth != NTHREADS) die("tensorasync runtime has the wrong thread count");
    memset(&g_opts, 0, sizeof g_opts);
    g_opts.runtime = g_rt;
    ta_x_a = ta_scalar_tensor();
    ta_x_c = ta_scalar_tensor();
    ta_xs = malloc(sizeof(*ta_xs) * (size_t)N_INDEP);
    if (!ta_xs) die("out of memory");
    for (long i = 0; i < N_INDEP; i++) ta_xs[i] = ta_scalar_tensor();
    ta_exp_a = ta_exp_b = ta_exp_c = 0;
}

static void ta_teardown(void) {
    for (long i = 0; i < N_INDEP; i++) TA(ta_tensor_free(ta_xs[i]));
    free(ta_xs);
    TA(ta_tensor_free(ta_x_a));
    TA(ta_tensor_free(ta_x_c));
    TA(ta_runtime_free(g_rt));
    g_rt = NULL;
}

static double ta_a(void) {
    double t0 = now_ns();
    long n = 0;
    while (n < N_CHAIN && !OVER_TIME(n, t0)) {
        ta_submit1(k_inc, ta_x_a, TA_MODE_UPDATE, &g_opts);
        n++;
    }
    TA(ta_tensor_wait(ta_x_a, TA_WAIT_FOREVER, NULL));
    double t1 = now_ns();
    ta_exp_a += (double)n;
    expect(ta_value(ta_x_a), ta_exp_a, "tensorasync (a)");
    return (t1 - t0) / (double)n;
}

/* (b) completion observed by ta_runtime_wait_idle, the counterpart of
 * starpu_task_wait_for_all and taskwait that the other columns use. */
static double ta_b(void) {
    double t0 = now_ns();
    for (long i = 0; i < N_INDEP; i++) ta_submit1(k_inc, ta_xs[i], TA_MODE_UPDATE, &g_opts);
    TA(ta_runtime_wait_idle(g_rt, TA_WAIT_FOREVER, NULL));
    double t1 = now_ns();
    ta_exp_b += 1.0;
    expect(ta_value(ta_xs[0]), ta_exp_b, "tensorasync (b) first");
    expect(ta_value(ta_xs[N_INDEP - 1]), ta_exp_b, "tensorasync (b) last");
    return (t1 - t0) / (double)N_INDEP;
}

/* (b') the same tasks, with completion observed by one ta_tensor_wait per
 * tensor (100k waits, which the other runtimes do not pay for). */
static double ta_b_each(void) {
    double t0 = now_ns();
    for (long i = 0; i < N_INDEP; i++) ta_submit1(k_inc, ta_xs[i], TA_MODE_UPDATE, &g_opts);
    for (long i = 0; i < N_INDEP; i++) TA(ta_tensor_wait(ta_xs[i], TA_WAIT_FOREVER, NULL));
    double t1 = now_ns();
    ta_exp_b += 1.0;
    expect(ta_value(ta_xs[N_INDEP / 2]), ta_exp_b, "tensorasync (b, each)");
    return (t1 - t0) / (double)N_INDEP;
}

static double ta_c(void) {
    double t0 = now_ns();
    long n = 0;
    while (n < N_ROUNDS && !OVER_TIME(n, t0)) {
        ta_submit1(k_inc, ta_x_c, TA_MODE_UPDATE, &g_opts);
        for (int j = 0; j < N_READERS; j++) ta_submit1(k_read, ta_x_c, TA_MODE_READ, &g_opts);
        n++;
    }
    TA(ta_tensor_wait(ta_x_c, TA_WAIT_FOREVER, NULL));
    double t1 = now_ns();
    ta_exp_c += (double)n;
    expect(ta_value(ta_x_c), ta_exp_c, "tensorasync (c)");
    return (t1 - t0) / (double)(n * (1 + N_READERS));
}

static double ta_d(void) {
    size_t ext[1] = {1};
    double t0 = now_ns();
    for (long i = 0; i < N_CREATE; i++) {
        ta_tensor *t = NULL;
        ta_status s = ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, ext, TA_ORDER_ROW_MAJOR, &t, NULL);
        if (s != TA_STATUS_OK) ta_check(s, "ta_tensor_new_zeros");
        s = ta_tensor_free(t);
        if (s != TA_STATUS_OK) ta_check(s, "ta_tensor_free");
    }
    double t1 = now_ns();
    return (t1 - t0) / (double)N_CREATE;
}

/* ================================================================ StarPU */

static void sp_inc(void *buffers[], void *arg) {
    (void)arg;
    body_inc((double *)STARPU_VARIABLE_GET_PTR(buffers[0]));
}
static void sp_read(void *buffers[], void *arg) {
    (void)arg;
    body_read((const double *)STARPU_VARIABLE_GET_PTR(buffers[0]));
}
static void sp_block(void *buffers[], void *arg) {
    (void)buffers;
    atomic_int *flags = arg;
    atomic_store(&flags[1], 1);
    wait_flag(&flags[0]);
}

static struct starpu_codelet cl_inc = {
    .where = STARPU_CPU, .cpu_funcs = {sp_inc}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "inc"};
static struct starpu_codelet cl_read = {
    .where = STARPU_CPU, .cpu_funcs = {sp_read}, .nbuffers = 1, .modes = {STARPU_R}, .name = "read"};
static struct starpu_codelet cl_block = {
    .where = STARPU_CPU, .cpu_funcs = {sp_block}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "block"};

static void sp_init(void) {
    starpu_env("eager");
    int rc = starpu_init(NULL);
    if (rc != 0) {
        fprintf(stderr, "bench: starpu_init failed: %d\n", rc);
        exit(2);
    }
    if (starpu_cpu_worker_get_count() != NTHREADS) {
        fprintf(stderr, "bench: StarPU has %u CPU workers, want %d\n", starpu_cpu_worker_get_count(), NTHREADS);
        exit(2);
    }
}

/* Same submission path a StarPU user takes for a tight loop: create + submit
 * (cheaper than starpu_task_insert, which parses varargs). */
static inline void sp_submit1(struct starpu_codelet *cl, starpu_data_handle_t h, void *arg) {
    struct starpu_task *t = starpu_task_create();
    t->cl = cl;
    t->handles[0] = h;
    t->cl_arg = arg;
    int rc = starpu_task_submit(t);
    if (rc != 0) sp_check(rc, "starpu_task_submit");
}

static double sp_value(starpu_data_handle_t h) {
    SP(starpu_data_acquire(h, STARPU_R));
    double v = *(double *)starpu_variable_get_local_ptr(h);
    starpu_data_release(h);
    return v;
}

static double sp_x_a, sp_x_c, *sp_xs;
static starpu_data_handle_t sp_h_a, sp_h_c, *sp_hs;
static double sp_exp_a, sp_exp_b, sp_exp_c;

static void sp_setup(void) {
    sp_init();
    sp_x_a = sp_x_c = 0;
    starpu_variable_data_register(&sp_h_a, STARPU_MAIN_RAM, (uintptr_t)&sp_x_a, sizeof(double));
    starpu_variable_data_register(&sp_h_c, STARPU_MAIN_RAM, (uintptr_t)&sp_x_c, sizeof(double));
    sp_xs = calloc((size_t)N_INDEP, sizeof *sp_xs);
    sp_hs = calloc((size_t)N_INDEP, sizeof *sp_hs);
    if (!sp_xs || !sp_hs) die("out of memory");
    for (long i = 0; i < N_INDEP; i++)
        starpu_variable_data_register(&sp_hs[i], STARPU_MAIN_RAM, (uintptr_t)&sp_xs[i], sizeof(double));
    sp_exp_a = sp_exp_b = sp_exp_c = 0;
}

static void sp_teardown(void) {
    for (long i = 0; i < N_INDEP; i++) starpu_data_unregister(sp_hs[i]);
    starpu_data_unregister(sp_h_a);
    starpu_data_unregister(sp_h_c);
    starpu_shutdown();
    free(sp_hs);
    free(sp_xs);
}

static double sp_a(void) {
    double t0 = now_ns();
    long n = 0;
    while (n < N_CHAIN && !OVER_TIME(n, t0)) {
        sp_submit1(&cl_inc, sp_h_a, NULL);
        n++;
    }
    SP(starpu_task_wait_for_all());
    double t1 = now_ns();
    sp_exp_a += (double)n;
    expect(sp_value(sp_h_a), sp_exp_a, "StarPU (a)");
    return (t1 - t0) / (double)n;
}

static double sp_b(void) {
    double t0 = now_ns();
    for (long i = 0; i < N_INDEP; i++) sp_submit1(&cl_inc, sp_hs[i], NULL);
    SP(starpu_task_wait_for_all());
    double t1 = now_ns();
    sp_exp_b += 1.0;
    expect(sp_value(sp_hs[0]), sp_exp_b, "StarPU (b) first");
    expect(sp_value(sp_hs[N_INDEP - 1]), sp_exp_b, "StarPU (b) last");
    return (t1 - t0) / (double)N_INDEP;
}

static double sp_c(void) {
    double t0 = now_ns();
    long n = 0;
    while (n < N_ROUNDS && !OVER_TIME(n, t0)) {
        sp_submit1(&cl_inc, sp_h_c, NULL);
        for (int j = 0; j < N_READERS; j++) sp_submit1(&cl_read, sp_h_c, NULL);
        n++;
    }
    SP(starpu_task_wait_for_all());
    double t1 = now_ns();
    sp_exp_c += (double)n;
    expect(sp_value(sp_h_c), sp_exp_c, "StarPU (c)");
    return (t1 - t0) / (double)(n * (1 + N_READERS));
}

/* Registers existing memory (StarPU handles do not own storage): the closest
 * StarPU equivalent of creating a 1-double tensor. */
static double sp_d(void) {
    static double x;
    double t0 = now_ns();
    for (long i = 0; i < N_CREATE; i++) {
        starpu_data_handle_t h;
        starpu_variable_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)&x, sizeof x);
        starpu_data_unregister(h);
    }
    double t1 = now_ns();
    return (t1 - t0) / (double)N_CREATE;
}

/* ================================================================ OpenMP */

static double omp_x_a, omp_x_c, *omp_xs;
static double omp_exp_a, omp_exp_b, omp_exp_c;

static void omp_setup(void) {
    omp_set_num_threads(NTHREADS);
    omp_x_a = omp_x_c = 0;
    omp_xs = calloc((size_t)N_INDEP, sizeof *omp_xs);
    if (!omp_xs) die("out of memory");
    omp_exp_a = omp_exp_b = omp_exp_c = 0;
}

static void omp_teardown(void) { free(omp_xs); }

static double omp_a(void) {
    double t0 = 0, t1 = 0;
    double *px = &omp_x_a;
    long n = 0;
#pragma omp parallel num_threads(NTHREADS)
#pragma omp single
    {
        t0 = now_ns();
        while (n < N_CHAIN && !OVER_TIME(n, t0)) {
#pragma omp task depend(inout: px[0]) firstprivate(px)
            body_inc(px);
            n++;
        }
#pragma omp taskwait
        t1 = now_ns();
    }
    omp_exp_a += (double)n;
    expect(omp_x_a, omp_exp_a, "OpenMP (a)");
    return (t1 - t0) / (double)n;
}

static double omp_b(void) {
    double t0 = 0, t1 = 0;
    double *p = omp_xs;
#pragma omp parallel num_threads(NTHREADS)
#pragma omp single
    {
        t0 = now_ns();
        for (long i = 0; i < N_INDEP; i++) {
#pragma omp task depend(inout: p[i]) firstprivate(p, i)
            body_inc(&p[i]);
        }
#pragma omp taskwait
        t1 = now_ns();
    }
    omp_exp_b += 1.0;
    expect(omp_xs[0], omp_exp_b, "OpenMP (b) first");
    expect(omp_xs[N_INDEP - 1], omp_exp_b, "OpenMP (b) last");
    return (t1 - t0) / (double)N_INDEP;
}

static double omp_c(void) {
    double t0 = 0, t1 = 0;
    double *px = &omp_x_c;
    long n = 0;
#pragma omp parallel num_threads(NTHREADS)
#pragma omp single
    {
        t0 = now_ns();
        while (n < N_ROUNDS && !OVER_TIME(n, t0)) {
#pragma omp task depend(inout: px[0]) firstprivate(px)
            body_inc(px);
            for (int j = 0; j < N_READERS; j++) {
#pragma omp task depend(in: px[0]) firstprivate(px)
                body_read(px);
            }
            n++;
        }
#pragma omp taskwait
        t1 = now_ns();
    }
    omp_exp_c += (double)n;
    expect(omp_x_c, omp_exp_c, "OpenMP (c)");
    return (t1 - t0) / (double)(n * (1 + N_READERS));
}

/* OpenMP has no data handles: calloc + free of one double, for scale only. */
static double omp_d(void) {
    static void *volatile keep;
    double t0 = now_ns();
    for (long i = 0; i < N_CREATE; i++) {
        void *p = calloc(1, sizeof(double));
        keep = p;
        free(keep);
    }
    double t1 = now_ns();
    return (t1 - t0) / (double)N_CREATE;
}

/* ========================================================= memory phases */
/* Each runs in a fresh process and prints one line:
 *   MEM mode=... n=... rss_before_kb=... rss_after_kb=... hwm_after_kb=... bytes_per=... */

static void mem_report(const char *mode, long n, long rss0, long rss1, long hwm1) {
    long growth_kb = (hwm1 > rss1 ? hwm1 : rss1) - rss0;
    printf("MEM mode=%s n=%ld rss_before_kb=%ld rss_after_kb=%ld hwm_after_kb=%ld bytes_per=%.1f\n", mode, n, rss0,
           rss1, hwm1, (double)growth_kb * 1024.0 / (double)n);
    fflush(stdout);
}

static int mem_ta_ops(void) {
    TA(ta_runtime_new(NTHREADS, &g_rt, NULL));
    g_opts.runtime = g_rt;
    ta_tensor *x = ta_scalar_tensor();
    static atomic_int flags[2];
    ta_access a = {x, TA_MODE_UPDATE};
    TA(ta_kernel_submit(k_block, flags, NULL, &a, 1, &g_opts, NULL, NULL));
    wait_flag(&flags[1]); /* the blocker holds the tensor now */
    /* Warm the submission path (allocator pools, per-thread caches) a little. */
    for (int i = 0; i < 1000; i++) ta_submit1(k_inc, x, TA_MODE_UPDATE, &g_opts);
    long rss0, hwm0, rss1, hwm1;
    read_rss(&rss0, &hwm0);
    for (long i = 0; i < N_MEM; i++) ta_submit1(k_inc, x, TA_MODE_UPDATE, &g_opts);
    read_rss(&rss1, &hwm1);
    atomic_store(&flags[0], 1);
    TA(ta_tensor_wait(x, TA_WAIT_FOREVER, NULL));
    expect(ta_value(x), (double)(N_MEM + 1000), "tensorasync (e) queued ops");
    mem_report("ta_ops", N_MEM, rss0, rss1, hwm1);
    TA(ta_tensor_free(x));
    TA(ta_runtime_free(g_rt));
    return 0;
}

static int mem_ta_handles(void) {
    ta_tensor **ts = malloc(sizeof(*ts) * (size_t)N_MEM);
    if (!ts) die("out of memory");
    memset(ts, 0, sizeof(*ts) * (size_t)N_MEM); /* touch: not counted */
    for (int i = 0; i < 1000; i++) TA(ta_tensor_free(ta_scalar_tensor()));
    long rss0, hwm0, rss1, hwm1;
    read_rss(&rss0, &hwm0);
    for (long i = 0; i < N_MEM; i++) ts[i] = ta_scalar_tensor();
    read_rss(&rss1, &hwm1);
    mem_report("ta_handles", N_MEM, rss0, rss1, hwm1);
    for (long i = 0; i < N_MEM; i++) TA(ta_tensor_free(ts[i]));
    free(ts);
    return 0;
}

static int mem_sp_tasks(void) {
    sp_init();
    static double x;
    starpu_data_handle_t h;
    starpu_variable_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)&x, sizeof x);
    static atomic_int flags[2];
    sp_submit1(&cl_block, h, flags);
    wait_flag(&flags[1]);
    for (int i = 0; i < 1000; i++) sp_submit1(&cl_inc, h, NULL);
    long rss0, hwm0, rss1, hwm1;
    read_rss(&rss0, &hwm0);
    for (long i = 0; i < N_MEM; i++) sp_submit1(&cl_inc, h, NULL);
    read_rss(&rss1, &hwm1);
    atomic_store(&flags[0], 1);
    SP(starpu_task_wait_for_all());
    expect(sp_value(h), (double)(N_MEM + 1000), "StarPU (e) queued tasks");
    mem_report("sp_ops", N_MEM, rss0, rss1, hwm1);
    starpu_data_unregister(h);
    starpu_shutdown();
    return 0;
}

static int mem_sp_handles(void) {
    sp_init();
    double *xs = calloc((size_t)N_MEM_SP_HANDLES, sizeof *xs);
    starpu_data_handle_t *hs = calloc((size_t)N_MEM_SP_HANDLES, sizeof *hs);
    if (!xs || !hs) die("out of memory");
    memset(xs, 0, sizeof *xs * (size_t)N_MEM_SP_HANDLES);
    memset(hs, 0, sizeof *hs * (size_t)N_MEM_SP_HANDLES);
    for (int i = 0; i < 1000; i++) {
        starpu_data_handle_t h;
        starpu_variable_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)&xs[0], sizeof(double));
        starpu_data_unregister(h);
    }
    long rss0, hwm0, rss1, hwm1;
    read_rss(&rss0, &hwm0);
    for (long i = 0; i < N_MEM_SP_HANDLES; i++)
        starpu_variable_data_register(&hs[i], STARPU_MAIN_RAM, (uintptr_t)&xs[i], sizeof(double));
    read_rss(&rss1, &hwm1);
    mem_report("sp_handles", N_MEM_SP_HANDLES, rss0, rss1, hwm1);
    for (long i = 0; i < N_MEM_SP_HANDLES; i++) starpu_data_unregister_no_coherency(hs[i]);
    starpu_shutdown();
    free(hs);
    free(xs);
    return 0;
}

/* OpenMP: 10^6 depend(inout) tasks created behind a running task that holds
 * the same address (libgomp keeps tasks with unmet dependencies out of its
 * throttling count, so the creating thread is not held back). */
static int mem_omp_ops(void) {
    static double x;
    static atomic_int flags[2];
    double *px = &x;
    long rss0 = 0, hwm0 = 0, rss1 = 0, hwm1 = 0;
    omp_set_num_threads(NTHREADS);
#pragma omp parallel num_threads(NTHREADS)
#pragma omp single
    {
#pragma omp task depend(inout: px[0]) firstprivate(px)
        {
            atomic_store(&flags[1], 1);
            wait_flag(&flags[0]);
        }
        wait_flag(&flags[1]);
        for (int i = 0; i < 1000; i++) {
#pragma omp task depend(inout: px[0]) firstprivate(px)
            body_inc(px);
        }
        read_rss(&rss0, &hwm0);
        for (long i = 0; i < N_MEM; i++) {
#pragma omp task depend(inout: px[0]) firstprivate(px)
            body_inc(px);
        }
        read_rss(&rss1, &hwm1);
        atomic_store(&flags[0], 1);
#pragma omp taskwait
    }
    expect(x, (double)(N_MEM + 1000), "OpenMP (e) queued tasks");
    mem_report("omp_ops", N_MEM, rss0, rss1, hwm1);
    return 0;
}

/* Runs this binary with --mem=MODE in a fresh process; returns bytes per item. */
static stat_t run_mem_child(const char *self, const char *mode, int quick) {
    int fd[2];
    if (pipe(fd) != 0) die("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        char arg[64];
        snprintf(arg, sizeof arg, "--mem=%s", mode);
        execl(self, self, arg, quick ? "--quick" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t k;
    while ((k = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)k;
    buf[len] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    fputs(buf, stdout); /* the raw MEM line, for the record */
    stat_t r = NA;
    char *p = strstr(buf, "bytes_per=");
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && p) {
        r.valid = 1;
        r.med = r.min = strtod(p + 10, NULL);
    } else {
        printf("bench: memory phase %s failed (status %d)\n", mode, st);
    }
    return r;
}

/* ================================================================ driver */

typedef double (*bench_fn)(void);

enum { P_A, P_B, P_B_EACH, P_C, P_D, P_E_OPS, P_E_HANDLES, NPAT };
#define NTIMED (P_D + 1)
enum { I_TA, I_SP, I_OMP, NIMPL };

static const char *pat_key[NPAT] = {"a", "b", "b_each", "c", "d", "e_ops", "e_handles"};
static const char *pat_desc[NPAT] = {
    "(a) 100k dependent tasks, 1 tensor",
    "(b) 100k independent tasks",
    "(b') same, ta waits per tensor",
    "(c) 10k x (1 writer + 8 readers)",
    "(d) create + free 1-double tensor",
    "(e) bytes per queued operation",
    "(e) bytes per live 1-elem handle",
};
static const double pat_target[NPAT] = {250, 150, 150, 200, 500, 512, 256};
static const char *pat_unit[NPAT] = {"ns/task", "ns/task", "ns/task", "ns/task", "ns/pair", "B/op", "B/handle"};
static const char *unit_key[NPAT] = {"ns_per_task", "ns_per_task",  "ns_per_task",     "ns_per_task",
                                     "ns_per_pair", "bytes_per_op", "bytes_per_handle"};
static const char *impl_key[NIMPL] = {"tensorasync", "starpu", "openmp"};

typedef struct {
    const char *name;
    const char *config;
    void (*setup)(void);
    void (*teardown)(void);
    bench_fn fn[NTIMED];
} impl_t;

static const impl_t impls[NIMPL] = {
    {"tensorasync", "ta_runtime_new(2), ta_kernel_submit", ta_setup, ta_teardown, {ta_a, ta_b, ta_b_each, ta_c, ta_d}},
    {"starpu", "STARPU_NCPU=2 STARPU_SCHED=eager, starpu_task_submit", sp_setup, sp_teardown,
     {sp_a, sp_b, NULL, sp_c, sp_d}},
    {"openmp", "omp_set_num_threads(2), task depend", omp_setup, omp_teardown, {omp_a, omp_b, NULL, omp_c, omp_d}},
};

/* Per (impl, pattern): the warm-up, the timed runs, and CPU accounting. */
typedef struct {
    double warm;
    double v[NREP];
    int runs;
    int truncated; /* runs (warm-up included) that hit RUN_LIMIT_NS */
    double wall_ns, sys_ns, self_ns; /* summed over timed runs */
} series_t;

static void fmt_cell(char *buf, size_t cap, stat_t s) {
    const char *note = s.note ? s.note : "", *partial = s.partial ? " !" : "";
    if (!s.valid)
        snprintf(buf, cap, "n/a");
    else if (s.med == s.min)
        snprintf(buf, cap, "%.0f%s%s", s.med, note, partial);
    else
        snprintf(buf, cap, "%.0f (min %.0f)%s%s", s.med, s.min, note, partial);
}

static void fmt_ratio(char *buf, size_t cap, stat_t other, stat_t ours) {
    if (!other.valid || !ours.valid || ours.med <= 0 || other.note)
        snprintf(buf, cap, "n/a");
    else
        snprintf(buf, cap, "%.2fx", other.med / ours.med);
}

int main(int argc, char **argv) {
    int quick = 0;
    const char *mem_mode = NULL;
    const char *only = "mem,ta,sp,omp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strncmp(argv[i], "--mem=", 6))
            mem_mode = argv[i] + 6;
        else if (!strncmp(argv[i], "--only=", 7))
            only = argv[i] + 7;
        else {
            fprintf(stderr, "usage: %s [--quick] [--only=mem,ta,sp,omp]\n", argv[0]);
            return 2;
        }
    }
    int do_mem = !!strstr(only, "mem");
    int enabled[NIMPL] = {!!strstr(only, "ta"), !!strstr(only, "sp"), !!strstr(only, "omp")};
    if (quick) {
        N_CHAIN /= 10;
        N_INDEP /= 10;
        N_ROUNDS /= 10;
        N_CREATE /= 10;
        N_MEM /= 10;
        N_MEM_SP_HANDLES /= 10;
    }

    if (mem_mode) {
        alarm(120); /* a memory phase that hangs is killed and reported as failed */
        if (!strcmp(mem_mode, "ta_ops")) return mem_ta_ops();
        if (!strcmp(mem_mode, "ta_handles")) return mem_ta_handles();
        if (!strcmp(mem_mode, "sp_ops")) return mem_sp_tasks();
        if (!strcmp(mem_mode, "sp_handles")) return mem_sp_handles();
        if (!strcmp(mem_mode, "omp_ops")) return mem_omp_ops();
        fprintf(stderr, "unknown memory mode %s\n", mem_mode);
        return 2;
    }

    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) die("readlink /proc/self/exe");
    self[sl] = 0;

    int sp_major, sp_minor, sp_rel;
    starpu_get_version(&sp_major, &sp_minor, &sp_rel);
    printf("tensorasync benchmark: tensorasync %s | StarPU %d.%d.%d (eager, 2 CPU workers) | OpenMP %d (libgomp, "
           "2 threads)\n",
           ta_version(), sp_major, sp_minor, sp_rel, _OPENMP);
    printf("host: %ld online CPUs; %d workers per runtime; 1 warm-up + %d timed rounds, runtimes interleaved%s\n",
           sysconf(_SC_NPROCESSORS_ONLN), NTHREADS, NREP, quick ? "; QUICK MODE (counts / 10)" : "");
    fflush(stdout);

    stat_t res[NPAT][NIMPL];
    for (int p = 0; p < NPAT; p++)
        for (int i = 0; i < NIMPL; i++) res[p][i] = NA;

    /* Memory phases first, each in its own fresh process. */
    double t_start = now_ns();
    if (do_mem) {
        printf("\n== memory phases (fresh process each; growth = max(VmRSS, VmHWM) after - VmRSS before) ==\n");
        res[P_E_OPS][I_TA] = run_mem_child(self, "ta_ops", quick);
        res[P_E_HANDLES][I_TA] = run_mem_child(self, "ta_handles", quick);
        res[P_E_OPS][I_SP] = run_mem_child(self, "sp_ops", quick);
        res[P_E_HANDLES][I_SP] = run_mem_child(self, "sp_handles", quick);
        res[P_E_OPS][I_OMP] = run_mem_child(self, "omp_ops", quick);
    }

    /* Timed phases: round 0 is the warm-up; runtimes rotate each round. */
    static series_t ser[NIMPL][NTIMED];
    double g_max_other_load = 0;
    int nenabled = 0;
    for (int i = 0; i < NIMPL; i++) nenabled += enabled[i];
    if (nenabled) printf("\n== timed phases ==\n");
    for (int round = 0; round <= NREP; round++) {
        for (int k = 0; k < NIMPL; k++) {
            int i = (round + k) % NIMPL;
            if (!enabled[i]) continue;
            const impl_t *im = &impls[i];
            settle_threads(round == 0 ? im->name : NULL);
            if (round == 0) printf("  %s: %s\n", im->name, im->config);
            fflush(stdout);
            im->setup();
            for (int p = 0; p < NTIMED; p++) {
                if (!im->fn[p]) continue;
                series_t *s = &ser[i][p];
                g_truncated = 0;
                if (round == 0) {
                    s->warm = im->fn[p]();
                    s->truncated += g_truncated;
                    continue;
                }
                /* Keep `make run` bounded when a runtime degrades badly (for
                 * example OpenMP spin-waiting while another process holds a
                 * core): no new run after 15 s of timed runs of a pattern. */
                if (s->runs > 0 && s->wall_ns > PATTERN_BUDGET_NS) continue;
                double w0 = now_ns(), sys0 = system_busy_ns(), self0 = self_cpu_ns();
                s->v[s->runs++] = im->fn[p]();
                s->truncated += g_truncated;
                s->wall_ns += now_ns() - w0;
                s->sys_ns += system_busy_ns() - sys0;
                s->self_ns += self_cpu_ns() - self0;
            }
            im->teardown();
        }
    }

    for (int i = 0; i < NIMPL; i++) {
        if (!enabled[i]) continue;
        for (int p = 0; p < NTIMED; p++) {
            if (!impls[i].fn[p]) continue;
            series_t *s = &ser[i][p];
            stat_t st = stat_of(s->v, s->runs);
            st.partial = s->runs < NREP || s->truncated > 0;
            res[p][i] = st;
            /* CPU used by other processes, as a share of the machine
             * (from /proc/stat, so rounded to jiffies). */
            double other = s->wall_ns > 0 ? (s->sys_ns - s->self_ns) /
                                                (s->wall_ns * (double)sysconf(_SC_NPROCESSORS_ONLN))
                                          : 0;
            if (other < 0) other = 0;
            /* /proc/stat counts in jiffies (10 ms): below ~0.15 s of runs the
             * shares are rounding noise, so they are not reported. */
            int measurable = s->wall_ns >= 0.15e9;
            if (measurable && other > g_max_other_load) g_max_other_load = other;
            printf("  %-12s %-8s warm-up %8.1f  runs", impls[i].name, pat_key[p], s->warm);
            for (int r = 0; r < s->runs; r++) printf(" %8.1f", s->v[r]);
            if (s->runs < NREP) printf(" (only %d runs: too slow)", s->runs);
            if (s->truncated) printf(" (%d run(s) truncated at %.0f s)", s->truncated, RUN_LIMIT_NS / 1e9);
            printf("  -> median %.1f min %.1f", st.med, st.min);
            if (measurable)
                printf(" | cpu %.2f cores, other load %.0f%%\n", s->self_ns / s->wall_ns, 100 * other);
            else
                printf(" | (runs too short to measure CPU shares)\n");
        }
    }
    if (enabled[I_OMP]) res[P_D][I_OMP].note = "*";

    /* b' (tensorasync only) is shown against the same b numbers of the others. */
    res[P_B_EACH][I_SP] = res[P_B][I_SP];
    res[P_B_EACH][I_OMP] = res[P_B][I_OMP];

    printf("\n== results (median of %d runs, min in parentheses; lower is better) ==\n\n", NREP);
    printf("| pattern | tensorasync | StarPU 1.3 | OpenMP | StarPU/ours | OpenMP/ours | target (ours) | ours vs target |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int p = 0; p < NPAT; p++) {
        char c[NIMPL][64], r1[32], r2[32];
        for (int i = 0; i < NIMPL; i++) fmt_cell(c[i], sizeof c[i], res[p][i]);
        fmt_ratio(r1, sizeof r1, res[p][I_SP], res[p][I_TA]);
        fmt_ratio(r2, sizeof r2, res[p][I_OMP], res[p][I_TA]);
        const char *verdict = !res[p][I_TA].valid ? "n/a" : res[p][I_TA].med <= pat_target[p] ? "PASS" : "MISS";
        printf("| %s | %s | %s | %s | %s | %s | <= %.0f %s | %s |\n", pat_desc[p], c[I_TA], c[I_SP], c[I_OMP], r1, r2,
               pat_target[p], pat_unit[p], verdict);
    }
    int any_partial = 0;
    for (int p = 0; p < NPAT; p++)
        for (int i = 0; i < NIMPL; i++) any_partial |= res[p][i].valid && res[p][i].partial;
    if (any_partial)
        printf("\n! fewer than %d runs, or runs truncated after %.0f s: the runtime was very slow (see its line above).",
               NREP, RUN_LIMIT_NS / 1e9);
    printf("\nUnits: ns per task for a-c (c counts all 90k tasks), ns per create+free pair for d, bytes for e.\n"
           "(d) StarPU = starpu_variable_data_register + starpu_data_unregister of existing memory;\n"
           "    OpenMP * = calloc(1, 8) + free (OpenMP has no data handles; not comparable, no ratio).\n"
           "(b) completion observed by ta_runtime_wait_idle / starpu_task_wait_for_all / taskwait.\n"
           "(b') tensorasync only: completion observed by 100k ta_tensor_wait calls (one per tensor)\n"
           "    instead; StarPU/OpenMP columns repeat (b).\n"
           "(e) one fresh process per figure; growth of peak RSS (VmHWM) over VmRSS before, divided by\n"
           "    the count: 10^6 operations queued behind one running writer (StarPU: tasks; OpenMP:\n"
           "    depend(inout) tasks); 10^6 tensorasync handles, %ld StarPU registered variable handles\n"
           "    (per-handle cost is flat; 10^6 takes ~30 s to unregister). OpenMP has no handles.\n\n",
           N_MEM_SP_HANDLES);

    for (int p = 0; p < NPAT; p++) {
        for (int i = 0; i < NIMPL; i++) {
            if (p == P_B_EACH && i != I_TA) continue; /* same as b */
            stat_t s = res[p][i];
            const char *kind = (p == P_D && i == I_OMP)           ? " kind=calloc_free"
                               : (p == P_D && i == I_SP)           ? " kind=register_unregister"
                               : (p == P_E_HANDLES && i == I_SP)   ? " kind=variable_handle"
                                                                   : "";
            const char *verdict =
                i != I_TA || !s.valid ? "" : s.med <= pat_target[p] ? " verdict=PASS" : " verdict=MISS";
            if (!s.valid)
                printf("RESULT pattern=%s impl=%s unit=%s value=n/a\n", pat_key[p], impl_key[i], unit_key[p]);
            else if (p == P_E_OPS || p == P_E_HANDLES)
                printf("RESULT pattern=%s impl=%s%s unit=%s value=%.1f target=%.0f%s\n", pat_key[p], impl_key[i], kind,
                       unit_key[p], s.med, pat_target[p], verdict);
            else
                printf("RESULT pattern=%s impl=%s%s unit=%s median=%.1f min=%.1f target=%.0f%s%s\n", pat_key[p],
                       impl_key[i], kind, unit_key[p], s.med, s.min, pat_target[p], verdict,
                       s.partial ? " partial=1" : "");
        }
    }
    printf("RESULT meta other_load_max_pct=%.0f host_cpus=%ld workers=%d runs=%d quick=%d\n", 100 * g_max_other_load,
           sysconf(_SC_NPROCESSORS_ONLN), NTHREADS, NREP, quick);
    printf("\nhighest CPU share used by other processes during a timed pattern: %.0f%%%s\n", 100 * g_max_other_load,
           g_max_other_load > 0.10 ? " (the machine was not quiet: expect noise)" : "");
    printf("total bench time: %.1f s\n", (now_ns() - t_start) / 1e9);
    return 0;
}
