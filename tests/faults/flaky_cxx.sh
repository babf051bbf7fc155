#!/bin/sh
# A C++ compiler that fails one in three compiles of kernels that use tanh (counter shared
# by every process through a file, under a lock); everything else goes to the real g++.
# With FLAKY_CXX_FAIL_FIRST=K it fails the first K such compiles instead (a toolchain that
# breaks for a while, then recovers).
for a in "$@"; do
  case "$a" in
    *.cpp) if grep -q "tanh" "$a" 2>/dev/null; then tagged="$a"; fi ;;
  esac
done
if [ -n "$tagged" ]; then
  n=$(flock "$FLAKY_CXX_DIR/lock" sh -c 'n=$(cat "$FLAKY_CXX_DIR/count" 2>/dev/null || echo 0); echo $((n + 1)) > "$FLAKY_CXX_DIR/count"; echo $n')
  if [ -n "$FLAKY_CXX_FAIL_FIRST" ]; then fail=$((n < FLAKY_CXX_FAIL_FIRST)); else fail=$((n % 3 == 0)); fi
  if [ "$fail" -eq 1 ]; then
    echo "$tagged:1:1: error: flaky toolchain: lost the connection to the build server" >&2
    exit 1
  fi
fi
exec g++ "$@"
