"""The workers' memory over a trial, sampled as feedtune's native
trials sample it (tuner/measure/worker_memory.h, WorkerMemorySampler): each
worker process's private resident memory, its series over the epoch
position, and the figures each window's result line carries.

What is sampled: each DataLoader worker process alive (its pid and start
time, from the workers' shared counters), or, with num_workers 0, this
process, which then reads the samples itself. Private RSS is (resident -
shared) pages of /proc/PID/statm: the batches in shared memory and the pages
shared with the parent since the fork are left out.

When: at each window's start, after the first and the last batch of each
epoch, and every INTERVAL_S between; only between steps (after a step, never
inside the wait for a batch). A sample is two small /proc reads per worker.
The epoch samples are skipped once sampling has taken both ALLOWANCE_S of
this thread's CPU time in all (not wall time: a preempted /proc read on a
loaded box is the box's wait, not the sampler's cost) and more than MAX_SHARE of the time since the first sample, so epochs
of a batch or two do not turn into a sample at every step.

The figures (the same as TrialRecord's worker_rss_*): start, the series' mean
first sample; peak, the largest sample of one worker; samples; epochs, the
longest span one series covered; growth, bytes per epoch per worker, each
series' least-squares slope over the epoch position averaged over the series
weighted by their spans. A new worker process (non-persistent workers restart
each epoch) is a new series. The sampler lives for the whole trial, so each
window's figures cover every window so far. Stdlib only.
"""

import os
import time

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")

# The result line's keys, as TrialRecord names its fields.
KEYS = ("worker_rss_start_bytes", "worker_rss_peak_bytes", "worker_rss_growth_bytes_per_epoch",
        "worker_rss_samples", "worker_rss_epochs")


def _read(path):
    """The start of a small /proc file as bytes, or None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_private_rss(pid):
    """Private resident bytes of process `pid` (0: this process), (resident -
    shared) pages of /proc/PID/statm as tuner/measure/proc_stats.cc reads them;
    None when it is gone or holds no memory (a zombie)."""
    text = _read("/proc/self/statm" if pid == 0 else "/proc/%d/statm" % pid)
    if text is None:
        return None
    try:
        fields = text.split()
        resident, shared = int(fields[1]), int(fields[2])
    except (ValueError, IndexError):
        return None
    if resident <= 0:
        return None
    return (resident - shared) * PAGE_BYTES


def process_start_ticks(pid):
    """The process's start time (field 22 of /proc/PID/stat, clock ticks since
    boot), or None when it is gone: with the pid it names one process."""
    text = _read("/proc/%d/stat" % pid)
    if text is None:
        return None
    try:
        return int(text[text.rindex(b")") + 2:].split()[19])  # fields from the 3rd on, after the name
    except (ValueError, IndexError):
        return None


class Series:
    """One process's samples as running sums: a least-squares line of its RSS
    over the epoch position (Welford's co-moments)."""

    __slots__ = ("n", "mean_x", "mean_y", "m2_x", "c_xy", "first_x", "last_x", "first_y", "peak_y")

    def __init__(self):
        self.n = 0
        self.mean_x = self.mean_y = self.m2_x = self.c_xy = 0.0
        self.first_x = self.last_x = self.first_y = self.peak_y = 0.0

    def add(self, x, y):
        if self.n == 0:
            self.first_x, self.first_y, self.peak_y = x, y, y
        self.n += 1
        dx = x - self.mean_x
        self.mean_x += dx / self.n
        self.mean_y += (y - self.mean_y) / self.n
        self.m2_x += dx * (x - self.mean_x)
        self.c_xy += dx * (y - self.mean_y)
        self.last_x = x
        self.peak_y = max(self.peak_y, y)

    def span(self):
        return self.last_x - self.first_x

    def slope(self):
        """Bytes per epoch, or None with fewer than two positions."""
        return self.c_xy / self.m2_x if self.n >= 2 and self.m2_x > 0 else None


class WorkerMemorySampler:
    """One trial's samples (one thread, the training loop's, uses it)."""

    INTERVAL_S = 0.1
    MAX_SHARE = 0.01
    ALLOWANCE_S = 0.005

    def __init__(self, clock=time.monotonic, read_rss=read_private_rss, start_ticks=process_start_ticks,
                 cpu_clock=time.thread_time):
        self.clock, self.read_rss, self.start_ticks, self.cpu_clock = clock, read_rss, start_ticks, cpu_clock
        self.series = {}  # (pid, start ticks) -> Series, in the order first seen
        self.first = None  # clock() at the first sample
        self.last = None  # and at the last
        self.spent = 0.0  # this thread's CPU seconds inside sample(), all told

    def due(self, epoch_edge):
        """Whether to sample after this step: INTERVAL_S has passed since the
        last sample, or the step began or ended an epoch (`epoch_edge`) and
        sampling has taken at most ALLOWANCE_S or MAX_SHARE of the time."""
        if self.first is None:
            return True
        now = self.clock()
        if now - self.last >= self.INTERVAL_S:
            return True
        return epoch_edge and (self.spent <= self.ALLOWANCE_S or self.spent <= self.MAX_SHARE * (now - self.first))

    def sample(self, workers, epoch_position):
        """Samples each worker of `workers`, (pid, start ticks) pairs as the
        workers recorded themselves (None: this process), at `epoch_position`,
        the epochs delivered so far with the fraction of the current one. A
        pid that is gone, or now another process, is skipped."""
        now, cpu0 = self.clock(), self.cpu_clock()
        if self.first is None:
            self.first = now
        self.last = now
        for key in ((0, 0),) if workers is None else workers:
            pid, started = key
            rss = self.read_rss(pid)
            if rss is None:
                continue  # ended between the listing and the read (a non-persistent worker at an epoch's end)
            if pid != 0 and self.start_ticks(pid) != started:
                continue  # the pid is another process's now: its worker is gone
            series = self.series.get(key)
            if series is None:
                series = self.series[key] = Series()
            series.add(float(epoch_position), float(rss))
        self.spent += self.cpu_clock() - cpu0

    def figures(self):
        """The result line's worker_rss_* keys: none without a sample, and no
        growth when no series spanned two epoch positions."""
        if not self.series:
            return {}
        start_sum, peak, samples, longest, weighted, weights = 0.0, 0.0, 0, 0.0, 0.0, 0.0
        for s in self.series.values():
            start_sum += s.first_y
            peak = max(peak, s.peak_y)
            samples += s.n
            longest = max(longest, s.span())
            slope = s.slope()
            if slope is not None:
                # Weighted by span: a worker seen over a sliver of an epoch
                # (the last, cut-off one) counts less than one seen over a whole one.
                weighted += slope * s.span()
                weights += s.span()
        out = {
            "worker_rss_start_bytes": start_sum / len(self.series),
            "worker_rss_peak_bytes": peak,
            "worker_rss_samples": samples,
            "worker_rss_epochs": longest,
        }
        if weights > 0:
            out["worker_rss_growth_bytes_per_epoch"] = weighted / weights
        return out
