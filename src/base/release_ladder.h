/* When an answer may leave the proxy (docs/threat-model.md, "Timing"): the
   moment it arrives would otherwise carry what the probe's run time says,
   beside its at most 2 bits.  Three modes:

     bucketed   at the first boundary of SP_RELEASE_LADDER_MS at or after
                the invocation's end, counted from the request's acceptance
                on the monotonic clock (the default);
     fixed      at one offset, the timeout plus SP_RELEASE_MARGIN_MS, for
                every answer: no timing bits at all;
     immediate  as soon as it is ready: leaks timing without bound, for
                benchmarks and trusted setups.

   An answer ready past its last possible release (the last boundary
   reachable under the timeout; the fixed offset) leaves at once as ERROR,
   and the audit line says so.  Pure functions: serve's releaser.c waits.  */
#ifndef SP_BASE_RELEASE_LADDER_H
#define SP_BASE_RELEASE_LADDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sp_release_mode
{
  SP_RELEASE_BUCKETED,
  SP_RELEASE_FIXED,
  SP_RELEASE_IMMEDIATE,
};

/* The bucketed ladder, in ms after acceptance: doubling from 1 s, so that
   a probe's own work (tens of milliseconds) never moves it across a
   boundary on any backend, while a call's timing bits stay under 3 for
   the default timeout; up to 512 s, the first boundary past the longest
   timeout (SP_TIMEOUT_MAX_SECONDS) and SP_RELEASE_MARGIN_MS.  */
#define SP_RELEASE_LADDER_MS                                                                                 \
  {                                                                                                          \
    1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 512000                                      \
  }
#define SP_RELEASE_LADDER_LEN 10

/* What an invocation may take beyond its timeout: killing a probe that ran
   out of time and cleaning up (the runtime's kill, its wait, the delete,
   the workspace).  Fixed mode's offset is the timeout plus this; bucketed
   mode's last reachable boundary is the first at or after it.  */
#define SP_RELEASE_MARGIN_MS 5000

/* log2 of the answers one call can give (three outcomes and ERROR), x1000:
   a call's content bits.  */
#define SP_RELEASE_CONTENT_MILLIBITS 2000

int sp_release_mode_parse (const char *text, enum sp_release_mode *mode);
const char *sp_release_mode_name (enum sp_release_mode mode);

/* When an answer ready elapsed_ms after acceptance leaves, as ms after
   acceptance, into *release_ms (immediate: elapsed_ms itself).  Returns
   false when it is past its last possible release: it then leaves at once,
   as ERROR.  */
bool sp_release_at (enum sp_release_mode mode, uint32_t timeout_seconds, uint64_t elapsed_ms,
                    uint64_t *release_ms);

/* How many distinct release times a call can have (bucketed: the
   boundaries reachable under the timeout; fixed: 1), and its timing bits,
   x1000, rounded up: log2 of that count.  Immediate: *unbounded.  */
unsigned sp_release_instants (enum sp_release_mode mode, uint32_t timeout_seconds);
uint64_t sp_release_timing_millibits (enum sp_release_mode mode, uint32_t timeout_seconds, bool *unbounded);

#endif
