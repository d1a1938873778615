/* Normalization of an extracted tree, so that two builds from one input are
   identical: every entry (the root too) is given one owner and the mtime
   SP_ROOTFS_MTIME; directories get the policy's directory mode, regular files
   its exec mode when any execute bit was set and its file mode otherwise (no
   setuid, setgid or sticky bit ever); symlinks keep their target.  Deepest
   entries first, with utimensat(AT_SYMLINK_NOFOLLOW).  Anything but a
   directory, a regular file or a symlink is an error.  Needs root
   (CAP_CHOWN).

   Two policies use it: the rootfs (0:0, read-only modes) and staged seeds
   (the probe's uid, owner-writable modes, so that an overlay snapshot is
   writable by the probe; the seed itself stays immutable through its
   read-only mount, docs/staging.md).  */
#ifndef SP_TREE_NORMALIZE_H
#define SP_TREE_NORMALIZE_H

#include <sys/types.h>

#include "base/error.h"
#include "tree/walk.h"

#define SP_ROOTFS_DIR_MODE  0555
#define SP_ROOTFS_FILE_MODE 0444
#define SP_ROOTFS_EXEC_MODE 0555

#define SP_SEED_DIR_MODE  0755
#define SP_SEED_FILE_MODE 0644
#define SP_SEED_EXEC_MODE 0755

struct sp_normalize_policy
{
  uid_t uid;
  gid_t gid;
  mode_t dir_mode;  /* every directory, the root too */
  mode_t file_mode; /* a regular file with no execute bit */
  mode_t exec_mode; /* a regular file with any execute bit */
};

/* The rootfs: 0:0, SP_ROOTFS_*_MODE.  Seeds: SP_PROBE_UID:SP_PROBE_GID,
   SP_SEED_*_MODE.  */
extern const struct sp_normalize_policy sp_rootfs_policy;
extern const struct sp_normalize_policy sp_seed_policy;

/* Normalizes the tree under rootfd, rootfd itself included, to policy.
   Modes are masked to 0777: no policy can hand out setuid, setgid or
   sticky.  */
int sp_tree_normalize (int rootfd, const struct sp_normalize_policy *policy, sp_error_t *err);
/* The same, calling tick once per entry (tree/walk.h), which may stop it.  */
int sp_tree_normalize_counted (int rootfd, const struct sp_normalize_policy *policy, sp_tree_tick_fn tick,
                               void *tick_ctx, sp_error_t *err);

/* sp_tree_normalize with sp_rootfs_policy.  */
int sp_rootfs_normalize (int rootfd, sp_error_t *err);

#endif
