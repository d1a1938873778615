/* The mount points a bundle needs in the read-only rootfs (docs/rootfs.md,
   "Skeleton").  runc must not create anything in the shared rootfs, so the
   builder creates them: directories for the kernel filesystems, /tmp and the
   repository, and empty regular files the bundle bind-mounts the probe script
   and its result file over.  */
#ifndef SP_ROOTFS_SKELETON_H
#define SP_ROOTFS_SKELETON_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

struct sp_skeleton_entry
{
  const char *path;
  bool is_dir;
};

extern const struct sp_skeleton_entry sp_rootfs_skeleton[];
extern const size_t sp_rootfs_skeleton_count;

/* Creates every skeleton entry in the tree under rootfd.  An existing
   directory where a directory belongs is kept; anything else already there
   is an error.  */
int sp_rootfs_make_skeleton (int rootfd, sp_error_t *err);

/* The one entry that is not read-only: /tmp.  runc gives a tmpfs the mode of
   the directory it is mounted on, so the probe's /tmp is writable (1777)
   only when the mount point is.  It must stay empty; verify checks both.  */
#define SP_ROOTFS_TMP_DIR  "tmp"
#define SP_ROOTFS_TMP_MODE 01777

/* After normalization: gives the /tmp mount point its mode.  */
int sp_rootfs_open_tmp (int rootfd, sp_error_t *err);

/* Checks that every skeleton entry exists with its type (no symlinks).  */
int sp_rootfs_check_skeleton (int rootfd, sp_error_t *err);

#endif
