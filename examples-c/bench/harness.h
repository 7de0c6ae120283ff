/*
 * harness.h: measurement helpers shared by the benchmark programs in this
 * folder (bench.c, tiled.c, gemm.c, gpu.c). Linux only (/proc).
 *
 *   now_ns()            monotonic wall clock, ns
 *   cmp_double          qsort comparator for doubles
 *   median(v, n)        median of n samples (v is left as it is)
 *   best(v, n)          smallest of n samples (the best time)
 *   other_threads(...)  this process's threads other than the main one: how
 *                       many, how many are running (state R), and their names
 *   settle(...)         poll other_threads until none has run for 3 polls in a
 *                       row (the previous runtime's workers are quiet)
 *   system_busy_ns()    system-wide busy CPU time from /proc/stat, to spot other load
 *   self_cpu_ns()       this process's CPU time
 *   starpu_env(sched)   the StarPU environment every comparison uses: 2 CPU
 *                       workers, scheduler `sched`, no accelerators, no
 *                       calibration, statistics or profiling (call before
 *                       starpu_init)
 */
#ifndef TA_BENCH_HARNESS_H
#define TA_BENCH_HARNESS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static inline double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double median(const double *v, int n) {
    double *w = malloc((size_t)n * sizeof *w);
    if (!w) return v[0];
    memcpy(w, v, (size_t)n * sizeof *w);
    qsort(w, (size_t)n, sizeof *w, cmp_double);
    double m = n % 2 ? w[n / 2] : 0.5 * (w[n / 2 - 1] + w[n / 2]);
    free(w);
    return m;
}

static inline double best(const double *v, int n) {
    double b = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < b) b = v[i];
    return b;
}

/* Threads of this process other than the main one: returns how many (-1
 * without /proc), sets *running to how many are running or runnable (state R)
 * and writes their names into names (all of them, or only the running ones
 * with running_names_only). */
static inline int other_threads(int *running, char *names, size_t cap, int running_names_only) {
    DIR *d = opendir("/proc/self/task");
    *running = 0;
    names[0] = 0;
    if (!d) return -1;
    int n = 0;
    size_t len = 0;
    pid_t self = getpid();
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
        n++;
        char path[300], stat[512] = "", comm[64] = "?";
        int is_running = 0;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(stat, sizeof stat, f)) {
                /* "tid (comm) S ...": the name is between the first '(' and the last ')'. */
                char *p = strrchr(stat, ')'), *q = strchr(stat, '(');
                if (p && p[1] == ' ' && p[2] == 'R') is_running = 1;
                if (p && q && p > q && (size_t)(p - q) < sizeof comm) {
                    memcpy(comm, q + 1, (size_t)(p - q - 1));
                    comm[p - q - 1] = 0;
                }
            }
            fclose(f);
        }
        *running += is_running;
        if ((is_running || !running_names_only) && len + strlen(comm) + 2 < cap)
            len += (size_t)snprintf(names + len, cap - len, " %s", comm);
    }
    closedir(d);
    return n;
}

/* Waits (at most max_polls polls, 2 ms apart) until no other thread of this
 * process has been running for 3 polls in a row, so the previous runtime's
 * exiting or spinning workers do not compete with the next one. Returns
 * whether it got there; *total, *running and names describe the last poll. */
static inline int settle(int max_polls, int running_names_only, int *total, int *running, char *names, size_t cap) {
    int quiet = 0;
    for (int i = 0; i < max_polls && quiet < 3; i++) {
        *total = other_threads(running, names, cap, running_names_only);
        quiet = *running == 0 ? quiet + 1 : 0;
        if (quiet < 3) {
            struct timespec pause = {0, 2000000};
            nanosleep(&pause, NULL);
        }
    }
    return quiet >= 3;
}

/* System-wide busy CPU time (ns) from /proc/stat: user nice system (idle and
 * iowait skipped) irq softirq steal. */
static inline double system_busy_ns(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (n < 8) return 0;
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return (double)busy * 1e9 / (double)sysconf(_SC_CLK_TCK);
}

static inline double self_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline void starpu_env(const char *sched) {
    setenv("STARPU_NCPU", "2", 1);
    setenv("STARPU_SCHED", sched, 1);
    setenv("STARPU_NCUDA", "0", 1);
    setenv("STARPU_NOPENCL", "0", 1);
    setenv("STARPU_NMIC", "0", 1);
    setenv("STARPU_NMPI_MS", "0", 1);
    setenv("STARPU_CALIBRATE", "0", 1);
    setenv("STARPU_BUS_STATS", "0", 1);
    setenv("STARPU_WORKER_STATS", "0", 1);
    setenv("STARPU_PROFILING", "0", 1);
    setenv("STARPU_SILENT", "1", 1);
}

#endif
