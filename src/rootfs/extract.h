/* Secure extraction of package data tarballs into the rootfs tree.

   Every entry is checked before libarchive writes it: its path must be clean
   (entry_path.h), it must be a directory, a regular file, a symlink or a
   hardlink (no device node, FIFO or socket), nothing may be written through a
   symlink or over an existing non-directory (two packages shipping one file
   is an error), and a hardlink must point at a regular file already extracted.
   Pruned entries (prune.h) are skipped unread; a forbidden name fails.  Then
   libarchive's write_disk writes it with ARCHIVE_EXTRACT_SECURE_NODOTDOT,
   _SECURE_SYMLINKS, _SECURE_NOABSOLUTEPATHS and _NO_OVERWRITE as a second
   line of defence, and without restoring owners, permissions, times, ACLs,
   xattrs or file flags: owner 0:0, no setuid/setgid/sticky, and writable
   modes until tree/normalize.h fixes the final ones.

   libarchive's write_disk resolves paths against the current directory, so
   sp_extract_begin() fchdir()s into the tree and sp_extract_end() returns.
   That is process-wide state: only the single-threaded sealed-probe-rootfs
   program (and tests) may use this module.  */
#ifndef SP_ROOTFS_EXTRACT_H
#define SP_ROOTFS_EXTRACT_H

#include <archive.h>
#include <stdint.h>

#include "base/error.h"

struct sp_extract;

/* Starts extracting into the directory rootfd (which stays owned by the
   caller).  */
int sp_extract_begin (int rootfd, struct sp_extract **out, sp_error_t *err);

/* Extracts every entry of in, a package's data tarball, to its end.  */
int sp_extract_archive (struct sp_extract *x, struct archive *in, sp_error_t *err);

/* Closes libarchive's writer (its deferred directory fixups run inside the
   tree), returns to the previous directory and frees x.  Safe with NULL.  */
int sp_extract_end (struct sp_extract *x, sp_error_t *err);

static inline void
sp_extract_endp (struct sp_extract **x)
{
  sp_error_t ignored = NULL;
  sp_extract_end (*x, &ignored);
  sp_error_release (&ignored);
  *x = NULL;
}
#define cleanup_extract __attribute__ ((cleanup (sp_extract_endp)))

#endif
