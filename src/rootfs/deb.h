/* One .deb, read whole into memory and checked against its pinned sha256
   before any byte of it is parsed.  Then the ar members, in order:
   `debian-binary` ("2.0\n"), `control.tar[.gz|.xz|.zst]` (not read), and
   `data.tar.{xz,gz,zst}`, whose tar entries the caller reads through
   sp_deb_data().  Nothing may follow data.tar.  */
#ifndef SP_ROOTFS_DEB_H
#define SP_ROOTFS_DEB_H

#include <archive.h>
#include <stdint.h>

#include "base/error.h"
#include "base/sha256.h"

struct sp_deb;

/* Opens dirfd/filename.  A file larger than SP_DEB_MAX_BYTES, a sha256
   mismatch, or any deviation from the member layout above is an error.  */
int sp_deb_open (int dirfd, const char *filename, const uint8_t sha256[SP_SHA256_BYTES], struct sp_deb **out,
                 sp_error_t *err);

/* The data tarball, positioned before its first entry: read it with
   archive_read_next_header() and archive_read_data_block().  Owned by deb.  */
struct archive *sp_deb_data (struct sp_deb *deb);

/* After the data tarball's last entry: checks that no member follows it.  */
int sp_deb_finish (struct sp_deb *deb, sp_error_t *err);

void sp_deb_close (struct sp_deb *deb);

static inline void
sp_deb_closep (struct sp_deb **deb)
{
  sp_deb_close (*deb);
  *deb = NULL;
}
#define cleanup_deb __attribute__ ((cleanup (sp_deb_closep)))

#endif
