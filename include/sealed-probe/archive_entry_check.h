/* Which archive members an extractor writes at all: regular files,
   directories, symlinks and hardlinks, never a device, a FIFO or a socket.
   The rootfs and the GitHub tarball extractors share it.  */
#ifndef SEALED_PROBE_ARCHIVE_ENTRY_CHECK_H
#define SEALED_PROBE_ARCHIVE_ENTRY_CHECK_H

struct archive_entry;

/* NULL when entry is a regular file, a directory, a symlink or a hardlink
   (whatever file type a hardlink carries).  Otherwise what it is, for the
   caller's message: "a device node", "a FIFO", "a socket" or "an unknown
   file type".  */
const char *sp_archive_entry_refused_type (struct archive_entry *entry);

#endif
