/* A cleanup attribute for libarchive handles, after crun's cleanup_* set.  */
#ifndef SP_CLEANUP_ARCHIVE_H
#define SP_CLEANUP_ARCHIVE_H

#include <archive.h>

static inline void
sp_archive_freep (struct archive **a)
{
  if (*a)
    archive_free (*a);
  *a = NULL;
}
#define cleanup_archive __attribute__ ((cleanup (sp_archive_freep)))

/* libarchive's message for the last failure, never NULL.  */
static inline const char *
sp_archive_message (struct archive *a)
{
  const char *msg = archive_error_string (a);
  return msg ? msg : "unknown libarchive error";
}

#endif
