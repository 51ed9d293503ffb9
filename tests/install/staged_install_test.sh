#!/usr/bin/env bash
# An install into a staging root (DESTDIR) runs without the build tree or the
# checkout: the staged binary sweeps a ready config and runs a command trial
# through the staged probe harness, from a folder outside both, with no
# PYTHONPATH or FEEDTUNE_BIN; the staged Python package imports and has the
# version the build has. Prefix /usr is the .deb's layout (dist-packages);
# /opt/feedtune checks the site-packages one.
#   staged_install_test.sh BUILD_DIR PYTHON3
set -euo pipefail
build=$(cd "$1" && pwd)
python3=$2
work=$(mktemp -d /tmp/feedtune-staged-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for prefix in /usr /opt/feedtune; do
  DESTDIR=$work/stage cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
    { cat "$work/install.log" >&2; fail "cmake --install --prefix $prefix"; }
done
usr=$work/stage/usr
for f in bin/feedtune share/feedtune/configs/quickstart.yaml share/feedtune/configs/smoke.yaml \
         share/feedtune/workloads/python/feedtune_probe.py share/feedtune/python-dir \
         lib/python3/dist-packages/feedtune/__init__.py lib/python3/dist-packages/feedtune/_version.py \
         share/man/man1/feedtune.1.gz share/bash-completion/completions/feedtune; do
  [ -e "$usr/$f" ] || fail "the /usr install has no $f"
done
minor=$("$python3" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ -e "$work/stage/opt/feedtune/lib/python$minor/site-packages/feedtune/__init__.py" ] ||
  fail "the /opt/feedtune install has no lib/python$minor/site-packages/feedtune"

# Nothing of the build or the checkout on the search paths.
run_dir=$work/elsewhere
mkdir -p "$run_dir"
cd "$run_dir"
clean_env=(env -i HOME="$work" PATH=/usr/bin:/bin LANG=C.UTF-8)
feedtune=$usr/bin/feedtune

version=$("${clean_env[@]}" "$feedtune" --version) || fail "feedtune --version"
echo "$version"
build_string=$(head -1 <<<"$version")
[[ $build_string =~ ^feedtune\ [0-9]+\.[0-9]+\.[0-9]+\ \(git\ [^,]+,\ [^,]+,\ CUDA\ [^\)]+\)$ ]] ||
  fail "--version's first line is not 'feedtune X.Y.Z (git C, COMPILER, CUDA ...)': $build_string"

# A ready config by its relative name, found beside the installed binary.
"${clean_env[@]}" "$feedtune" sweep configs/smoke.yaml --db "$work/smoke.db" -q >"$work/sweep.out" 2>"$work/sweep.err" ||
  { cat "$work/sweep.err" >&2; fail "sweep configs/smoke.yaml"; }
grep -q "using $usr/share/feedtune/configs/smoke.yaml (installed with this binary)" "$work/sweep.err" ||
  { cat "$work/sweep.err" >&2; fail "the sweep did not say it took the installed smoke.yaml"; }
report=$("${clean_env[@]}" "$feedtune" report --db "$work/smoke.db") || fail "report"
grep -qF "build:    $build_string" <<<"$report" || { echo "$report" >&2; fail "report does not name the build"; }

# The command workload through the staged probe (Debian's python3 with torch):
# its argv names workloads/python/feedtune_probe.py, relative, which is not in
# this folder, and an installed binary never looks in the checkout, so only the
# staged copy can answer.
"${clean_env[@]}" "$feedtune" trial configs/torch-probe.yaml --set sweep.repeats=1 --set sweep.warmup_batches=2 \
  --set sweep.measure_seconds=0.5 --json >"$work/trial.out" 2>"$work/trial.err" ||
  { cat "$work/trial.err" "$work/trial.out" >&2; fail "trial configs/torch-probe.yaml through the staged probe"; }
"$python3" - "$work/trial.out" <<'PY' || fail "the trial's JSON has no measured samples/s"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
assert any((l.get("samples_per_s") or 0) > 0 or (l.get("trial", {}) or {}).get("samples_per_s", 0) > 0
           for l in lines), lines
PY

# init and fleet write the installed paths: the package's folder, the binary
# and the ready config.
printf 'from feedtune import serve\nserve(dataset=None, step=None, batch_size=16)\n' >tune.py
"${clean_env[@]}" "$feedtune" init --script tune.py >"$work/init.yaml" || fail "init --script tune.py"
grep -q "installed with this feedtune, in $usr/lib/python3/dist-packages" "$work/init.yaml" ||
  { cat "$work/init.yaml" >&2; fail "init does not name the installed Python package"; }
"${clean_env[@]}" "$feedtune" fleet slurm --config configs/smoke.yaml --nodes 2 --results "$work/fleet" \
  >"$work/fleet.sh" 2>/dev/null || fail "fleet slurm --config configs/smoke.yaml"
grep -qF "config='$usr/share/feedtune/configs/smoke.yaml'" "$work/fleet.sh" &&
  grep -qF "'$feedtune' sweep" "$work/fleet.sh" ||
  { cat "$work/fleet.sh" >&2; fail "fleet slurm does not write the installed binary and config"; }

# The staged Python package, by path alone.
"${clean_env[@]}" PYTHONPATH="$usr/lib/python3/dist-packages" "$python3" -c '
import sys, feedtune
assert feedtune.__file__.startswith(sys.argv[1]), feedtune.__file__
print(feedtune.__file__, feedtune.__version__)' "$work/stage" >"$work/import.out" ||
  fail "python3 -c 'import feedtune' against the staged dist-packages"
grep -q " $(cut -d' ' -f2 <<<"$build_string")\$" "$work/import.out" ||
  fail "the staged package's __version__ is not the binary's: $(cat "$work/import.out")"
echo "staged install: sweep, report, command trial and import all ran from $work/stage"
