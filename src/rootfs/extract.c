/* Secure extraction: see extract.h.  */
#define _GNU_SOURCE
#include "rootfs/extract.h"

#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "os/archive_extract.h"
#include "os/open_beneath.h"

#include "rootfs/entry_path.h"
#include "rootfs/prune.h"

#define DISK_OPTIONS                                                                                         \
  (ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS                                         \
   | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_NO_OVERWRITE)

struct sp_extract
{
  int rootfd;
  int saved_cwd;
  struct archive *disk;
  uint64_t entries;
  uint64_t bytes;
};

/* The first len bytes of path, quoted (sp_quote_name).  */
static const char *
quote_prefix (const char *path, size_t len, char buf[SP_QUOTE_BUF_SIZE])
{
  char prefix[SP_TREE_PATH_MAX];

  if (len >= sizeof (prefix))
    len = sizeof (prefix) - 1;
  memcpy (prefix, path, len);
  prefix[len] = '\0';
  return sp_quote_name (prefix, buf);
}

/* Looks path up in the tree without following any symlink.  An existing
   ancestor that is a symlink, or not a directory, is an error: the entry
   would be written through it.  *exists says whether path itself exists
   (and then *st describes it).  */
static int
lookup (int rootfd, const char *path, bool *exists, struct stat *st, sp_error_t *err)
{
  struct sp_lookup found;
  char q[SP_QUOTE_BUF_SIZE];

  if (sp_lookup_beneath (rootfd, path, &found) < 0)
    return sp_make_error (err, errno, "%s `%s`", found.what == SP_LOOKUP_OPEN_FAILED ? "open" : "stat",
                          quote_prefix (path, found.len, q));
  if (found.what == SP_LOOKUP_SYMLINK_ANCESTOR)
    return sp_make_error (err, 0, "`%s` is a symlink: nothing is written through one",
                          quote_prefix (path, found.len, q));
  if (found.what == SP_LOOKUP_NONDIR_ANCESTOR)
    return sp_make_error (err, 0, "`%s` is not a directory", quote_prefix (path, found.len, q));
  *exists = found.what == SP_LOOKUP_PRESENT;
  if (*exists)
    *st = found.st;
  return 0;
}

/* The entry's type, refusing what a rootfs never holds.  */
static int
check_type (struct archive_entry *entry, sp_error_t *err)
{
  const char *refused = sp_archive_entry_refused_type (entry);

  if (refused != NULL)
    return sp_make_error (err, 0, "%s", refused);
  return 0;
}

static int
check_hardlink (struct sp_extract *x, struct archive_entry *entry, char target[SP_TREE_PATH_MAX],
                sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];
  bool exists;
  struct stat st;

  if (sp_entry_path_clean (archive_entry_hardlink (entry), target, err) < 0)
    return sp_error_wrap (err, "hardlink target");
  if (target[0] == '\0')
    return sp_make_error (err, 0, "hardlink to the tree's root");
  if (archive_entry_size_is_set (entry) && archive_entry_size (entry) != 0)
    return sp_make_error (err, 0, "hardlink that carries data");
  if (lookup (x->rootfd, target, &exists, &st, err) < 0)
    return sp_error_wrap (err, "hardlink target");
  if (!exists || !S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "hardlink target `%s` is not a regular file extracted before it",
                          sp_quote_name (target, q));
  return 0;
}

/* Owner 0:0, no special bits, writable until normalization; nothing of the
   archive's ACLs, xattrs or flags.  */
static void
sanitize (struct archive_entry *entry, const char *path, const char *target)
{
  mode_t perm = archive_entry_perm (entry);

  archive_entry_copy_pathname (entry, path);
  if (target)
    archive_entry_copy_hardlink (entry, target);
  archive_entry_set_uid (entry, 0);
  archive_entry_set_gid (entry, 0);
  archive_entry_copy_uname (entry, NULL);
  archive_entry_copy_gname (entry, NULL);
  archive_entry_acl_clear (entry);
  archive_entry_xattr_clear (entry);
  archive_entry_set_fflags (entry, 0, 0);
  if (target == NULL)
    switch (archive_entry_filetype (entry))
      {
      case AE_IFDIR:
        archive_entry_set_perm (entry, 0755);
        break;
      case AE_IFREG:
        archive_entry_set_perm (entry, (perm & 0111) ? 0755 : 0644);
        break;
      default:
        break;
      }
}

