/* GitHub tarball extraction: see tarball.h.  */
#define _GNU_SOURCE
#include "seed/tarball.h"

#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "os/archive_extract.h"
#include "os/open_beneath.h"
#include "os/progress.h"

#define WRITER_OPTIONS                                                                                       \
  (ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS                                         \
   | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_NO_OVERWRITE | ARCHIVE_EXTRACT_PERM)

struct extraction
{
  int dstfd;
  struct archive *disk;
  const struct sp_tarball_limits *limits;
  char top[SP_TARBALL_TOP_MAX + 1];
  uint64_t entries;
  uint64_t bytes;
};

static bool
is_component (const char *s, size_t len, const char *word)
{
  return strlen (word) == len && strncasecmp (s, word, len) == 0;
}

/* Maps an archive name to its path below the top-level directory ("" for the
   top itself), which is at most SP_TREE_PATH_MAX - 1 bytes like every path
   in a tree.  The first name seen fixes the top component.  A directory's
   name may end with one '/'.  */
static int
member_path (struct extraction *x, const char *raw, bool is_dir, char out[SP_TREE_PATH_MAX], sp_error_t *err)
{
  size_t len, start, first_len = 0;

  if (raw == NULL || raw[0] == '\0')
    return sp_make_error (err, 0, "empty name");
  if (raw[0] == '/')
    return sp_make_error (err, 0, "absolute name");
  len = strlen (raw);
  if (raw[len - 1] == '/')
    {
      if (!is_dir)
        return sp_make_error (err, 0, "name ends with `/` but it is not a directory");
      len--;
    }

  for (start = 0; start <= len;)
    {
      const char *slash = memchr (raw + start, '/', len - start);
      size_t end = slash != NULL ? (size_t)(slash - raw) : len;
      size_t clen = end - start;

      if (clen == 0)
        return sp_make_error (err, 0, "empty name component");
      if (is_component (raw + start, clen, ".") || is_component (raw + start, clen, ".."))
        return sp_make_error (err, 0, "`.` or `..` name component");
      /* git never stores a `.git`: one in a tarball is forged metadata.  */
      if (is_component (raw + start, clen, ".git"))
        return sp_make_error (err, 0, "`.git` name component");
      if (start == 0)
        first_len = clen;
      start = end + 1;
    }

  if (first_len > SP_TARBALL_TOP_MAX)
    return sp_make_error (err, 0, "the top-level directory's name is longer than %d bytes",
                          SP_TARBALL_TOP_MAX);
  if (first_len < len && len - first_len - 1 >= SP_TREE_PATH_MAX)
    return sp_make_error (err, 0, "path below the top-level directory longer than %d bytes",
                          SP_TREE_PATH_MAX - 1);
  if (x->top[0] == '\0')
    {
      memcpy (x->top, raw, first_len);
      x->top[first_len] = '\0';
    }
  else if (strlen (x->top) != first_len || memcmp (x->top, raw, first_len) != 0)
    return sp_make_error (err, 0, "outside the top-level directory every member must share");

  if (first_len == len)
    out[0] = '\0';
  else
    {
      memcpy (out, raw + first_len + 1, len - first_len - 1);
      out[len - first_len - 1] = '\0';
    }
  return 0;
}

/* Looks path up below dstfd without following any symlink.  Every existing
   ancestor must be a real directory: nothing is ever written through a link
   or a file.  *exists says whether path itself exists, and *st is its lstat.  */
static int
lookup (int dstfd, const char *path, bool *exists, struct stat *st, sp_error_t *err)
{
  struct sp_lookup found;

  if (sp_lookup_beneath (dstfd, path, &found) < 0)
    return sp_make_error (err, errno, "%s",
                          found.what == SP_LOOKUP_OPEN_FAILED ? "open a parent directory"
                                                              : "lstat a component");
  if (found.what == SP_LOOKUP_SYMLINK_ANCESTOR)
    return sp_make_error (err, 0, "a parent is a symlink: nothing is written through one");
  if (found.what == SP_LOOKUP_NONDIR_ANCESTOR)
    return sp_make_error (err, 0, "a parent is not a directory");
  *exists = found.what == SP_LOOKUP_PRESENT;
  if (*exists)
    *st = found.st;
  return 0;
}

