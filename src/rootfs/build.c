/* The rootfs build: see build.h.  */
#define _GNU_SOURCE
#include "rootfs/build.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "tree/digest.h"

#include "rootfs/deb.h"
#include "rootfs/extract.h"
#include "rootfs/lock.h"
#include "rootfs/pyc.h"
#include "rootfs/skeleton.h"
#include "tree/normalize.h"
#include "tree/remove.h"

/* Debian's name for the architecture this builder runs on; a lock entry must
   be for it or for "all".  */
#if defined(__x86_64__)
#define HOST_DEB_ARCH "amd64"
#elif defined(__aarch64__)
#define HOST_DEB_ARCH "arm64"
#else
#define HOST_DEB_ARCH "unknown"
#endif

#define TEMP_SUFFIX   ".build-"
#define TEMP_ATTEMPTS 16

static void
lock_release_cleanup (struct sp_lock *lock)
{
  sp_lock_release (lock);
}
#define cleanup_lock __attribute__ ((cleanup (lock_release_cleanup)))

/* Splits out_dir into its parent (opened) and its last component.  */
static int
open_parent (const char *out_dir, int *parentfd, char base[NAME_MAX + 1], sp_error_t *err)
{
  cleanup_free char *copy = strdup (out_dir);
  char *slash;
  const char *parent;
  size_t len;

  if (copy == NULL)
    return sp_make_error (err, errno, "allocate");
  len = strlen (copy);
  while (len > 1 && copy[len - 1] == '/')
    copy[--len] = '\0';
  slash = strrchr (copy, '/');
  if (slash == NULL)
    {
      parent = ".";
      slash = copy - 1;
    }
  else if (slash == copy)
    parent = "/";
  else
    {
      *slash = '\0';
      parent = copy;
    }
  if (slash[1] == '\0' || strcmp (slash + 1, ".") == 0 || strcmp (slash + 1, "..") == 0)
    return sp_make_error (err, 0, "`%s` does not name a new directory", out_dir);
  if (strlen (slash + 1) > NAME_MAX - strlen (TEMP_SUFFIX) - 10)
    return sp_make_error (err, 0, "the last component of `%s` is too long", out_dir);
  strcpy (base, slash + 1);
  *parentfd = TEMP_FAILURE_RETRY (open (parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (*parentfd < 0)
    return sp_make_error (err, errno, "open the parent directory `%s` of the output", parent);
  return 0;
}

/* Creates parentfd/.BASE.build-XXXXXXXX (mode 0700) and names it in tmp.  */
static int
make_temp_dir (int parentfd, const char *base, char tmp[NAME_MAX + 1], sp_error_t *err)
{
  for (int i = 0; i < TEMP_ATTEMPTS; i++)
    {
      uint32_t r;

      if (getrandom (&r, sizeof (r), 0) != sizeof (r))
        return sp_make_error (err, errno, "getrandom");
      snprintf (tmp, NAME_MAX + 1, ".%s%s%08x", base, TEMP_SUFFIX, (unsigned)r);
      if (mkdirat (parentfd, tmp, 0700) == 0)
        return 0;
      if (errno != EEXIST)
        return sp_make_error (err, errno, "create the temporary directory `%s`", tmp);
    }
  return sp_make_error (err, EEXIST, "create a temporary directory next to the output");
}

static int
check_arches (const struct sp_lock *lock, sp_error_t *err)
{
  for (size_t i = 0; i < lock->count; i++)
    {
      const struct sp_lock_entry *e = &lock->entries[i];
      if (strcmp (e->arch, "all") != 0 && strcmp (e->arch, HOST_DEB_ARCH) != 0)
        return sp_make_error (err, 0, "line %u: %s is for %s, but this builder runs on %s", e->line, e->name,
                              e->arch, HOST_DEB_ARCH);
    }
  return 0;
}

static int
extract_package (struct sp_extract *x, int debsfd, const struct sp_lock_entry *e, sp_error_t *err)
{
  cleanup_deb struct sp_deb *deb = NULL;
  char filename[SP_LOCK_DEB_NAME_SIZE];

  sp_lock_deb_filename (e, filename);
  if (sp_deb_open (debsfd, filename, e->sha256, &deb, err) < 0)
    {
      if ((*err)->status == ENOENT)
        return sp_error_wrap (err, "`%s` (fetch the pinned packages with scripts/rootfs-fetch)", filename);
      return sp_error_wrap (err, "`%s`", filename);
    }
  if (sp_extract_archive (x, sp_deb_data (deb), err) < 0 || sp_deb_finish (deb, err) < 0)
    return sp_error_wrap (err, "`%s`", filename);
  return 0;
}

static int
extract_all (int rootfd, int debsfd, const struct sp_lock *lock, sp_error_t *err)
{
  cleanup_extract struct sp_extract *x = NULL;

  if (sp_extract_begin (rootfd, &x, err) < 0)
    return -1;
  for (size_t i = 0; i < lock->count; i++)
    if (extract_package (x, debsfd, &lock->entries[i], err) < 0)
      return -1;
  return sp_extract_end (get_and_reset (&x), err);
}

/* Everything between creating the temporary directory and renaming it.  */
static int
build_in (int tmpfd, int debsfd, const struct sp_lock *lock, unsigned flags, char digest[SP_DIGEST_TEXT_SIZE],
          sp_error_t *err)
{
  cleanup_close int rootfd = -1;
  char text[SP_DIGEST_TEXT_SIZE + 1];
  unsigned compiled;

  if (mkdirat (tmpfd, SP_ROOTFS_ROOT_DIR, 0700) < 0)
    return sp_make_error (err, errno, "create `%s`", SP_ROOTFS_ROOT_DIR);
  rootfd = openat (tmpfd, SP_ROOTFS_ROOT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rootfd < 0)
    return sp_make_error (err, errno, "open `%s`", SP_ROOTFS_ROOT_DIR);

  if (extract_all (rootfd, debsfd, lock, err) < 0 || sp_rootfs_make_skeleton (rootfd, err) < 0)
    return -1;
  /* The tree is final but for metadata: normalization then covers the
     pycs and their __pycache__ directories like every other entry.  */
  if (!(flags & SP_ROOTFS_BUILD_NO_PYC) && sp_rootfs_compile_stdlib (rootfd, &compiled, err) < 0)
    return -1;
  if (sp_rootfs_normalize (rootfd, err) < 0 || sp_rootfs_open_tmp (rootfd, err) < 0
      || sp_tree_digest (rootfd, digest, err) < 0)
    return -1;

  snprintf (text, sizeof (text), "%s\n", digest);
  if (sp_write_file_atomic_at (tmpfd, SP_ROOTFS_DIGEST_FILE, text, strlen (text), 0444, err) < 0)
    return -1;
  /* Root's only: the tree's /tmp mount point is 1777, and no other user may
     reach it (a file there would fail the next verify).  */
  if (fchmod (tmpfd, 0700) < 0)
    return sp_make_error (err, errno, "chmod the output directory");
  /* Everything on disk before the rename makes it visible.  */
  if (syncfs (tmpfd) < 0)
    return sp_make_error (err, errno, "sync the file system");
  return 0;
}

int
sp_rootfs_build (const char *lock_path, const char *debs_dir, const char *out_dir, unsigned flags,
                 char digest[SP_DIGEST_TEXT_SIZE], sp_error_t *err)
{
  cleanup_lock struct sp_lock lock = { 0 };
  cleanup_close int parentfd = -1;
  cleanup_close int debsfd = -1;
  cleanup_close int tmpfd = -1;
  char base[NAME_MAX + 1];
  char tmp[NAME_MAX + 1];
  struct stat st;

  if (sp_lock_load (lock_path, &lock, err) < 0 || check_arches (&lock, err) < 0)
    return -1;
  debsfd = TEMP_FAILURE_RETRY (open (debs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (debsfd < 0)
    return sp_make_error (err, errno, "open the .deb directory `%s` (fetch it with scripts/rootfs-fetch)",
                          debs_dir);
  if (open_parent (out_dir, &parentfd, base, err) < 0)
    return -1;
  if (fstatat (parentfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return sp_make_error (err, EEXIST, "`%s` already exists; build into a new directory", out_dir);
  if (errno != ENOENT)
    return sp_make_error (err, errno, "stat `%s`", out_dir);

  if (make_temp_dir (parentfd, base, tmp, err) < 0)
    return -1;
  tmpfd = openat (parentfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (tmpfd < 0)
    sp_make_error (err, errno, "open `%s`", tmp);
  else if (build_in (tmpfd, debsfd, &lock, flags, digest, err) == 0)
    {
      if (renameat2 (parentfd, tmp, parentfd, base, RENAME_NOREPLACE) == 0)
        {
          fsync (parentfd);
          return 0;
        }
      sp_make_error (err, errno, "rename the finished build to `%s`", out_dir);
    }

  /* Any failure: nothing of the build stays.  */
  {
    sp_error_t cleanup_err = NULL;
    if (sp_tree_remove_at (parentfd, tmp, &cleanup_err) < 0)
      {
        sp_error_wrap (err, "the temporary `%s` is left behind (removing it failed: %s); the build failed",
                       tmp, sp_error_message (cleanup_err));
        sp_error_release (&cleanup_err);
      }
  }
  return -1;
}
