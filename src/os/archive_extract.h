/* What the two libarchive extractors (the rootfs builder's and the GitHub
   tarball source's) share: a cleanup attribute and the error text of a
   handle, the read loop's steps, which member types they write at all, and
   copying one member's data under a byte budget.  */
#ifndef SP_OS_ARCHIVE_EXTRACT_H
#define SP_OS_ARCHIVE_EXTRACT_H

#include <archive.h>
#include <stdint.h>

#include "base/error.h"

struct archive_entry;

static inline void
sp_archive_freep (struct archive **a)
{
  if (*a != NULL)
    archive_free (*a);
  *a = NULL;
}
#define cleanup_archive __attribute__ ((cleanup (sp_archive_freep)))

/* libarchive's message for the last failure on a, never NULL.  */
const char *sp_archive_message (struct archive *a);

/* NULL when entry is a regular file, a directory, a symlink or a hardlink
   (whatever file type a hardlink carries).  Otherwise what it is, for the
   caller's message: "a device node", "a FIFO", "a socket" or "an unknown
   file type".  */
const char *sp_archive_entry_refused_type (struct archive_entry *entry);

/* Reads the next member's header: 1 with *entry set, 0 at the end of the
   stream, -1 on a read error, naming what ("data.tar").  */
int sp_archive_next (struct archive *in, const char *what, struct archive_entry **entry, sp_error_t *err);

/* Wraps the error of a member that failed with its quoted name, "member
   `x`: ...".  Returns -1.  */
int sp_archive_member_failed (sp_error_t *err, struct archive_entry *entry);

/* Copies the data of the member just read from in to the entry just written
   to disk, adding its size to *bytes and failing, before writing the block
   that would cross it, once *bytes would exceed max_bytes.  */
int sp_archive_copy_data (struct archive *in, struct archive *disk, uint64_t *bytes, uint64_t max_bytes,
                          sp_error_t *err);

#endif
