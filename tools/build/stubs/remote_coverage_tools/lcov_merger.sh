#!/bin/sh
# Merges one test's coverage: every lcov file (a file whose first record
# is TN: or SF:) under --coverage_dir, concatenated into --output_file.
set -eu
dir="" out=""
for arg in "$@"; do
  case "$arg" in
    --coverage_dir=*) dir=${arg#--coverage_dir=} ;;
    --output_file=*) out=${arg#--output_file=} ;;
  esac
done
[ -n "$dir" ] && [ -n "$out" ] || { echo "lcov_merger: --coverage_dir and --output_file are required" >&2; exit 2; }
: >"$out"
find "$dir" -type f ! -path "$out" | sort | while read -r f; do
  case "$(head -c 3 "$f")" in
    TN:|SF:) cat "$f" >>"$out" ;;
  esac
done
