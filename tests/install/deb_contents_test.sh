#!/usr/bin/env bash
# The Debian package: `cpack -G DEB` in the build folder (what `make deb` runs)
# makes feedtune_<version>_<arch>.deb, and `dpkg-deb --contents` shows the
# binary, the Python package, the configs, the probe, the man page and the
# completion; its control names python3 and the shared libraries' packages,
# and recommends python3-torch. With lintian installed, no error.
#   deb_contents_test.sh BUILD_DIR VERSION
set -euo pipefail
build=$(cd "$1" && pwd)
version=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || fail "dpkg-deb is missing (scripts/setup-deps installs dpkg-dev)"
arch=$(dpkg --print-architecture)
deb=$build/feedtune_${version}_${arch}.deb

# A fresh package each time, so the check is of this build's files.
rm -f "$deb"
(cd "$build" && cpack -G DEB >"$build/cpack.log" 2>&1) || { cat "$build/cpack.log" >&2; fail "cpack -G DEB"; }
[ -f "$deb" ] || { ls "$build"/*.deb >&2 || true; fail "cpack made no $deb"; }
echo "$(basename "$deb"): $(stat -c %s "$deb") bytes"

contents=$(dpkg-deb --contents "$deb")
for f in ./usr/bin/feedtune ./usr/lib/python3/dist-packages/feedtune/__init__.py \
         ./usr/lib/python3/dist-packages/feedtune/_version.py ./usr/lib/python3/dist-packages/feedtune/probe.py \
         ./usr/share/feedtune/configs/quickstart.yaml ./usr/share/feedtune/workloads/python/feedtune_probe.py \
         ./usr/share/man/man1/feedtune.1.gz ./usr/share/bash-completion/completions/feedtune \
         ./usr/share/doc/feedtune/copyright ./usr/share/doc/feedtune/changelog.gz; do
  grep -qE " $f\$" <<<"$contents" || { echo "$contents" >&2; fail "the package has no $f"; }
done
grep -q "__pycache__" <<<"$contents" && fail "the package carries __pycache__ (byte code belongs to the box)"

control=$(dpkg-deb --field "$deb")
echo "$control"
grep -qE '^Depends:.*\bpython3\b' <<<"$control" || fail "Depends lacks python3"
grep -qE '^Depends:.*\blibc6\b' <<<"$control" || fail "Depends lacks the shared libraries (dpkg-shlibdeps did not run)"
grep -qE '^Recommends:.*\bpython3-torch\b' <<<"$control" || fail "Recommends lacks python3-torch"

# The man page renders without a warning (man -l on the packaged file).
if command -v man >/dev/null; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  dpkg-deb -x "$deb" "$tmp"
  warnings=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$tmp/usr/share/man/man1/feedtune.1.gz" 2>&1 >/dev/null || true)
  [ -z "$warnings" ] || fail "the man page renders with warnings: $warnings"
  bash -n "$tmp/usr/share/bash-completion/completions/feedtune" || fail "the completion is not valid bash"
fi

if command -v lintian >/dev/null; then
  lintian_out=$(lintian --tag-display-limit 0 "$deb" 2>&1 || true)
  echo "$lintian_out"
  grep -q '^E: ' <<<"$lintian_out" && fail "lintian reports errors"
else
  echo "lintian is not installed (scripts/setup-deps installs it): its check skipped"
fi
echo "package $deb checked"
