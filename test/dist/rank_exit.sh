#!/usr/bin/env bash
# A rank that leaves must not hang the others: runs dist_exit under mpirun with rank 1
# exiting at once, then staying alive without joining, and checks that each job ends, with a
# failure, well within a bound (here 60 s; the second names the timeout, once for the four
# collectives it has under way).
#   rank_exit.sh MPIEXEC DIST_EXIT [MPIEXEC_FLAGS...]
set -uo pipefail
mpiexec=$1 program=$2
shift 2
fail=0

start=$SECONDS
out=$(timeout 60 "$mpiexec" "$@" -np 2 "$program" exit 2>&1)
code=$?
echo "rank 1 exits: job exit code $code after $((SECONDS - start)) s"
if (( code == 0 || code == 124 )); then
  echo "FAILED: expected the job to fail, not $( ((code == 124)) && echo hang || echo succeed )"; echo "$out"; fail=1
fi

start=$SECONDS
out=$(LAZYJIT_DIST_TIMEOUT=3 timeout 60 "$mpiexec" "$@" -x LAZYJIT_DIST_TIMEOUT -np 2 "$program" hang 2>&1)
code=$?
echo "rank 1 never joins: job exit code $code after $((SECONDS - start)) s"
if (( code == 0 || code == 124 )); then
  echo "FAILED: expected the job to fail within the timeout"; echo "$out"; fail=1
elif ! grep -q "all_reduce: the other ranks did not answer within 3 s (LAZYJIT_DIST_TIMEOUT)" <<<"$out"; then
  echo "FAILED: rank 0 did not report the timeout"; echo "$out"; fail=1
elif (( SECONDS - start > 20 )); then
  echo "FAILED: four collectives under way took $((SECONDS - start)) s to fail, not one timeout of 3 s"; fail=1
fi
exit $fail
