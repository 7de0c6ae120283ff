/*
 * openblas_best.h: make the OpenBLAS peer run the best kernel it has for this
 * CPU, and say which kernel ran.
 *
 * An OpenBLAS built with DYNAMIC_ARCH picks its kernel from the CPU model at
 * load time. A release older than the CPU does not know the model and falls
 * back to a generic kernel (Debian's 0.3.21 on AVX-512 Xeons: "Prescott",
 * about a fifth of the speed of its SkylakeX kernel). A benchmark against that
 * kernel compares against a peer nobody on this CPU would run, so:
 *
 *   openblas_best_init(argv)  at the top of main, before any thread exists:
 *     when OpenBLAS runs a kernel for an older instruction set than the CPU
 *     has (its own fallback, or an OPENBLAS_CORETYPE inherited from the
 *     environment; TA_BENCH_KEEP_CORETYPE=1 keeps that), sets it from the CPU's flags
 *     (AVX-512: SkylakeX, or Cooperlake with AVX512-BF16; AVX2: Haswell, or
 *     Zen on AMD) and executes the program again, so that OpenBLAS (and the
 *     copy tensorasync's BLAS backend loads) starts with that kernel.
 *   openblas_kernel_line()    the kernel in use and what the CPU supports,
 *                             for the benchmark's header.
 *   openblas_fallback()       nonzero when the kernel is still below the
 *                             CPU's level: the benchmark then prints no
 *                             verdict against OpenBLAS.
 */
#ifndef TA_BENCH_OPENBLAS_BEST_H
#define TA_BENCH_OPENBLAS_BEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

char *openblas_get_corename(void);

/* Instruction-set levels: 1 SSE, 2 AVX, 3 AVX2+FMA, 4 AVX-512 (F, BW, DQ, VL). */
static int ob_cpu_level(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return 4;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 3;
    if (__builtin_cpu_supports("avx")) return 2;
    return 1;
}

/* The level an OpenBLAS x86-64 core name's kernels use (0: not an x86-64 core we know). */
static int ob_core_level(const char *core) {
    static const char *const l4[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const l3[] = {"Haswell", "Zen", "SkylakeX_AVX2"};
    static const char *const l2[] = {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller", "Excavator"};
    static const char *const l1[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                                     "Opteron", "Opteron_SSE3", "Barcelona", "Bobcat", "Nano", "Katmai",
                                     "Coppermine", "Northwood"};
    if (!core) return 0;
    for (size_t i = 0; i < sizeof l4 / sizeof *l4; i++)
        if (!strcasecmp(core, l4[i])) return 4;
    for (size_t i = 0; i < sizeof l3 / sizeof *l3; i++)
        if (!strcasecmp(core, l3[i])) return 3;
    for (size_t i = 0; i < sizeof l2 / sizeof *l2; i++)
        if (!strcasecmp(core, l2[i])) return 2;
    for (size_t i = 0; i < sizeof l1 / sizeof *l1; i++)
        if (!strcasecmp(core, l1[i])) return 1;
    return 0;
}

/* The core to ask for on this CPU, or NULL when OpenBLAS's choice cannot be improved by name. */
static const char *ob_wanted_core(int level) {
    if (level >= 4) return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
    if (level == 3) return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
    if (level == 2) return "Sandybridge";
    return NULL;
}

static int ob_is_fallback(void) {
    int have = ob_core_level(openblas_get_corename());
    /* An unknown name is a core newer than this list (or not x86-64): trust it. */
    return have != 0 && have < ob_cpu_level();
}

static int openblas_fallback(void) { return ob_is_fallback(); }

static void openblas_best_init(char **argv) {
    /* Once only, and never against an explicit wish to keep the given kernel. */
    if (!ob_is_fallback() || getenv("TA_BENCH_OPENBLAS_RERUN") || getenv("TA_BENCH_KEEP_CORETYPE")) return;
    const char *want = ob_wanted_core(ob_cpu_level());
    if (!want) return;
    const char *env = getenv("OPENBLAS_CORETYPE");
    fprintf(stderr, "OpenBLAS runs its %s kernel (%s%s) below this CPU's level; running again with "
            "OPENBLAS_CORETYPE=%s (TA_BENCH_KEEP_CORETYPE=1 keeps it)\n",
            openblas_get_corename(), env ? "OPENBLAS_CORETYPE=" : "its own choice", env ? env : "", want);
    fflush(NULL);
    setenv("OPENBLAS_CORETYPE", want, 1);
    setenv("TA_BENCH_OPENBLAS_RERUN", "1", 1);
    execv("/proc/self/exe", argv);
    perror("execv /proc/self/exe (continuing with the fallback kernel)");
}

/* "OpenBLAS kernel: SkylakeX (OPENBLAS_CORETYPE=SkylakeX; CPU level AVX-512)". */
static const char *openblas_kernel_line(void) {
    static char line[256];
    static const char *const names[] = {"?", "SSE", "AVX", "AVX2", "AVX-512"};
    const char *env = getenv("OPENBLAS_CORETYPE");
    snprintf(line, sizeof line, "OpenBLAS kernel: %s (%s%s%s; CPU level %s)%s", openblas_get_corename(),
             env ? "OPENBLAS_CORETYPE=" : "chosen by OpenBLAS", env ? env : "", "", names[ob_cpu_level()],
             ob_is_fallback() ? " -- a FALLBACK kernel below the CPU's level: no verdicts against OpenBLAS" : "");
    return line;
}

#endif
