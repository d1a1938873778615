/* What a sandbox's cgroup recorded, read after its processes exit and before
   the runtime removes it: peak memory, CPU time and OOM kills.  Handles
   cgroup v2 (unified) and v1 (per-controller hierarchies, as on hybrid
   hosts), under SP_CGROUP_ROOT.  */
#ifndef SP_RUNTIMES_CGROUP_STATS_H
#define SP_RUNTIMES_CGROUP_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

#define SP_CGROUP_ROOT "/sys/fs/cgroup"

struct sp_cgroup_stats
{
  uint64_t peak_memory_bytes;
  uint64_t cpu_ns;
  uint64_t oom_kills;
};

/* cgroup_path is config.json's linux.cgroupsPath ("/sealed-probe/<id>").  A
   missing file or cgroup is an error naming it.  */
int sp_cgroup_stats_read (const char *cgroup_path, struct sp_cgroup_stats *stats, sp_error_t *err);

/* The same below another root, for tests on a fake tree.  When
   <root>/cgroup.controllers exists the host is pure v2 and the files are
   <root><path>/{memory.peak, memory.events (oom_kill), cpu.stat (usage_usec)};
   otherwise v1: <root>/memory<path>/{memory.max_usage_in_bytes,
   memory.oom_control (oom_kill)} and <root>/cpuacct<path>/cpuacct.usage (ns).
   cgroup_path must be absolute, below the root, with no `.`, `..` or empty
   component.  Each file is read with a bound and parsed strictly; a
   malformed one is an error naming it.  stats is written only on success.  */
int sp_cgroup_stats_read_under (const char *root, const char *cgroup_path, struct sp_cgroup_stats *stats,
                                sp_error_t *err);

#endif