/* Rewrites what goes to disk: the stripped name, owner 0:0, no names, ACLs,
   xattrs or flags, and the permissions git itself knows.  */
static void
normalize (struct archive_entry *entry, const char *path, const char *link_target, mode_t link_perm)
{
  mode_t perm = archive_entry_perm (entry);

  archive_entry_copy_pathname (entry, path);
  archive_entry_set_uid (entry, 0);
  archive_entry_set_gid (entry, 0);
  archive_entry_copy_uname (entry, NULL);
  archive_entry_copy_gname (entry, NULL);
  archive_entry_acl_clear (entry);
  archive_entry_xattr_clear (entry);
  archive_entry_set_fflags (entry, 0, 0);
  if (link_target != NULL)
    {
      archive_entry_copy_hardlink (entry, link_target);
      archive_entry_set_perm (entry, link_perm);
      return;
    }
  switch (archive_entry_filetype (entry))
    {
    case AE_IFDIR:
      archive_entry_set_perm (entry, 0755);
      break;
    case AE_IFREG:
      archive_entry_set_perm (entry, (perm & 0111) != 0 ? 0755 : 0644);
      break;
    default:
      archive_entry_set_perm (entry, 0777);
      break;
    }
}

static int
extract_member (struct extraction *x, struct archive *in, struct archive_entry *entry, sp_error_t *err)
{
  char path[SP_TREE_PATH_MAX];
  char target[SP_TREE_PATH_MAX];
  const char *hardlink = archive_entry_hardlink (entry);
  const char *symlink = NULL;
  bool is_dir = hardlink == NULL && archive_entry_filetype (entry) == AE_IFDIR;
  bool is_reg = hardlink == NULL && archive_entry_filetype (entry) == AE_IFREG;
  const char *refused;
  mode_t link_perm = 0;
  uint64_t bytes_before = x->bytes;
  bool exists;
  struct stat st;

  if (++x->entries > x->limits->max_entries)
    return sp_make_error (err, 0, "the tarball holds more than %llu entries",
                          (unsigned long long)x->limits->max_entries);
  refused = sp_archive_entry_refused_type (entry);
  if (refused != NULL)
    return sp_make_error (err, 0, "%s", refused);
  if (member_path (x, archive_entry_pathname (entry), is_dir, path, err) < 0)
    return -1;
  if (path[0] == '\0')
    {
      /* The top-level directory itself: dst_dirfd stands for it.  */
      if (!is_dir)
        return sp_make_error (err, 0, "the top-level member is not a directory");
      return 0;
    }

  if (lookup (x->dstfd, path, &exists, &st, err) < 0)
    return -1;
  if (exists)
    {
      if (is_dir && S_ISDIR (st.st_mode))
        return 0;
      return sp_make_error (err, 0, "it already exists: nothing is overwritten");
    }

  if (hardlink != NULL)
    {
      bool target_exists;
      struct stat tst;

      if (member_path (x, hardlink, false, target, err) < 0)
        return sp_error_wrap (err, "hardlink target");
      if (target[0] == '\0')
        return sp_make_error (err, 0, "hardlink to the top-level directory");
      if (archive_entry_size_is_set (entry) && archive_entry_size (entry) != 0)
        return sp_make_error (err, 0, "hardlink that carries data");
      if (lookup (x->dstfd, target, &target_exists, &tst, err) < 0)
        return sp_error_wrap (err, "hardlink target");
      if (!target_exists || !S_ISREG (tst.st_mode))
        return sp_make_error (err, 0, "hardlink target is not a regular file extracted before it");
      link_perm = tst.st_mode & 0777;
    }
  else if (archive_entry_filetype (entry) == AE_IFLNK)
    {
      symlink = archive_entry_symlink (entry);
      if (symlink == NULL || symlink[0] == '\0' || strlen (symlink) > SP_TARBALL_LINK_MAX)
        return sp_make_error (err, 0, "symlink target empty or longer than %d bytes", SP_TARBALL_LINK_MAX);
    }
  else if (is_reg)
    {
      la_int64_t size = archive_entry_size (entry);

      if (!archive_entry_size_is_set (entry) || size < 0)
        return sp_make_error (err, 0, "regular file without a size");
      if ((uint64_t)size > x->limits->max_tree_bytes - x->bytes)
        return sp_make_error (err, 0, "%lld bytes: more than the %llu left of the tree's %llu-byte limit",
                              (long long)size, (unsigned long long)(x->limits->max_tree_bytes - x->bytes),
                              (unsigned long long)x->limits->max_tree_bytes);
    }

  normalize (entry, path, hardlink != NULL ? target : NULL, link_perm);
  if (archive_write_header (x->disk, entry) != ARCHIVE_OK)
    return sp_make_error (err, 0, "libarchive refused it: %s", sp_archive_message (x->disk));
  if (is_reg && sp_archive_copy_data (in, x->disk, &x->bytes, x->limits->max_tree_bytes, err) < 0)
    return -1;
  if (archive_write_finish_entry (x->disk) != ARCHIVE_OK)
    return sp_make_error (err, 0, "finish writing it: %s", sp_archive_message (x->disk));
  sp_progress_add (x->limits->progress, is_dir ? 0 : 1, x->bytes - bytes_before);
  return 0;
}