static int
extract_entry (struct sp_extract *x, struct archive *in, struct archive_entry *entry, sp_error_t *err)
{
  char path[SP_TREE_PATH_MAX];
  char target[SP_TREE_PATH_MAX];
  char q[SP_QUOTE_BUF_SIZE];
  bool is_hardlink = archive_entry_hardlink (entry) != NULL;
  bool is_dir = !is_hardlink && archive_entry_filetype (entry) == AE_IFDIR;
  const char *forbidden;
  const char *link;
  bool exists;
  struct stat st;

  if (sp_entry_path_clean (archive_entry_pathname (entry), path, err) < 0 || check_type (entry, err) < 0)
    return -1;
  if (path[0] == '\0')
    {
      /* The archive's "./": the tree's root already exists.  */
      if (!is_dir)
        return sp_make_error (err, 0, "the archive root is not a directory");
      return 0;
    }
  if (sp_prune_skip (path))
    return 0;
  forbidden = sp_prune_forbidden (path);
  if (forbidden)
    return sp_make_error (err, 0, "%s, which the rootfs must not hold", forbidden);
  if (++x->entries > SP_ROOTFS_MAX_ENTRIES)
    return sp_make_error (err, 0, "the packages hold more than %d entries", SP_ROOTFS_MAX_ENTRIES);

  link = archive_entry_symlink (entry);
  if (!is_hardlink && archive_entry_filetype (entry) == AE_IFLNK
      && (link == NULL || link[0] == '\0' || strlen (link) > SP_ROOTFS_LINK_MAX))
    return sp_make_error (err, 0, "symlink target empty or longer than %d bytes", SP_ROOTFS_LINK_MAX);

  if (lookup (x->rootfd, path, &exists, &st, err) < 0)
    return -1;
  if (exists && !(is_dir && S_ISDIR (st.st_mode)))
    return sp_make_error (err, 0, "`%s` already exists: two packages, or two members of one, ship it",
                          sp_quote_name (path, q));
  if (is_hardlink && check_hardlink (x, entry, target, err) < 0)
    return -1;

  /* Sizes before bytes: a member's declared size counts before anything of
     it is written; the bytes copied count too (sp_archive_copy_data).  */
  if (!is_hardlink && archive_entry_filetype (entry) == AE_IFREG && archive_entry_size_is_set (entry)
      && (archive_entry_size (entry) < 0
          || (uint64_t)archive_entry_size (entry) > (uint64_t)SP_ROOTFS_MAX_BYTES - x->bytes))
    return sp_make_error (err, 0, "%lld bytes: the packages would hold more than %lld bytes",
                          (long long)archive_entry_size (entry), (long long)SP_ROOTFS_MAX_BYTES);
  sanitize (entry, path, is_hardlink ? target : NULL);
  if (archive_write_header (x->disk, entry) != ARCHIVE_OK)
    return sp_make_error (err, 0, "libarchive refused it: %s", sp_archive_message (x->disk));
  if (!is_hardlink && archive_entry_filetype (entry) == AE_IFREG
      && sp_archive_copy_data (in, x->disk, &x->bytes, (uint64_t)SP_ROOTFS_MAX_BYTES, err) < 0)
    return -1;
  if (archive_write_finish_entry (x->disk) != ARCHIVE_OK)
    return sp_make_error (err, 0, "libarchive: %s", sp_archive_message (x->disk));
  return 0;
}

int
sp_extract_archive (struct sp_extract *x, struct archive *in, sp_error_t *err)
{
  for (;;)
    {
      struct archive_entry *entry;
      int r = sp_archive_next (in, "data.tar", &entry, err);

      if (r <= 0)
        return r;
      if (extract_entry (x, in, entry, err) < 0)
        return sp_archive_member_failed (err, entry);
    }
}

int
sp_extract_begin (int rootfd, struct sp_extract **out, sp_error_t *err)
{
  cleanup_free struct sp_extract *x = calloc (1, sizeof (*x));

  if (x == NULL)
    return sp_make_error (err, errno, "allocate the extractor");
  x->rootfd = rootfd;
  x->saved_cwd = open (".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (x->saved_cwd < 0)
    return sp_make_error (err, errno, "open the current directory");
  x->disk = archive_write_disk_new ();
  if (x->disk == NULL || archive_write_disk_set_options (x->disk, DISK_OPTIONS) != ARCHIVE_OK)
    {
      sp_archive_freep (&x->disk);
      sp_closep (&x->saved_cwd);
      return sp_make_error (err, ENOMEM, "set up libarchive's disk writer");
    }
  if (fchdir (rootfd) < 0)
    {
      int saved = errno;
      sp_archive_freep (&x->disk);
      sp_closep (&x->saved_cwd);
      return sp_make_error (err, saved, "enter the tree");
    }
  *out = get_and_reset (&x);
  return 0;
}

int
sp_extract_end (struct sp_extract *x, sp_error_t *err)
{
  int ret = 0;

  if (x == NULL)
    return 0;
  /* Still inside the tree: the deferred fixups use relative paths.  */
  if (archive_write_close (x->disk) != ARCHIVE_OK)
    ret = sp_make_error (err, 0, "finish extracting: %s", sp_archive_message (x->disk));
  sp_archive_freep (&x->disk);
  if (fchdir (x->saved_cwd) < 0 && ret == 0)
    ret = sp_make_error (err, errno, "return to the previous directory");
  sp_closep (&x->saved_cwd);
  free (x);
  return ret;
}
