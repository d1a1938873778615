/* What a sandbox's cgroup recorded, read after its processes exit and before
   the runtime removes it: peak memory, CPU time and OOM kills.  Handles
   cgroup v2 (unified) and v1 (per-controller hierarchies, as on hybrid
   hosts), under SP_CGROUP_ROOT.  */
#ifndef SEALED_PROBE_CGROUP_STATS_H
#define SEALED_PROBE_CGROUP_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include <sealed-probe/error.h>

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

#endif
