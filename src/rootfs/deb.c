/* .deb reading: see deb.h.  */
#define _GNU_SOURCE
#include "rootfs/deb.h"

#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "os/fileio.h"

#include "base/bounds.h"
#include "os/archive_extract.h"

#define DEBIAN_BINARY "2.0\n"

struct sp_deb
{
  char *bytes; /* the whole file */
  size_t len;
  struct archive *outer; /* the ar archive, reading bytes */
  struct archive *inner; /* data.tar, reading the outer's current member */
  int64_t data_offset;   /* bytes of data.tar handed to inner so far */
};

static int
outer_error (struct sp_deb *deb, const char *what, sp_error_t *err)
{
  return sp_make_error (err, 0, "%s: %s", what, sp_archive_message (deb->outer));
}

/* Reads the outer archive's next member header: it must exist, be a regular
   file and have a name accepted by name_ok.  */
static int
next_member (struct sp_deb *deb, const char *expected, int (*name_ok) (const char *), const char **name,
             sp_error_t *err)
{
  struct archive_entry *entry;
  int r = archive_read_next_header (deb->outer, &entry);

  if (r == ARCHIVE_EOF)
    return sp_make_error (err, 0, "the ar archive ends before its `%s` member", expected);
  if (r != ARCHIVE_OK)
    return outer_error (deb, "read the ar archive", err);
  *name = archive_entry_pathname (entry);
  if (*name == NULL || !name_ok (*name))
    return sp_make_error (err, 0, "expected the ar member `%s`, found another", expected);
  if (archive_entry_filetype (entry) != AE_IFREG)
    return sp_make_error (err, 0, "the ar member `%s` is not a regular file", *name);
  return 0;
}

static int
is_debian_binary (const char *name)
{
  return strcmp (name, "debian-binary") == 0;
}

static int
is_control_tar (const char *name)
{
  return strcmp (name, "control.tar") == 0 || strcmp (name, "control.tar.gz") == 0
         || strcmp (name, "control.tar.xz") == 0 || strcmp (name, "control.tar.zst") == 0;
}

static int
is_data_tar (const char *name)
{
  return strcmp (name, "data.tar.xz") == 0 || strcmp (name, "data.tar.gz") == 0
         || strcmp (name, "data.tar.zst") == 0;
}

static int
check_debian_binary (struct sp_deb *deb, sp_error_t *err)
{
  char buf[SP_DEB_BINARY_MAX + 1];
  size_t used = 0;
  const char *name;

  if (next_member (deb, "debian-binary", is_debian_binary, &name, err) < 0)
    return -1;
  for (;;)
    {
      la_ssize_t n = archive_read_data (deb->outer, buf + used, sizeof (buf) - used);
      if (n < 0)
        return outer_error (deb, "read `debian-binary`", err);
      if (n == 0)
        break;
      used += (size_t)n;
      if (used > SP_DEB_BINARY_MAX)
        return sp_make_error (err, 0, "`debian-binary` is longer than %d bytes", SP_DEB_BINARY_MAX);
    }
  if (used != strlen (DEBIAN_BINARY) || memcmp (buf, DEBIAN_BINARY, used) != 0)
    return sp_make_error (err, 0, "`debian-binary` is not \"2.0\\n\": not a format 2.0 .deb");
  return 0;
}

/* libarchive's read callback of the inner archive: the bytes of the outer
   archive's current member (data.tar.*), block by block, without copying.  */
static la_ssize_t
data_tar_read (struct archive *inner, void *cookie, const void **buf)
{
  struct sp_deb *deb = cookie;
  size_t size = 0;
  la_int64_t offset = 0;
  int r = archive_read_data_block (deb->outer, buf, &size, &offset);

  if (r == ARCHIVE_EOF)
    return 0;
  if (r != ARCHIVE_OK)
    {
      archive_set_error (inner, EINVAL, "read data.tar from the ar archive: %s",
                         sp_archive_message (deb->outer));
      return -1;
    }
  if (offset != deb->data_offset || size > (size_t)INT64_MAX - (size_t)offset)
    {
      archive_set_error (inner, EINVAL, "data.tar is not contiguous in the ar archive");
      return -1;
    }
  deb->data_offset += (int64_t)size;
  return (la_ssize_t)size;
}

