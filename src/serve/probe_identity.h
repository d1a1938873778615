/* The probe's identity on the host (docs/runtimes.md, "The probe's
   identity").  Each sandbox slot has two host ids of its own: the one its
   user namespace's root maps to, and the one its SP_PROBE_UID:SP_PROBE_GID
   maps to (bundle.h).  Files the probe writes are the probe id's; a seed,
   which stays SP_PROBE_UID's on disk, is shown to the probe as its own
   through an idmapped mount made with the slot's idmap namespace.  */
#ifndef SP_SERVE_PROBE_IDENTITY_H
#define SP_SERVE_PROBE_IDENTITY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct sp_probe_identity
{
  uint32_t host_root_id;
  uint32_t host_probe_id;
  /* A user namespace mapping SP_PROBE_UID:SP_PROBE_GID onto host_probe_id
     and nothing else, for MOUNT_ATTR_IDMAP; -1 until made.  */
  int idmap_userns_fd;
  /* Held flock(2)s on LOCKDIR/<id> for both ids: while this proxy runs, no
     other proxy can take them, whatever range it was given.  -1 until
     taken.  */
  int root_lock_fd;
  int probe_lock_fd;
  int lock_dirfd; /* LOCKDIR, to remove the lock files on release */
};

/* Fills id for slot of the range that starts at base (sp_bundle_slot_ids):
   takes both ids' locks in lock_dirfd (refused, naming the id, while another
   proxy holds one), then makes its idmap namespace: a short-lived child
   unshares a user namespace, the caller writes its maps and keeps an fd on
   it, and the child is gone before this returns.  Needs root.  */
int sp_probe_identity_make (uint32_t base, unsigned slot, int lock_dirfd, struct sp_probe_identity *id,
                            sp_error_t *err);

/* Closes the idmap namespace and drops the locks.  */
void sp_probe_identity_release (struct sp_probe_identity *id);

/* The ids' lock files in lock_dirfd that no proxy holds: a proxy killed -9
   leaves its own (lock_release never ran).  Each is removed while held, as
   a release does, so that a proxy taking it meanwhile takes a new one.
   Their ids, ascending, go to *ids (malloc'd, NULL when none) and *n; a
   held lock file, or a name that is no id, stays.  */
int sp_probe_identity_sweep (int lock_dirfd, uint32_t **ids, size_t *n, sp_error_t *err);

/* 0 when no host account or process holds any id of the range
   [base, base + count): no passwd or group entry, and no process with it as
   a real, effective, saved or filesystem uid or gid.  Otherwise -1, naming
   the first holder.  Run at preflight: an id someone else has is not the
   probe's alone.  */
int sp_probe_identity_range_free (uint32_t base, uint32_t count, sp_error_t *err);

#endif