static int
open_reader (int tarfd, bool raw, struct archive **out, sp_error_t *err)
{
  cleanup_archive struct archive *a = archive_read_new ();

  if (a == NULL)
    return sp_make_error (err, ENOMEM, "set up libarchive's reader");
  if (lseek (tarfd, 0, SEEK_SET) < 0)
    return sp_make_error (err, errno, "rewind the tarball");
  if (archive_read_support_filter_gzip (a) != ARCHIVE_OK
      || (raw ? archive_read_support_format_raw (a) : archive_read_support_format_tar (a)) != ARCHIVE_OK)
    return sp_make_error (err, 0, "set up libarchive's reader: %s", sp_archive_message (a));
  if (archive_read_open_fd (a, tarfd, SP_TARBALL_READ_BLOCK) != ARCHIVE_OK)
    return sp_make_error (err, 0, "open the tarball: %s", sp_archive_message (a));
  *out = get_and_reset (&a);
  return 0;
}

/* The gzip layer must be gzip and whole: a tar reader stops at the end
   marker and never looks at what follows, so a body cut after it would pass
   unnoticed.  This inflates everything once, writing nothing.  */
static int
check_stream (int tarfd, const struct sp_tarball_limits *limits, sp_error_t *err)
{
  cleanup_archive struct archive *a = NULL;
  cleanup_free char *buf = NULL;
  struct archive_entry *entry;
  uint64_t cap, inflated = 0;

  if (__builtin_mul_overflow (limits->max_entries, (uint64_t)SP_TARBALL_ENTRY_OVERHEAD, &cap)
      || __builtin_add_overflow (cap, limits->max_tree_bytes, &cap)
      || __builtin_add_overflow (cap, (uint64_t)SP_TARBALL_TAIL_BYTES, &cap))
    cap = UINT64_MAX;
  if (open_reader (tarfd, true, &a, err) < 0)
    return -1;
  if (archive_read_next_header (a, &entry) != ARCHIVE_OK)
    return sp_make_error (err, 0, "not a gzip stream: %s", sp_archive_message (a));
  if (archive_filter_count (a) != 2 || archive_filter_code (a, 0) != ARCHIVE_FILTER_GZIP)
    return sp_make_error (err, 0, "not a gzip stream");
  buf = malloc (SP_TARBALL_READ_BLOCK);
  if (buf == NULL)
    return sp_make_error (err, errno, "allocate a read buffer");
  for (;;)
    {
      la_ssize_t n = archive_read_data (a, buf, SP_TARBALL_READ_BLOCK);

      if (n == 0)
        return 0;
      if (n < 0)
        return sp_make_error (err, 0, "the gzip stream is truncated or corrupt: %s", sp_archive_message (a));
      if (sp_progress_check (limits->progress, err) < 0)
        return -1;
      inflated += (uint64_t)n;
      sp_progress_add (limits->progress, 0, (uint64_t)n);
      if (inflated > cap)
        return sp_make_error (err, 0, "the tarball inflates to more than %llu bytes",
                              (unsigned long long)cap);
    }
}

