"""``ShiftedClock``: a wall clock for one process (redis-server) that the test sets, and its C source."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from programs import need

SHIFT_SOURCE = r"""
/* Shifts the wall clock (CLOCK_REALTIME, gettimeofday, time) of the process by the number of
   microseconds in the file $CLOCK_SHIFT_FILE, read again at most every 50 ms of the monotonic
   clock, which stays untouched. libfaketime cannot start Debian's redis-server (jemalloc). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*clock_fn)(clockid_t, struct timespec *);
typedef int (*tod_fn)(struct timeval *, void *);

static clock_fn real_clock(void) {
  static clock_fn real;
  if (!real) real = (clock_fn)dlsym(RTLD_NEXT, "clock_gettime");
  return real;
}

static long long shift_us(void) {
  static long long cached;
  static long long read_at = -1;
  struct timespec now;
  real_clock()(CLOCK_MONOTONIC, &now);
  long long mono = now.tv_sec * 1000000000LL + now.tv_nsec;
  if (read_at >= 0 && mono - read_at < 50000000LL) return cached;
  const char *path = getenv("CLOCK_SHIFT_FILE");
  FILE *file = path ? fopen(path, "r") : NULL;
  if (file) {
    long long value;
    if (fscanf(file, "%lld", &value) == 1) cached = value;
    fclose(file);
  }
  read_at = mono;
  return cached;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  int rc = real_clock()(id, ts);
  if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
    long long us = ts->tv_sec * 1000000LL + ts->tv_nsec / 1000 + shift_us();
    ts->tv_sec = us / 1000000;
    ts->tv_nsec = (us % 1000000) * 1000;
  }
  return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
  static tod_fn real;
  if (!real) real = (tod_fn)dlsym(RTLD_NEXT, "gettimeofday");
  int rc = real(tv, tz);
  if (rc == 0 && tv) {
    long long us = tv->tv_sec * 1000000LL + tv->tv_usec + shift_us();
    tv->tv_sec = us / 1000000;
    tv->tv_usec = us % 1000000;
  }
  return rc;
}

time_t time(time_t *out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
"""


class ShiftedClock:
    """A wall clock for one process that the test sets: an ``LD_PRELOAD`` library built with ``cc``.

    Start redis-server with :attr:`env` and ``--jemalloc-bg-thread no`` (with the clock set
    back, jemalloc's background thread spins); :meth:`set` moves its clock at once.
    """

    def __init__(self, folder: Path) -> None:
        compiler = need("cc")
        self.library, self.file = folder / "shift_clock.so", folder / "clock_shift_us"
        source = folder / "shift_clock.c"
        source.write_text(SHIFT_SOURCE)
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(self.library), str(source), "-ldl"], check=True)
        self.file.write_text("0")

    @property
    def env(self) -> dict[str, str]:
        return {"LD_PRELOAD": str(self.library), "CLOCK_SHIFT_FILE": str(self.file)}

    def set(self, unix_seconds: float) -> None:
        """The process's wall clock reads ``unix_seconds`` now (and runs on from there)."""
        shift = round((unix_seconds - time.time()) * 1e6)
        temporary = self.file.with_suffix(".tmp")
        temporary.write_text(str(shift))
        temporary.replace(self.file)  # whole, never half-written
        time.sleep(0.1)  # the library reads the file again within 50 ms
