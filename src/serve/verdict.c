/* See verdict.h.  */
#define _GNU_SOURCE
#include "serve/verdict.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "base/bounds.h"
#include "serve/audit.h"

static void
set (struct sp_verdict *v, const char *status, enum sp_cause cause)
{
  v->status = status;
  v->cause = cause;
}

int
sp_verdict_of_end (const struct sp_run_facts *facts, uint32_t timeout_seconds, struct sp_verdict *v,
                   sp_error_t *err)
{
  if (facts->timed_out)
    {
      set (v, SP_AUDIT_STATUS_TIMED_OUT, SP_CAUSE_TIMEOUT);
      return sp_make_error (err, 0, "the probe ran past the %" PRIu32 " s timeout", timeout_seconds);
    }
  if (facts->signal != 0)
    {
      set (v, SP_AUDIT_STATUS_PROBE, SP_CAUSE_PROBE_SIGNAL);
      return sp_make_error (err, 0, "the probe died of signal %d%s", facts->signal,
                            facts->oom ? " (out of memory)" : "");
    }
  if (facts->exit_code != 0)
    {
      set (v, SP_AUDIT_STATUS_PROBE, SP_CAUSE_PROBE_EXIT);
      return sp_make_error (err, 0, "the probe exited with status %d", facts->exit_code);
    }
  return 0;
}

/* The state directory's file system is nearly full, in bytes or inodes.  */
static bool
state_full (const char *state_path, sp_error_t *err)
{
  struct statvfs vfs;

  if (state_path == NULL || statvfs (state_path, &vfs) < 0)
    return false;
  if ((uint64_t)vfs.f_bavail * vfs.f_frsize >= SP_SERVE_FULL_BELOW_BYTES
      && (vfs.f_files == 0 || vfs.f_favail >= SP_SERVE_FULL_BELOW_INODES))
    return false;
  sp_error_wrap (err, "environment: the state directory's file system is full (%llu bytes, %llu inodes free)",
                 (unsigned long long)vfs.f_bavail * vfs.f_frsize, (unsigned long long)vfs.f_favail);
  return true;
}

#define VERDICT(status, cause) ((struct sp_verdict){ (status), (cause) })

static struct sp_verdict
of_failure (bool ran, const struct sp_run_facts *facts, const char *state_path, const char *rootfs_root,
            sp_error_t *err)
{
  int e = *err != NULL ? (*err)->status : 0;
  int said = sp_error_cause (*err);
  struct stat st;

  if (e == ENOSPC || e == EDQUOT || e == EROFS || e == EIO)
    return VERDICT (SP_AUDIT_STATUS_ENVIRONMENT, SP_CAUSE_ENVIRONMENT);
  if (said == SP_CAUSE_ENVIRONMENT || (ran && facts != NULL && facts->stage == SP_RUN_STAGE_NONE))
    {
      sp_error_wrap (err, "environment: the runtime cannot be reached (its binary cannot be executed, or its "
                          "daemon does not answer)");
      return VERDICT (SP_AUDIT_STATUS_ENVIRONMENT, SP_CAUSE_ENVIRONMENT);
    }
  if (said == SP_CAUSE_SEED_GONE)
    return VERDICT (SP_AUDIT_STATUS_ENVIRONMENT, SP_CAUSE_SEED_GONE);
  if (state_full (state_path, err))
    return VERDICT (SP_AUDIT_STATUS_ENVIRONMENT, SP_CAUSE_ENVIRONMENT);
  if (rootfs_root != NULL && (stat (rootfs_root, &st) < 0 || !S_ISDIR (st.st_mode)))
    {
      sp_error_wrap (err, "environment: the rootfs `%s` is gone", rootfs_root);
      return VERDICT (SP_AUDIT_STATUS_ENVIRONMENT, SP_CAUSE_ENVIRONMENT);
    }
  if (said == SP_CAUSE_RUNTIME || (said == 0 && ran))
    return VERDICT (SP_AUDIT_STATUS_RUNTIME, SP_CAUSE_RUNTIME);
  return VERDICT (SP_AUDIT_STATUS_INTERNAL, said != 0 ? (enum sp_cause)said : SP_CAUSE_OTHER);
}

void
sp_verdict_of_failure (bool ran, const struct sp_run_facts *facts, const char *state_path,
                       const char *rootfs_root, sp_error_t *err, struct sp_verdict *v)
{
  *v = of_failure (ran, facts, state_path, rootfs_root, err);
}
