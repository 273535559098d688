#!/usr/bin/env bash
# Print the path of a working Python >= 3.12 (gt4py 1.2 needs it), or explain and fail.
# A pyenv shim named python3.12 may exist without selecting that version, so each
# candidate is run, not just looked up.
set -u
# 3.12 first: the version gt4py 1.2.3, DaCe and GHEX are verified with here.
candidates=("${PYTHON:-}" python3.12)
if command -v pyenv >/dev/null 2>&1; then
  for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[2-9]' | sort -V); do
    candidates+=("$(pyenv root)/versions/$v/bin/python3")
  done
fi
candidates+=(python3)
for py in "${candidates[@]}"; do
  [ -n "$py" ] || continue
  if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
    command -v "$py" 2>/dev/null || echo "$py"
    exit 0
  fi
done
echo "error: no Python >= 3.12 found (tried: ${candidates[*]}); install python3.12 or set PYTHON=/path/to/python3.12" >&2
exit 1
