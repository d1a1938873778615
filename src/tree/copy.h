/* A safe recursive copy of an untrusted directory tree, relative to directory
   fds: staging copies an operator's clone into a seed with it, and the proxy
   copies a seed into an invocation with it.  See docs/staging.md.  */
#ifndef SP_TREE_COPY_H
#define SP_TREE_COPY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

struct sp_progress;

struct sp_copy_options
{
  uint64_t max_bytes;   /* file bytes in all */
  uint64_t max_entries; /* entries in all */
  unsigned max_depth;   /* directory levels below the top */
  /* Also gives the owner write permission on every copied file and
     directory, so that a probe's snapshot of a read-only seed is an ordinary
     writable checkout.  Off, permission bits are kept exactly.  */
  bool owner_writable;
  /* Directories keep their sticky bit: serve's private copy of the rootfs
     must digest as the original, whose /tmp mount point is 1777.  */
  bool keep_sticky;
  /* Counts every file and symlink copied, and the bytes, for staging's
     progress line (progress.h); NULL for none.  The git tree writer
     (git_stage.h), which takes these options too, counts into it.  The
     copy, the tree writer and the pack builder stop, failing with
     "interrupted by SIG...", once it says a signal asked them to
     (sp_progress_check).  */
  struct sp_progress *progress;
  /* A name the copy leaves out at the top of the tree (NULL: none): it is
     neither opened, looked at nor counted, so nothing under it is read.
     The clone's `.git` is copied without `modules`, the repositories of its
     submodules (git_stage.h).  */
  const char *skip_top;
};

/* Copies the tree under src_dirfd into the empty directory dst_dirfd:
   - never follows a symlink: a link is recreated as a link with the same
     target, whatever it points at;
   - never hardlinks: every regular file is a new file.  A source file whose
     link count exceeds the number of its names inside the source tree is
     refused, because its other names lie outside it (the error's status
     is EMLINK, with no strerror in its message);
   - refuses devices, FIFOs and sockets, and entries on another device than
     src_dirfd (a mount point inside the tree);
   - keeps permission bits but strips setuid, setgid and (unless keep_sticky)
     sticky, and gives
     every entry to uid:gid; modification times are not kept;
   - fails, naming the limit, past any limit (max_depth may be at most
     SP_COPY_DEPTH_CEILING).
   The top directory dst_dirfd itself keeps the mode and owner its caller
   gave it.  Errors name the offending path relative to the top, quoted
   safely (printable ASCII only, capped).  On failure dst_dirfd may hold a
   partial copy; the caller removes it.  */
int sp_tree_copy (int src_dirfd, int dst_dirfd, const struct sp_copy_options *limits, uid_t uid, gid_t gid,
                  sp_error_t *err);

#endif
