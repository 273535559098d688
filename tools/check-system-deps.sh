#!/usr/bin/env bash
# GHEX is built from source by pip and needs the Boost and libnuma headers. Checks for the
# headers themselves, where the C++ compiler looks (any distribution, any prefix on CPATH);
# installs what is missing with apt-get when we are root on Debian/Ubuntu; otherwise says what
# is missing. SKIP_SYSTEM_DEPS=1 skips the check (GHEX's build then reports what it lacks).
set -eu
[ "${SKIP_SYSTEM_DEPS:-0}" = 1 ] && exit 0
cxx=${CXX:-c++}
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "error: building GHEX needs a C++ compiler (\$CXX or c++ on PATH), none found" >&2
  exit 1
fi
declare -A header=([libboost-dev]=boost/version.hpp [libnuma-dev]=numa.h)
missing=()
for pkg in libboost-dev libnuma-dev; do
  echo "#include <${header[$pkg]}>" | "$cxx" -E -x c++ - >/dev/null 2>&1 || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} (needed to build GHEX)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "error: building GHEX needs the headers of: ${missing[*]}" >&2
echo "       Debian/Ubuntu: sudo apt-get install ${missing[*]}" >&2
echo "       elsewhere: your distribution's Boost and libnuma development packages, or their" >&2
echo "       include directories on CPATH; SKIP_SYSTEM_DEPS=1 skips this check" >&2
exit 1
