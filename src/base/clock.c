/* Time readings: see src/base/clock.h.  */
#include "base/clock.h"

#include <time.h>

static uint64_t
read_ns (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t
sp_monotonic_ns (void)
{
  return read_ns (CLOCK_MONOTONIC);
}

uint64_t
sp_realtime_ns (void)
{
  return read_ns (CLOCK_REALTIME);
}

int64_t
sp_monotonic_ms (void)
{
  return (int64_t)(sp_monotonic_ns () / 1000000ULL);
}
