/* The preflight check of a built rootfs: see src/rootfs/verify.h.  */
#define _GNU_SOURCE
#include "rootfs/verify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/quote.h"
#include "os/fileio.h"
#include "tree/digest.h"

#include "rootfs/build.h"
#include "rootfs/skeleton.h"
#include "tree/walk.h"

/* "sha256:" + 64 hex + "\n".  */
#define DIGEST_FILE_LEN (SP_DIGEST_TEXT_SIZE - 1 + 1)

static int
read_recorded_digest (int dirfd, char out[SP_DIGEST_TEXT_SIZE], sp_error_t *err)
{
  cleanup_close int fd = -1;
  cleanup_free char *text = NULL;
  const size_t prefix_len = strlen (SP_DIGEST_PREFIX);
  size_t len;

  fd = TEMP_FAILURE_RETRY (
      openat (dirfd, SP_ROOTFS_DIGEST_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", SP_ROOTFS_DIGEST_FILE);
  if (sp_read_fd_capped (fd, DIGEST_FILE_LEN, &text, &len, err) < 0)
    return sp_error_wrap (err, "read `%s`", SP_ROOTFS_DIGEST_FILE);
  if (len != DIGEST_FILE_LEN || text[len - 1] != '\n' || strncmp (text, SP_DIGEST_PREFIX, prefix_len) != 0
      || strspn (text + prefix_len, "0123456789abcdef") != SP_SHA256_HEX)
    return sp_make_error (err, 0, "`%s` must hold `sha256:<64 lowercase hex digits>` and a newline",
                          SP_ROOTFS_DIGEST_FILE);
  memcpy (out, text, SP_DIGEST_TEXT_SIZE - 1);
  out[SP_DIGEST_TEXT_SIZE - 1] = '\0';
  return 0;
}

/* Owned by root, read-only, no setuid/setgid: what normalization made it.  */
static int
check_read_only (const char *path, const struct stat *st, sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];

  if (st->st_uid != 0 || st->st_gid != 0)
    return sp_make_error (err, 0, "`%s` is owned by %u:%u, not 0:0", sp_quote_name (path, q),
                          (unsigned)st->st_uid, (unsigned)st->st_gid);
  if (!S_ISDIR (st->st_mode) && !S_ISREG (st->st_mode) && !S_ISLNK (st->st_mode))
    return sp_make_error (err, 0, "`%s` is neither a directory, a regular file nor a symlink",
                          sp_quote_name (path, q));
  if (S_ISLNK (st->st_mode))
    return 0; /* a symlink's mode is always 0777 and never used */
  if (st->st_mode & 0222)
    return sp_make_error (err, 0, "`%s` is writable (mode %04o)", sp_quote_name (path, q),
                          (unsigned)(st->st_mode & 07777));
  if (st->st_mode & (S_ISUID | S_ISGID | S_ISVTX))
    return sp_make_error (err, 0, "`%s` has a setuid, setgid or sticky bit (mode %04o)",
                          sp_quote_name (path, q), (unsigned)(st->st_mode & 07777));
  return 0;
}

/* /tmp's mount point is the one writable entry (skeleton.h): root's, exactly
   its mode, and empty.  */
static int
on_entry (int dirfd, const char *name, const char *path, const struct stat *st, enum sp_tree_walk_event event,
          void *ctx, sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];

  if (event != SP_TREE_WALK_ENTRY)
    return 0;
  if (strncmp (path, SP_ROOTFS_TMP_DIR "/", sizeof (SP_ROOTFS_TMP_DIR)) == 0)
    return sp_make_error (err, 0, "`%s`: the `%s` mount point must be empty", sp_quote_name (path, q),
                          SP_ROOTFS_TMP_DIR);
  if (strcmp (path, SP_ROOTFS_TMP_DIR) == 0)
    {
      if (!S_ISDIR (st->st_mode) || st->st_uid != 0 || st->st_gid != 0
          || (st->st_mode & 07777) != SP_ROOTFS_TMP_MODE)
        return sp_make_error (err, 0, "`%s` must be a directory of 0:0 with mode %04o",
                              sp_quote_name (path, q), SP_ROOTFS_TMP_MODE);
      return 0;
    }
  return check_read_only (path, st, err);
}

int
sp_rootfs_verify (const char *dir, struct sp_rootfs_info *info, sp_error_t *err)
{
  cleanup_close int dirfd = -1;
  cleanup_close int rootfd = -1;
  cleanup_free char *real_dir = NULL;
  char recorded[SP_DIGEST_TEXT_SIZE];
  char actual[SP_DIGEST_TEXT_SIZE];
  struct stat st;

  memset (info, 0, sizeof (*info));
  dirfd = TEMP_FAILURE_RETRY (open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dirfd < 0 && errno == ENOENT)
    return sp_make_error (err, 0,
                          "open the rootfs `%s`: No such file or directory: build it with "
                          "`sealed-probe-rootfs build --debs DIR --out %s` (sealed-probe-rootfs(8))",
                          dir, dir);
  if (dirfd < 0)
    return sp_make_error (err, errno, "open the rootfs `%s`", dir);
  rootfd = TEMP_FAILURE_RETRY (
      openat (dirfd, SP_ROOTFS_ROOT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (rootfd < 0 && errno == ENOENT)
    return sp_make_error (err, 0,
                          "open `%s/%s`: No such file or directory: a rootfs is the directory "
                          "`sealed-probe-rootfs build --out DIR` made, holding `%s` and `digest`",
                          dir, SP_ROOTFS_ROOT_DIR, SP_ROOTFS_ROOT_DIR);
  if (rootfd < 0)
    return sp_make_error (err, errno, "open `%s/%s` (a directory, not a symlink)", dir, SP_ROOTFS_ROOT_DIR);
  if (read_recorded_digest (dirfd, recorded, err) < 0)
    return sp_error_wrap (err, "`%s`", dir);

  if (fstat (rootfd, &st) < 0)
    return sp_make_error (err, errno, "stat `%s/%s`", dir, SP_ROOTFS_ROOT_DIR);
  if (check_read_only (SP_ROOTFS_ROOT_DIR, &st, err) < 0 || sp_tree_walk (rootfd, on_entry, NULL, err) < 0
      || sp_rootfs_check_skeleton (rootfd, err) < 0)
    return sp_error_wrap (err, "`%s/%s`", dir, SP_ROOTFS_ROOT_DIR);

  if (sp_tree_digest (rootfd, actual, err) < 0)
    return sp_error_wrap (err, "`%s/%s`", dir, SP_ROOTFS_ROOT_DIR);
  if (strcmp (recorded, actual) != 0)
    return sp_make_error (err, 0, "digest mismatch: `%s/%s` records %s but `%s/%s` digests to %s", dir,
                          SP_ROOTFS_DIGEST_FILE, recorded, dir, SP_ROOTFS_ROOT_DIR, actual);

  real_dir = realpath (dir, NULL);
  if (real_dir == NULL)
    return sp_make_error (err, errno, "resolve `%s`", dir);
  if (asprintf (&info->root_path, "%s%s%s", real_dir, strcmp (real_dir, "/") ? "/" : "", SP_ROOTFS_ROOT_DIR)
      < 0)
    {
      info->root_path = NULL;
      return sp_make_error (err, errno, "allocate the root path");
    }
  memcpy (info->digest, actual, sizeof (info->digest));
  return 0;
}

void
sp_rootfs_info_release (struct sp_rootfs_info *info)
{
  free (info->root_path);
  info->root_path = NULL;
}
