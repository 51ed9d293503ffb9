#!/usr/bin/env python3
"""A fake serving command for tests/workloads/command_serve_test.cc: speaks
feedtune's serve protocol (docs/command-protocol.md) without torch, in a few
milliseconds per trial, and misbehaves on request.

Usage: fake_server.py LOG_FILE

At start it appends "start PID CHILD_PID" to LOG_FILE (CHILD_PID: a `sleep`
it leaves running in its process group, as DataLoader workers would be). Per
request it prints `repeats` windows with samples_per_s = 100 * num_workers +
the window's index (with workers, worker_busy_frac 0.25, 0.75, 0.25, ... and
worker_peak_rss_bytes 1000000 x num_workers + the index; no wait_p99_us or
mb_per_s), then {"trial_end": N}. The request's batch_size picks a
fault instead:
  1001 crash: one window, then killed by SIGSEGV
  1002 hang: one window, then sleeps forever
  1003 malformed: one window, then a line that starts with '{' but is not JSON
  1004 missing: one window, then {"trial_end": N} (a window short)
  1005 error: {"error": "..."} and stays up
  1006 noisy: user prints (lines not starting with '{') around the windows
  1007 wrong trial: {"trial_end": N + 1}
  1008 exit: exits with code 3 before any window
  1009 slow: each window takes 0.2 s
  1010 extra: one window more than asked
With FEEDTUNE_PROTOCOL=preflight (the sweep's start, before any trial) it
answers the preflight line as feedtune.serve does (no torch: an empty
version, fork) and exits without logging a start.
"""
import json
import os
import platform
import signal
import subprocess
import sys
import time


def main():
    if os.environ.get("FEEDTUNE_PROTOCOL") == "preflight":
        print(json.dumps({"preflight": {"python_version": platform.python_version(), "torch_version": "",
                                        "default_start_method": "fork", "pickle_checked": False,
                                        "pickle_error": None}}))
        return
    log = sys.argv[1]
    child = subprocess.Popen(["sleep", "300"])
    with open(log, "a") as f:
        f.write("start %d %d\n" % (os.getpid(), child.pid))
    out = sys.stdout
    for line in sys.stdin:
        r = json.loads(line)
        n, mode, repeats = r["trial"], r["batch_size"], r["repeats"]

        def window(i):
            workers = r["num_workers"]
            out.write(json.dumps({"samples_per_s": 100.0 * workers + i, "gpu_idle_frac": 0.5,
                                  "wait_p50_us": 10, "epoch_boundary_ms": 2.5 if r["window_epochs"] else None,
                                  "time_to_first_batch_s": 0.125,
                                  "worker_busy_frac": 0.25 + 0.5 * (i % 2) if workers else None,
                                  "worker_peak_rss_bytes": 1000000 * workers + i if workers else None})
                      + "\n")
            out.flush()

        if mode == 1005:
            out.write(json.dumps({"error": "ValueError: no such thing"}) + "\n")
            out.flush()
            continue
        if mode == 1008:
            sys.stderr.write("fake_server: exiting on purpose\n")
            sys.exit(3)
        for i in range(repeats + (1 if mode == 1010 else 0)):
            if mode == 1006:
                out.write("epoch %d: loading...\n" % i)
            if mode == 1009:
                time.sleep(0.2)
            window(i)
            if i == 0 and mode in (1001, 1002, 1003, 1004):
                break
        if mode == 1001:
            sys.stderr.write("fake_server: about to crash\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSEGV)
        if mode == 1002:
            sys.stderr.write("fake_server: hanging\n")
            sys.stderr.flush()
            time.sleep(300)
        if mode == 1003:
            out.write("{samples_per_s: oops\n")
            out.flush()
            time.sleep(300)  # it must be killed, not waited for
        out.write(json.dumps({"trial_end": n + 1 if mode == 1007 else n}) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
