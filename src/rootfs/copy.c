/* A private copy of a verified rootfs: see src/rootfs/copy.h.  */
#define _GNU_SOURCE
#include "rootfs/copy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "os/fileio.h"
#include "tree/copy.h"

int
sp_rootfs_copy (const struct sp_rootfs_info *verified, int dirfd, sp_error_t *err)
{
  static const struct sp_copy_options limits = {
    .max_bytes = SP_ROOTFS_MAX_BYTES,
    .max_entries = SP_ROOTFS_MAX_ENTRIES,
    .max_depth = SP_COPY_DEPTH_CEILING,
    .keep_sticky = true,
  };
  cleanup_close int src = open (verified->root_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_close int dst = -1;
  struct stat st;
  char digest[SP_DIGEST_TEXT_SIZE + 1];

  if (src < 0 || fstat (src, &st) < 0)
    return sp_make_error (err, errno, "open the verified rootfs");
  if (mkdirat (dirfd, "root", 0700) < 0)
    return sp_make_error (err, errno, "make the rootfs copy");
  dst = openat (dirfd, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dst < 0)
    return sp_make_error (err, errno, "open the rootfs copy");
  if (sp_tree_copy (src, dst, &limits, 0, 0, err) < 0)
    return sp_error_wrap (err, "copy the rootfs");
  if (fchown (dst, 0, 0) < 0 || fchmod (dst, st.st_mode & 07777) < 0)
    return sp_make_error (err, errno, "give the rootfs copy its owner and mode");
  snprintf (digest, sizeof (digest), "%s\n", verified->digest);
  return sp_write_file_atomic_at (dirfd, "digest", digest, strlen (digest), 0444, err);
}

int
sp_rootfs_copy_verify (const char *path, const struct sp_rootfs_info *verified, struct sp_rootfs_info *copy,
                       sp_error_t *err)
{
  if (sp_rootfs_verify (path, copy, err) < 0)
    return sp_error_wrap (err, "the rootfs copy");
  if (strcmp (copy->digest, verified->digest) != 0)
    {
      sp_rootfs_info_release (copy);
      return sp_make_error (err, 0, "the rootfs copy digests to %s, not %s", copy->digest, verified->digest);
    }
  return 0;
}
