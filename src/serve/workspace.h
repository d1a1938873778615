/* One invocation's private workspace (docs/snapshot.md):
     WORK/RUN/INV/            a tmpfs of its own, size- and inode-limited
       bundle/                the OCI bundle (bundle.h); bundle/repo is the
                              probe's writable snapshot of one seed
       upper/, work/          overlay mode only: the private upper layer
   WORK is the proxy's protected work directory (STATE/work).  Everything is
   opened relative to directory fds, and nothing follows a link.  */
#ifndef SP_SERVE_WORKSPACE_H
#define SP_SERVE_WORKSPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/bounds.h"
#include "base/error.h"
#include "serve/probe_identity.h"
#include "tree/copy.h"

#define SP_WORKSPACE_BUNDLE "bundle"

enum sp_snapshot_mode
{
  SP_SNAPSHOT_OVERLAY, /* the read-only seed as lower, a private upper on the workspace tmpfs */
  SP_SNAPSHOT_COPY,    /* a safe copy (tree/copy.h) onto the workspace tmpfs */
};

/* "overlay" or "copy"; parse returns -1 for anything else.  */
const char *sp_snapshot_mode_name (enum sp_snapshot_mode mode);
int sp_snapshot_mode_parse (const char *name, enum sp_snapshot_mode *mode);

struct sp_workspace_limits
{
  uint64_t tmpfs_bytes;  /* the tmpfs size= */
  uint64_t tmpfs_inodes; /* the tmpfs nr_inodes= */
  bool noexec; /* the tmpfs and the overlay are noexec too (docker binds keep their source's flags) */
};

struct sp_workspace
{
  int run_dirfd;     /* WORK/RUN, borrowed */
  char *name;        /* INV */
  char *path;        /* absolute WORK/RUN/INV */
  char *bundle_path; /* absolute WORK/RUN/INV/bundle */
  int dirfd;         /* the tmpfs root, or -1 */
  int bundle_dirfd;  /* bundle/, or -1 */
  bool tmpfs_mounted;
  bool overlay_mounted;
  bool noexec; /* limits->noexec */
};

/* Creates WORK/RUN/INV (0700) and mounts a fresh tmpfs on it (nosuid, nodev,
   mode 0711, the limits), then creates bundle/ (0711).  run_path is the
   absolute path of run_dirfd.  On failure nothing is left.  */
int sp_workspace_create (int run_dirfd, const char *run_path, const char *name,
                         const struct sp_workspace_limits *limits, struct sp_workspace *ws, sp_error_t *err);

/* Fills bundle/repo (which sp_bundle_write made, owned by the probe's host
   id) with a writable snapshot of the seed open at seed_dirfd, for the probe
   identity id.  Copy mode copies with copy_limits, every entry given to the
   probe's host id and owner-writable.  Overlay mode mounts an overlay on
   bundle/repo: lowerdir is the seed's read-only mount, idmapped so that it
   shows as the probe's own (probe_identity.h), upper and work on this
   workspace's tmpfs; every layer is named through /proc/self/fd, so no host
   path shows in the sandbox's mountinfo.  */
int sp_workspace_snapshot (struct sp_workspace *ws, enum sp_snapshot_mode mode, int seed_dirfd,
                           const struct sp_copy_options *copy_limits, const struct sp_probe_identity *id,
                           sp_error_t *err);

/* Unmounts the overlay and the tmpfs and removes WORK/RUN/INV.  Every step
   is tried; any failure is an error (the invocation then answers ERROR).
   Safe on a partly created workspace, and twice.  */
int sp_workspace_destroy (struct sp_workspace *ws, sp_error_t *err);

/* What sp_workspace_remove_runs removed of one run.  */
struct sp_workspace_run_removed
{
  char run[SP_ID_MAX_CHARS + 1];
  unsigned entries; /* entries of WORK/RUN removed: workspaces, and whatever else serve kept there */
  unsigned mounts;  /* mounts found still there, and unmounted first */
};

struct sp_workspace_removed
{
  struct sp_workspace_run_removed *runs; /* in the order found */
  size_t n;
};

void sp_workspace_removed_release (struct sp_workspace_removed *removed);
#define cleanup_workspace_removed __attribute__ ((cleanup (sp_workspace_removed_release)))

/* Orphans: under the open WORK directory, unmounts whatever is mounted below
   and removes every RUN directory but keep_run (NULL: all of them).  Each
   run removed is added to *removed (NULL: not wanted), so that the caller
   can say what went; it prints nothing.  */
int sp_workspace_remove_runs (int work_dirfd, const char *keep_run, struct sp_workspace_removed *removed,
                              sp_error_t *err);

#endif
