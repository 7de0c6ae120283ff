#!/bin/sh
# run-tests.sh PHASE LOGDIR TIMEOUT PROGRAM...
#
# Runs each program (under $VALGRIND if set) with a time limit, keeps its
# output in LOGDIR/NAME.log, prints one line per program, and ends with the
# line "N passed, M failed" that CI reads. Exits non-zero if any program failed.
# V=1 prints every log.
set -u
phase=$1 logdir=$2 limit=$3
shift 3
mkdir -p "$logdir"
passed=0 failed=0 failures=
echo "== $phase: $# programs${VALGRIND:+ under valgrind}"
for prog in "$@"; do
    name=$(basename "$prog")
    log=$logdir/$name.log
    start=$(date +%s.%N)
    # shellcheck disable=SC2086 # VALGRIND holds a command and its options
    timeout -k 10 "$limit" ${VALGRIND:-} "$prog" >"$log" 2>&1
    rc=$?
    secs=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.2f", $2 - $1 }')
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
