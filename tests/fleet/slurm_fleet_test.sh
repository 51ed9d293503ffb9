#!/usr/bin/env bash
# `feedtune fleet slurm` on a real Slurm cluster (scripts/slurm-local: munged,
# slurmctld and slurmd on this machine, one node, oversubscribed). Submits:
#   - the printed script, 2 tasks of a short sweep, task 1 given a bad config;
#   - with --submit, 1 task.
# Waits for both merge jobs, then checks that fleet.db holds the good run,
# fleet.html names this host, and the failing task did not stop the merge
# (fleet-summary.txt names it). Starts the cluster when it is not running and
# then stops it again; a cluster already running is left running.
#
#   slurm_fleet_test.sh FEEDTUNE_BINARY SOURCE_DIR      exit 0 pass, 1 fail, 77 skipped (not root)
set -euo pipefail
feedtune=$1
src=$2
slurm_local=$src/scripts/slurm-local

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: starting munged, slurmctld and slurmd needs root (CI runs as root)"
  exit 77
fi

# One cluster per machine (fixed ports): build folders testing at the same time take turns.
exec 9>/tmp/feedtune-slurm-local.lock
flock 9

work=$(mktemp -d /tmp/feedtune-fleet-test.XXXXXX)
started_here=0
"$slurm_local" status >/dev/null 2>&1 || started_here=1
cleanup() {
  [ "$started_here" = 1 ] && "$slurm_local" stop >/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
"$slurm_local" start
eval "$("$slurm_local" env)"

fail() {
  echo "FAIL: $*"
  echo "---- squeue"; squeue || true
  for f in "$work"/*/logs/*.out "$work"/*/fleet-summary.txt; do
    [ -e "$f" ] && { echo "---- $f"; cat "$f"; }
  done
  exit 1
}

cp "$src/tests/fleet/tiny.yaml" "$work/good.yaml"
printf 'name: bad\nworkload:\n  kind: synthetic\n  samplez: 64\n' >"$work/bad.yaml"

# 1. The printed script, task 1 with the bad config.
"$feedtune" fleet slurm --config "$work/good.yaml" --nodes 2 --results "$work/fleet" --time 00:10:00 >"$work/fleet.sh"
grep -q '^#SBATCH --array=0-1$' "$work/fleet.sh" || fail "no 2-task array in the script"
grep -q '^#SBATCH --exclusive$' "$work/fleet.sh" || fail "tasks are not exclusive"
grep -q -- '--dependency=afterany:' "$work/fleet.sh" || fail "no afterany dependency for the merge"
grep -qF "config='$work/good.yaml'" "$work/fleet.sh" || fail "config path not absolute"
grep -qF "'$feedtune' sweep" "$work/fleet.sh" || fail "the script does not run this feedtune binary"
# A failing task: the array job's task 1 reads the bad config instead.
sed -i "/^config=/a [ \"\$task\" = 1 ] \&\& config='$work/bad.yaml'" "$work/fleet.sh"
grep -q "^\[ \"\$task\" = 1 \]" "$work/fleet.sh" || fail "could not give task 1 the bad config"
submitted=$(bash "$work/fleet.sh") || fail "the script's submission failed: $submitted"
echo "printed script: $submitted"
merge1=$(sed -n 's/.*merge job \([0-9]*\);.*/\1/p' <<<"$submitted")

# 2. --submit, one task.
submitted=$("$feedtune" fleet slurm --config "$work/good.yaml" --nodes 1 --results "$work/submit" --submit) ||
  fail "--submit failed: $submitted"
echo "--submit: $submitted"
grep -qE '^array job [0-9]+ \(1 tasks\), merge job [0-9]+; results in ' <<<"$submitted" || fail "--submit printed '$submitted'"
merge2=$(sed -n 's/.*merge job \([0-9]*\);.*/\1/p' <<<"$submitted")
[ -s "$work/submit/fleet-array.sbatch" ] && [ -s "$work/submit/fleet-merge.sbatch" ] || fail "--submit kept no job scripts"

# Both merge jobs end after their arrays (about 20 s on 2 busy cores; 5 minutes at most).
for _ in $(seq 1 300); do
  [ -z "$(squeue -h -o %i -j "$merge1,$merge2" 2>/dev/null)" ] && break
  sleep 1
done
[ -z "$(squeue -h -o %i -j "$merge1,$merge2" 2>/dev/null)" ] && [ -s "$work/fleet/fleet-summary.txt" ] ||
  fail "the merge jobs did not finish within 5 minutes"

host=$(hostname)
runs() { sqlite3 "$1" "SELECT count(*) FROM runs WHERE status = 'done'"; }
[ "$(runs "$work/fleet/fleet.db")" = 1 ] || fail "fleet.db holds $(runs "$work/fleet/fleet.db") done runs, expected 1"
[ "$(sqlite3 "$work/fleet/fleet.db" "SELECT DISTINCT workload_name FROM runs")" = fleet-tiny ] ||
  fail "fleet.db's run is not the fleet-tiny workload"
names_host() { grep -qE "data-host=\"$host\"|<td>$host</td>" "$1"; }  # the host's row in compare's HTML
names_host "$work/fleet/fleet.html" || fail "fleet.html does not name this host ($host)"
ls "$work/fleet"/sweep-*-task0.db >/dev/null || fail "task 0 left no results file"
grep -qF "task 1: missing: the sweep on $(hostname -s) exited 2" "$work/fleet/fleet-summary.txt" ||
  fail "the summary does not name the failed task 1"
grep -qF "feedtune fleet: 2 tasks, 1 succeeded, 1 missing" "$work/fleet/fleet-summary.txt" || fail "summary's count"
grep -qF "samplez" "$work/fleet/logs/task-1.out" || fail "task 1's log does not say what was wrong with its config"

[ "$(runs "$work/submit/fleet.db")" = 1 ] || fail "--submit's fleet.db holds no done run"
grep -qF "feedtune fleet: 1 tasks, 1 succeeded, 0 missing" "$work/submit/fleet-summary.txt" || fail "--submit's summary"
names_host "$work/submit/fleet.html" || fail "--submit's fleet.html does not name this host"

echo "PASS: Slurm fleet: 2-task array (one bad config) and a --submit fleet merged into fleet.db and fleet.html"
cat "$work/fleet/fleet-summary.txt"
