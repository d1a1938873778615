/* See src/base/release_ladder.h.  */
#include "base/release_ladder.h"

#include <string.h>

static const uint64_t ladder_ms[SP_RELEASE_LADDER_LEN] = SP_RELEASE_LADDER_MS;

int
sp_release_mode_parse (const char *text, enum sp_release_mode *mode)
{
  if (strcmp (text, "bucketed") == 0)
    *mode = SP_RELEASE_BUCKETED;
  else if (strcmp (text, "fixed") == 0)
    *mode = SP_RELEASE_FIXED;
  else if (strcmp (text, "immediate") == 0)
    *mode = SP_RELEASE_IMMEDIATE;
  else
    return -1;
  return 0;
}

const char *
sp_release_mode_name (enum sp_release_mode mode)
{
  switch (mode)
    {
    case SP_RELEASE_BUCKETED:
      return "bucketed";
    case SP_RELEASE_FIXED:
      return "fixed";
    case SP_RELEASE_IMMEDIATE:
      return "immediate";
    default:
      return "?";
    }
}

/* The longest an invocation is expected to take.  */
static uint64_t
expected_max_ms (uint32_t timeout_seconds)
{
  return (uint64_t)timeout_seconds * 1000 + SP_RELEASE_MARGIN_MS;
}

/* Bucketed: how many boundaries a call can reach, the first at or after
   expected_max_ms included (all of them when it lies past the ladder).  */
static unsigned
reachable_boundaries (uint32_t timeout_seconds)
{
  uint64_t max = expected_max_ms (timeout_seconds);
  unsigned n = 0;

  while (n < SP_RELEASE_LADDER_LEN && ladder_ms[n] < max)
    n++;
  return n < SP_RELEASE_LADDER_LEN ? n + 1 : n;
}

bool
sp_release_at (enum sp_release_mode mode, uint32_t timeout_seconds, uint64_t elapsed_ms, uint64_t *release_ms)
{
  switch (mode)
    {
    case SP_RELEASE_BUCKETED:
      for (unsigned i = 0; i < reachable_boundaries (timeout_seconds); i++)
        if (elapsed_ms <= ladder_ms[i])
          {
            *release_ms = ladder_ms[i];
            return true;
          }
      *release_ms = elapsed_ms;
      return false;
    case SP_RELEASE_FIXED:
      *release_ms
          = elapsed_ms <= expected_max_ms (timeout_seconds) ? expected_max_ms (timeout_seconds) : elapsed_ms;
      return elapsed_ms <= expected_max_ms (timeout_seconds);
    case SP_RELEASE_IMMEDIATE:
    default:
      *release_ms = elapsed_ms;
      return true;
    }
}

unsigned
sp_release_instants (enum sp_release_mode mode, uint32_t timeout_seconds)
{
  return mode == SP_RELEASE_BUCKETED ? reachable_boundaries (timeout_seconds) : 1;
}

/* ceil (1000 * log2 (n)): a table, since n is at most the ladder's length
   (tests/unit/check_release.c recomputes it).  */
static uint64_t
millibits_of (unsigned n)
{
  static const uint64_t table[SP_RELEASE_LADDER_LEN + 1]
      = { 0, 0, 1000, 1585, 2000, 2322, 2585, 2808, 3000, 3170, 3322 };

  return n <= SP_RELEASE_LADDER_LEN ? table[n] : 0;
}

uint64_t
sp_release_timing_millibits (enum sp_release_mode mode, uint32_t timeout_seconds, bool *unbounded)
{
  *unbounded = mode == SP_RELEASE_IMMEDIATE;
  if (mode != SP_RELEASE_BUCKETED)
    return 0;
  return millibits_of (reachable_boundaries (timeout_seconds));
}
