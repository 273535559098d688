#!/usr/bin/env bash
# GHEX is built from source by pip and needs Boost and libnuma headers. Install them with
# apt-get when we are root on Debian/Ubuntu; otherwise say exactly what is missing.
set -eu
missing=()
for pkg in libboost-dev libnuma-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} (needed to build GHEX)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "error: building GHEX needs the system packages: ${missing[*]}" >&2
echo "       install them with: sudo apt-get install ${missing[*]}" >&2
echo "       (or the Boost and libnuma development headers of your distribution)" >&2
exit 1
