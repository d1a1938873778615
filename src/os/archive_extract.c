/* What the two extractors share: see src/os/archive_extract.h.  */
#include "os/archive_extract.h"

#include <archive_entry.h>
#include <stddef.h>

#include "base/quote.h"

const char *
sp_archive_message (struct archive *a)
{
  const char *msg = archive_error_string (a);

  return msg != NULL ? msg : "no detail from libarchive";
}

int
sp_archive_next (struct archive *in, const char *what, struct archive_entry **entry, sp_error_t *err)
{
  int r = archive_read_next_header (in, entry);

  if (r == ARCHIVE_EOF)
    return 0;
  if (r != ARCHIVE_OK)
    return sp_make_error (err, 0, "read %s: %s", what, sp_archive_message (in));
  return 1;
}

int
sp_archive_member_failed (sp_error_t *err, struct archive_entry *entry)
{
  char quoted[SP_QUOTE_BUF_SIZE];

  return sp_error_wrap (err, "member `%s`", sp_quote_name (archive_entry_pathname (entry), quoted));
}

const char *
sp_archive_entry_refused_type (struct archive_entry *entry)
{
  if (archive_entry_hardlink (entry) != NULL)
    return NULL;
  switch (archive_entry_filetype (entry))
    {
    case AE_IFREG:
    case AE_IFDIR:
    case AE_IFLNK:
      return NULL;
    case AE_IFCHR:
    case AE_IFBLK:
      return "a device node";
    case AE_IFIFO:
      return "a FIFO";
    case AE_IFSOCK:
      return "a socket";
    default:
      return "an unknown file type";
    }
}

int
sp_archive_copy_data (struct archive *in, struct archive *disk, uint64_t *bytes, uint64_t max_bytes,
                      sp_error_t *err)
{
  for (;;)
    {
      const void *block;
      size_t size;
      la_int64_t offset;
      int r = archive_read_data_block (in, &block, &size, &offset);

      if (r == ARCHIVE_EOF)
        return 0;
      if (r != ARCHIVE_OK)
        return sp_make_error (err, 0, "read the data: %s", sp_archive_message (in));
      if (*bytes > max_bytes || size > max_bytes - *bytes)
        return sp_make_error (err, 0, "the files hold more than %llu bytes in all",
                              (unsigned long long)max_bytes);
      *bytes += size;
      if (archive_write_data_block (disk, block, size, offset) != ARCHIVE_OK)
        return sp_make_error (err, 0, "write the data: %s", sp_archive_message (disk));
    }
}
