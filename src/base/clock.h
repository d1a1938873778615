/* Time readings, for deadlines (monotonic) and records (realtime).  Pure:
   libc only, so that the client links it too.  */
#ifndef SP_BASE_CLOCK_H
#define SP_BASE_CLOCK_H

#include <stdint.h>

#define SP_NS_PER_MS 1000000ULL

uint64_t sp_monotonic_ns (void);
uint64_t sp_realtime_ns (void);

/* sp_monotonic_ns in whole milliseconds, for poll timeouts.  */
int64_t sp_monotonic_ms (void);

#endif
