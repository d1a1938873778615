/* A content digest of a directory tree, for the rootfs and, later, seeds.
   The walk is relative to directory fds, never follows a symlink, and visits
   entries in byte order of their names, so the digest depends only on names,
   types, modes, ownership, sizes, file bytes and link targets.  The exact
   encoding is in docs/rootfs.md.  */
#ifndef SP_TREE_DIGEST_H
#define SP_TREE_DIGEST_H

#include "base/error.h"
#include "base/sha256.h"
#include "tree/walk.h"

/* Digests the tree under dirfd (not dirfd's own name) into "sha256:<hex>".  */
int sp_tree_digest (int dirfd, char out[SP_DIGEST_TEXT_SIZE], sp_error_t *err);
/* The same, calling tick once per entry with the file bytes it read
   (tree/walk.h), which may stop it.  */
int sp_tree_digest_counted (int dirfd, char out[SP_DIGEST_TEXT_SIZE], sp_tree_tick_fn tick, void *tick_ctx,
                            sp_error_t *err);

#endif
