/* Normalization of the extracted tree, so that two builds from one lock are
   identical: every entry (the root too) is owned by 0:0 and gets the mtime
   SP_ROOTFS_MTIME; directories get mode 0555, regular files 0555 when any
   execute bit was set and 0444 otherwise (no setuid, setgid or sticky bit,
   no write bit); symlinks keep their target.  Deepest entries first, with
   utimensat(AT_SYMLINK_NOFOLLOW).  Anything but a directory, a regular file
   or a symlink is an error.  Needs root (CAP_CHOWN).  */
#ifndef SP_ROOTFS_NORMALIZE_H
#define SP_ROOTFS_NORMALIZE_H

#include <sealed-probe/error.h>

#define SP_ROOTFS_DIR_MODE  0555
#define SP_ROOTFS_FILE_MODE 0444
#define SP_ROOTFS_EXEC_MODE 0555

int sp_rootfs_normalize (int rootfd, sp_error_t *err);

#endif