static int
require_empty (int dstfd, sp_error_t *err)
{
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;
  int fd = openat (dstfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    return sp_make_error (err, errno, "open the destination");
  dir = fdopendir (fd);
  if (dir == NULL)
    {
      int saved = errno;
      close (fd);
      return sp_make_error (err, saved, "read the destination");
    }
  errno = 0;
  while ((de = readdir (dir)) != NULL)
    if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
      return sp_make_error (err, 0, "the destination is not empty");
  if (errno != 0)
    return sp_make_error (err, errno, "read the destination");
  return 0;
}

static int
extract_all (struct extraction *x, struct archive *in, sp_error_t *err)
{
  for (;;)
    {
      struct archive_entry *entry;
      int r = sp_archive_next (in, "the tar stream", &entry, err);

      if (r < 0)
        return -1;
      if (r == 0)
        break;
      if (sp_progress_check (x->limits->progress, err) < 0)
        return -1;
      if (x->entries == 0
          && (archive_filter_count (in) != 2 || archive_filter_code (in, 0) != ARCHIVE_FILTER_GZIP))
        return sp_make_error (err, 0, "not a gzip tar");
      if (extract_member (x, in, entry, err) < 0)
        return sp_archive_member_failed (err, entry);
    }
  if (x->entries == 0)
    return sp_make_error (err, 0, "the tarball holds no member");
  return 0;
}

/* Tarballs name members in UTF-8 (pax `path` records).  Under the C locale
   libarchive cannot convert such a name and warns, which extract_all
   rightly treats as fatal; so the conversion runs under C.UTF-8, set for
   this thread only, and names reach the disk as the archive's bytes.  */
static int
extract_all_utf8 (struct extraction *x, struct archive *in, sp_error_t *err)
{
  locale_t utf8 = newlocale (LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
  locale_t previous = (locale_t)0;
  int ret;

  if (utf8 != (locale_t)0)
    previous = uselocale (utf8);
  ret = extract_all (x, in, err);
  if (utf8 != (locale_t)0)
    {
      uselocale (previous);
      freelocale (utf8);
    }
  return ret;
}

int
sp_tarball_extract (int tarfd, int dst_dirfd, const struct sp_tarball_limits *limits, sp_error_t *err)
{
  cleanup_archive struct archive *in = NULL;
  cleanup_close int saved_cwd = -1;
  struct extraction x = { .dstfd = dst_dirfd, .limits = limits };
  int ret;

  if (limits->max_entries == 0 || limits->max_tree_bytes == 0)
    return sp_make_error (err, 0, "the entry and byte limits must be positive");
  if (require_empty (dst_dirfd, err) < 0)
    return -1;
  sp_progress_phase (limits->progress, "check the gzip stream", SP_PROGRESS_BYTES, 0);
  if (check_stream (tarfd, limits, err) < 0)
    return -1;
  if (open_reader (tarfd, false, &in, err) < 0)
    return -1;

  x.disk = archive_write_disk_new ();
  if (x.disk == NULL || archive_write_disk_set_options (x.disk, WRITER_OPTIONS) != ARCHIVE_OK)
    {
      sp_archive_freep (&x.disk);
      return sp_make_error (err, ENOMEM, "set up libarchive's disk writer");
    }
  saved_cwd = open (".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (saved_cwd < 0)
    {
      sp_archive_freep (&x.disk);
      return sp_make_error (err, errno, "open the current directory");
    }
  if (fchdir (dst_dirfd) < 0)
    {
      sp_archive_freep (&x.disk);
      return sp_make_error (err, errno, "enter the destination");
    }

  sp_progress_phase (limits->progress, "extract", SP_PROGRESS_TREE, 0);
  ret = extract_all_utf8 (&x, in, err);
  /* Still inside the destination: libarchive's deferred directory fixups
     use relative names.  */
  if (archive_write_close (x.disk) != ARCHIVE_OK && ret == 0)
    ret = sp_make_error (err, 0, "finish extracting: %s", sp_archive_message (x.disk));
  sp_archive_freep (&x.disk);
  if (fchdir (saved_cwd) < 0)
    {
      int saved = errno;

      if (ret == 0)
        return sp_make_error (err, saved, "return to the previous directory");
      return sp_error_wrap (err, "and returning to the previous directory failed (%s)", strerror (saved));
    }
  return ret;
}
