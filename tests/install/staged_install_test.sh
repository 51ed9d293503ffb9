#!/usr/bin/env bash
# The install, in the forms a user types (docs/development.md#install-and-package),
# each run without the build tree or the checkout: the installed binary sweeps a
# ready config and runs a command trial through the installed probe harness,
# from a folder outside both, with no PYTHONPATH or FEEDTUNE_BIN; `init` and
# `fleet slurm` write the installed paths; the installed Python package imports
# and has the version the build has.
#   1. cmake --install BUILD --prefix DIR, no DESTDIR (a scratch prefix: the
#      package goes to lib/python3.X/site-packages, and the install prints the
#      PYTHONPATH that finds it, which the import check uses);
#   2. DESTDIR=stage cmake --install BUILD --prefix /usr (the .deb's layout,
#      dist-packages), and --prefix /opt/feedtune (site-packages) beside it.
# (The .deb itself: deb_contents_test.sh.)
#   staged_install_test.sh BUILD_DIR PYTHON3
set -euo pipefail
build=$(cd "$1" && pwd)
python3=$2
work=$(mktemp -d /tmp/feedtune-staged-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
minor=$("$python3" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# check_install FORM ROOT PYDIR: ROOT holds the prefix's files as installed
# (bin/feedtune ...), PYDIR the Python package's folder, as PYTHONPATH.
check_install() {
  local form=$1 root=$2 pydir=$3
  for f in bin/feedtune share/feedtune/configs/quickstart.yaml share/feedtune/configs/smoke.yaml \
           share/feedtune/workloads/python/feedtune_probe.py share/feedtune/python-dir \
           share/man/man1/feedtune.1.gz share/bash-completion/completions/feedtune; do
    [ -e "$root/$f" ] || fail "$form: the install has no $f"
  done
  for f in __init__.py _version.py; do
    [ -e "$pydir/feedtune/$f" ] || fail "$form: the install has no $pydir/feedtune/$f"
  done

  # Nothing of the build or the checkout on the search paths.
  local run_dir=$work/elsewhere-$RANDOM
  mkdir -p "$run_dir"
  pushd "$run_dir" >/dev/null
  local clean_env=(env -i HOME="$work" PATH=/usr/bin:/bin LANG=C.UTF-8)
  local feedtune=$root/bin/feedtune
  local version build_string report

  version=$("${clean_env[@]}" "$feedtune" --version) || fail "$form: feedtune --version"
  build_string=$(head -1 <<<"$version")
  [[ $build_string =~ ^feedtune\ [0-9]+\.[0-9]+\.[0-9]+\ \(git\ [^,]+,\ [^,]+,\ CUDA\ [^\)]+\)$ ]] ||
    fail "$form: --version's first line is not 'feedtune X.Y.Z (git C, COMPILER, CUDA ...)': $build_string"

  # A ready config by its relative name, found beside the installed binary.
  "${clean_env[@]}" "$feedtune" sweep configs/smoke.yaml --db "$run_dir/smoke.db" -q >"$run_dir/sweep.out" 2>"$run_dir/sweep.err" ||
    { cat "$run_dir/sweep.err" >&2; fail "$form: sweep configs/smoke.yaml"; }
  grep -q "using $root/share/feedtune/configs/smoke.yaml (installed with this binary)" "$run_dir/sweep.err" ||
    { cat "$run_dir/sweep.err" >&2; fail "$form: the sweep did not say it took the installed smoke.yaml"; }
  report=$("${clean_env[@]}" "$feedtune" report --db "$run_dir/smoke.db") || fail "$form: report"
  grep -qF "build:    $build_string" <<<"$report" || { echo "$report" >&2; fail "$form: report does not name the build"; }

  # The command workload through the installed probe (Debian's python3 with
  # torch): its argv names workloads/python/feedtune_probe.py, relative, which
  # is not in this folder, and an installed binary never looks in the checkout,
  # so only the installed copy can answer.
  "${clean_env[@]}" "$feedtune" trial configs/torch-probe.yaml --set sweep.repeats=1 --set sweep.warmup_batches=2 \
    --set sweep.measure_seconds=0.5 --json >"$run_dir/trial.out" 2>"$run_dir/trial.err" ||
    { cat "$run_dir/trial.err" "$run_dir/trial.out" >&2; fail "$form: trial configs/torch-probe.yaml through the installed probe"; }
  "$python3" - "$run_dir/trial.out" <<'PY' || fail "$form: the trial's JSON has no measured samples/s"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
assert any((l.get("samples_per_s") or 0) > 0 or (l.get("trial", {}) or {}).get("samples_per_s", 0) > 0
           for l in lines), lines
PY

  # init and fleet write the installed paths: the package's folder, the binary
  # and the ready config.
  printf 'from feedtune import serve\nserve(dataset=None, step=None, batch_size=16)\n' >tune.py
  "${clean_env[@]}" "$feedtune" init --script tune.py >"$run_dir/init.yaml" || fail "$form: init --script tune.py"
  grep -q "installed with this feedtune, in $pydir" "$run_dir/init.yaml" ||
    { cat "$run_dir/init.yaml" >&2; fail "$form: init does not name the installed Python package ($pydir)"; }
  "${clean_env[@]}" "$feedtune" fleet slurm --config configs/smoke.yaml --nodes 2 --results "$run_dir/fleet" \
    >"$run_dir/fleet.sh" 2>/dev/null || fail "$form: fleet slurm --config configs/smoke.yaml"
  grep -qF "config='$root/share/feedtune/configs/smoke.yaml'" "$run_dir/fleet.sh" &&
    grep -qF "'$feedtune' sweep" "$run_dir/fleet.sh" ||
    { cat "$run_dir/fleet.sh" >&2; fail "$form: fleet slurm does not write the installed binary and config"; }

  # The installed Python package, by path alone.
  "${clean_env[@]}" PYTHONPATH="$pydir" "$python3" -c '
import sys, feedtune
assert feedtune.__file__.startswith(sys.argv[1]), feedtune.__file__
print(feedtune.__file__, feedtune.__version__)' "$pydir" >"$run_dir/import.out" ||
    fail "$form: python3 -c 'import feedtune' with PYTHONPATH=$pydir"
  grep -q " $(cut -d' ' -f2 <<<"$build_string")\$" "$run_dir/import.out" ||
    fail "$form: the installed package's __version__ is not the binary's: $(cat "$run_dir/import.out")"
  popd >/dev/null
  echo "$form: sweep, report, command trial, init, fleet and import all ran from $root"
}

# 1. --prefix, no DESTDIR: the usual form, into a scratch prefix.
prefix=$work/prefix
env -u DESTDIR cmake --install "$build" --prefix "$prefix" >"$work/prefix-install.log" 2>&1 ||
  { cat "$work/prefix-install.log" >&2; fail "cmake --install --prefix $prefix (no DESTDIR)"; }
printed=$(sed -n 's/.*use PYTHONPATH=\([^ ]*\) .*/\1/p' "$work/prefix-install.log")
[ "$printed" = "$prefix/lib/python$minor/site-packages" ] ||
  { cat "$work/prefix-install.log" >&2; fail "the --prefix install did not print PYTHONPATH=$prefix/lib/python$minor/site-packages"; }
check_install "--prefix $prefix" "$prefix" "$printed"

# 2. DESTDIR, at /usr (the .deb's layout) and /opt/feedtune (site-packages).
for p in /usr /opt/feedtune; do
  DESTDIR=$work/stage cmake --install "$build" --prefix "$p" >"$work/install.log" ||
    { cat "$work/install.log" >&2; fail "DESTDIR=... cmake --install --prefix $p"; }
done
[ -e "$work/stage/opt/feedtune/lib/python$minor/site-packages/feedtune/__init__.py" ] ||
  fail "the /opt/feedtune install has no lib/python$minor/site-packages/feedtune"
check_install "DESTDIR, --prefix /usr" "$work/stage/usr" "$work/stage/usr/lib/python3/dist-packages"
