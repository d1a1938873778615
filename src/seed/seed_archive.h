/* Cleanup attributes for the libarchive handles of the tarball source.  */
#ifndef SP_SEED_ARCHIVE_H
#define SP_SEED_ARCHIVE_H

#include <archive.h>

static inline void
sp_seed_archive_freep (struct archive **a)
{
  if (*a != NULL)
    archive_free (*a);
  *a = NULL;
}
#define cleanup_seed_archive __attribute__ ((cleanup (sp_seed_archive_freep)))

/* What libarchive said about its last failure; never NULL.  */
static inline const char *
sp_seed_archive_why (struct archive *a)
{
  const char *why = archive_error_string (a);

  return why != NULL ? why : "no detail from libarchive";
}

#endif
