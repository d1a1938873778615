/* Refused archive member types: see
   include/sealed-probe/archive_entry_check.h.  */
#include <sealed-probe/archive_entry_check.h>

#include <archive_entry.h>
#include <stddef.h>

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
