#!/bin/sh
# run-tests.sh PHASE LOGDIR TIMEOUT PROGRAM...
#
# Runs each program (under $VALGRIND if set) with a time limit, keeps its
# output in LOGDIR/NAME.log, prints one line per program, and ends with the
# line "N passed, M failed" that CI reads. Exits non-zero if any program failed.
# V=1 prints every log. JOBS=N runs N programs at a time (default 1); the
# lines still come in the programs' order. Valgrind runs a program's threads
# one at a time, so its phase uses one job per core.
set -u
phase=$1 logdir=$2 limit=$3
shift 3
mkdir -p "$logdir"

# One program: its log, and its exit status and seconds in LOGDIR/NAME.rc.
run_one() {
    name=$(basename "$1")
    rm -f "$logdir/$name.rc"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086 # VALGRIND holds a command and its options
    timeout -k 10 "$limit" ${VALGRIND:-} "$1" >"$logdir/$name.log" 2>&1
    rc=$?
    secs=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.2f", $2 - $1 }')
    echo "$rc $secs" >"$logdir/$name.rc"
}

echo "== $phase: $# programs${VALGRIND:+ under valgrind}"
jobs=${JOBS:-1} running=0
for prog in "$@"; do
    run_one "$prog" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait
        running=0
    fi
done
wait

passed=0 failed=0 failures=
for prog in "$@"; do
    name=$(basename "$prog")
    log=$logdir/$name.log
    rc=1 secs=-
    [ -f "$logdir/$name.rc" ] && read -r rc secs <"$logdir/$name.rc"
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        printf 'PASS   %-26s %6s s\n' "$name" "$secs"
        [ "${V:-0}" = 1 ] && sed 's/^/    /' "$log"
    else
        failed=$((failed + 1))
        failures="$failures $name"
        case $rc in
            124|137) why="timed out after $limit s" ;;
            99) why="valgrind reported errors or leaks" ;;
            *) why="exit status $rc" ;;
        esac
        printf 'FAIL   %-26s %6s s  (%s; log: %s)\n' "$name" "$secs" "$why" "$log"
        sed 's/^/    /' "$log" | tail -n 60
    fi
done
[ "$failed" -eq 0 ] || echo "$phase: failed:$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
