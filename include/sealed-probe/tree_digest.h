/* A content digest of a directory tree, for the rootfs and, later, seeds.
   The walk is relative to directory fds, never follows a symlink, and visits
   entries in byte order of their names, so the digest depends only on names,
   types, modes, ownership, sizes, file bytes and link targets.  The exact
   encoding is in docs/rootfs.md.  */
#ifndef SEALED_PROBE_TREE_DIGEST_H
#define SEALED_PROBE_TREE_DIGEST_H

#include <sealed-probe/error.h>
#include <sealed-probe/sha256.h>

/* Digests the tree under dirfd (not dirfd's own name) into "sha256:<hex>".  */
int sp_tree_digest (int dirfd, char out[SP_DIGEST_TEXT_SIZE], sp_error_t *err);

#endif
