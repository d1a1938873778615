/* Extraction of a GitHub tarball (a gzip tar whose members all sit under one
   top-level directory) into an empty directory.  Private to src/seed; see
   docs/staging.md, "The GitHub tarball source".  */
#ifndef SP_SEED_TARBALL_H
#define SP_SEED_TARBALL_H

#include <stdint.h>

#include "base/error.h"

struct sp_progress;

struct sp_tarball_limits
{
  uint64_t max_entries;    /* members, directories and links included */
  uint64_t max_tree_bytes; /* bytes of regular-file data, all members together */
  /* Counts the bytes inflated by the integrity pass, then the members and
     bytes extracted (progress.h); NULL for none.  */
  struct sp_progress *progress;
};

/* Reads the gzip tar in tarfd (from offset 0; tarfd must be seekable) and
   extracts it, minus its single top-level directory, into dst_dirfd, which
   must be empty.
   - First the whole gzip stream is inflated once without writing anything: a
     truncated or corrupt stream is an error before any file exists.
   - Every member must lie under the first member's top-level component.
     Refused: absolute names, `.`, `..` and `.git` components, devices, FIFOs,
     sockets, anything written through a symlink or over an existing entry,
     hardlinks to anything but a regular file extracted before, a member
     larger than what remains of max_tree_bytes (refused before it is
     written), more than max_entries members.
   - Symlinks stay symlinks, whatever their target.  Directories get 0755,
     regular files 0755 when the archive gave any execute bit and 0644
     otherwise (no setuid, setgid or sticky bit), with owner 0:0 asked for and
     libarchive's SECURE_NODOTDOT, SECURE_SYMLINKS, SECURE_NOABSOLUTEPATHS and
     NO_OVERWRITE on top of these checks.
   libarchive's disk writer resolves names against the current directory, so
   this fchdir()s into dst_dirfd and back: the caller must be single-threaded
   for the duration (staging is).  On failure dst_dirfd may hold a partial
   tree: the caller discards it.  */
int sp_tarball_extract (int tarfd, int dst_dirfd, const struct sp_tarball_limits *limits, sp_error_t *err);

#endif
