#!/bin/sh
# Combines the tests' coverage files listed in --reports_file (one path per
# line) into --output_file, for `bazel coverage --combined_report=lcov`.
set -eu
list="" out=""
for arg in "$@"; do
  case "$arg" in
    --reports_file=*) list=${arg#--reports_file=} ;;
    --output_file=*) out=${arg#--output_file=} ;;
  esac
done
[ -n "$list" ] && [ -n "$out" ] || { echo "coverage_report_generator: --reports_file and --output_file are required" >&2; exit 2; }
: >"$out"
while read -r f; do
  [ -f "$f" ] && cat "$f" >>"$out"
done <"$list"