static int
open_data_tar (struct sp_deb *deb, sp_error_t *err)
{
  const char *name;
  int r;

  if (next_member (deb, "data.tar.{xz,gz,zst}", is_data_tar, &name, err) < 0)
    return -1;
  deb->inner = archive_read_new ();
  if (deb->inner == NULL)
    return sp_make_error (err, ENOMEM, "allocate the data.tar reader");
  /* Only the compression the member's name announces, and only tar.  */
  if (strcmp (name, "data.tar.xz") == 0)
    r = archive_read_support_filter_xz (deb->inner);
  else if (strcmp (name, "data.tar.gz") == 0)
    r = archive_read_support_filter_gzip (deb->inner);
  else
    r = archive_read_support_filter_zstd (deb->inner);
  if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
    return sp_make_error (err, 0, "`%s`: %s", name, sp_archive_message (deb->inner));
  if (archive_read_support_format_tar (deb->inner) != ARCHIVE_OK)
    return sp_make_error (err, 0, "`%s`: %s", name, sp_archive_message (deb->inner));
  if (archive_read_open (deb->inner, deb, NULL, data_tar_read, NULL) != ARCHIVE_OK)
    return sp_make_error (err, 0, "open `%s`: %s", name, sp_archive_message (deb->inner));
  return 0;
}

static int
check_sha256 (const struct sp_deb *deb, const uint8_t expected[SP_SHA256_BYTES], sp_error_t *err)
{
  uint8_t actual[SP_SHA256_BYTES];
  char actual_hex[SP_SHA256_HEX + 1];
  char expected_hex[SP_SHA256_HEX + 1];

  sp_sha256 (deb->bytes, deb->len, actual);
  if (memcmp (actual, expected, SP_SHA256_BYTES) == 0)
    return 0;
  sp_sha256_hex (actual, actual_hex);
  sp_sha256_hex (expected, expected_hex);
  return sp_make_error (err, 0,
                        "sha256 %s does not match the lock's %s; not parsed (re-fetch it with "
                        "scripts/rootfs-fetch)",
                        actual_hex, expected_hex);
}

int
sp_deb_open (int dirfd, const char *filename, const uint8_t sha256[SP_SHA256_BYTES], struct sp_deb **out,
             sp_error_t *err)
{
  cleanup_deb struct sp_deb *deb = NULL;
  cleanup_close int fd = -1;
  const char *name;
  struct stat st;

  fd = TEMP_FAILURE_RETRY (openat (dirfd, filename, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd < 0)
    return sp_make_error (err, errno, "open");
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "stat");
  if (!S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "not a regular file");
  if (st.st_size > SP_DEB_MAX_BYTES)
    return sp_make_error (err, 0, "larger than %d bytes", SP_DEB_MAX_BYTES);

  deb = calloc (1, sizeof (*deb));
  if (deb == NULL)
    return sp_make_error (err, errno, "allocate");
  if (sp_read_fd_capped (fd, SP_DEB_MAX_BYTES, &deb->bytes, &deb->len, err) < 0)
    return sp_error_wrap (err, "read");

  /* The pinned digest first: an unverified file is never parsed.  */
  if (check_sha256 (deb, sha256, err) < 0)
    return -1;

  deb->outer = archive_read_new ();
  if (deb->outer == NULL)
    return sp_make_error (err, ENOMEM, "allocate the ar reader");
  if (archive_read_support_format_ar (deb->outer) != ARCHIVE_OK)
    return outer_error (deb, "set up the ar reader", err);
  if (archive_read_open_memory (deb->outer, deb->bytes, deb->len) != ARCHIVE_OK)
    return outer_error (deb, "not an ar archive", err);

  if (check_debian_binary (deb, err) < 0)
    return -1;
  /* The control tarball holds maintainer scripts and metadata: never run,
     never needed, so skipped unread.  */
  if (next_member (deb, "control.tar[.gz|.xz|.zst]", is_control_tar, &name, err) < 0)
    return -1;
  if (open_data_tar (deb, err) < 0)
    return -1;

  *out = get_and_reset (&deb);
  return 0;
}

struct archive *
sp_deb_data (struct sp_deb *deb)
{
  return deb->inner;
}

int
sp_deb_finish (struct sp_deb *deb, sp_error_t *err)
{
  struct archive_entry *entry;
  int r = archive_read_next_header (deb->outer, &entry);

  if (r == ARCHIVE_EOF)
    return 0;
  if (r != ARCHIVE_OK)
    return outer_error (deb, "read the ar archive after data.tar", err);
  return sp_make_error (err, 0, "the ar archive has a member after data.tar");
}

void
sp_deb_close (struct sp_deb *deb)
{
  if (deb == NULL)
    return;
  sp_archive_freep (&deb->inner);
  sp_archive_freep (&deb->outer);
  free (deb->bytes);
  free (deb);
}
