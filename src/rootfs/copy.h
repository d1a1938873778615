/* A private copy of a verified rootfs, for a sandbox that must not see the
   host's directory: serve's copy for every probe of a run, and a dry-run
   bundle's own.  The copy lives on a tmpfs its caller mounted, so that the
   sandbox's mountinfo names no host path, and it is verified again as a
   whole (docs/rootfs.md, "What is verified when").  */
#ifndef SP_ROOTFS_COPY_H
#define SP_ROOTFS_COPY_H

#include "base/error.h"
#include "rootfs/verify.h"

/* The tmpfs options a copy's filesystem needs room for: the rootfs's own
   limits.  */
#define SP_ROOTFS_COPY_TMPFS_BYTES  SP_ROOTFS_MAX_BYTES
#define SP_ROOTFS_COPY_TMPFS_INODES (SP_ROOTFS_MAX_ENTRIES + 16)

/* Writes DIR/root (a safe copy of verified->root_path: owners 0:0, modes
   kept, the sticky bit of the tmp mount point too) and DIR/digest into the
   empty directory dirfd.  */
int sp_rootfs_copy (const struct sp_rootfs_info *verified, int dirfd, sp_error_t *err);

/* Runs the whole rootfs verify on the copy at path (DIR), and requires its
   digest to be verified's.  Fills copy (release it with
   sp_rootfs_info_release).  */
int sp_rootfs_copy_verify (const char *path, const struct sp_rootfs_info *verified,
                           struct sp_rootfs_info *copy, sp_error_t *err);

#endif
