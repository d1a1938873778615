/* A walk of a directory tree relative to directory fds, the one traversal the
   digest, normalization and verification share, for seeds and the rootfs
   alike.  It never follows a symlink, visits siblings in byte order of their
   names, and fails at a path of SP_TREE_PATH_MAX bytes or more or at more
   than SP_TREE_MAX_DEPTH levels.  Its messages show paths through
   sp_quote_name (quote.h); a callback's must too.  */
#ifndef SP_TREE_WALK_H
#define SP_TREE_WALK_H

#include <stdint.h>
#include <sys/stat.h>

#include "base/error.h"

enum sp_tree_walk_event
{
  SP_TREE_WALK_ENTRY,    /* any entry; for a directory, before its children */
  SP_TREE_WALK_DIR_DONE, /* a directory, after its children */
};

/* dirfd is the entry's parent directory, name its name there and path its
   '/'-joined path below the root (raw: quote it in a message).  st is its lstat; on SP_TREE_WALK_ENTRY a
   callback may change the entry's metadata (the walk re-reads it) but must not
   remove a directory.  A negative return stops the walk.  */
typedef int (*sp_tree_walk_fn) (int dirfd, const char *name, const char *path, const struct stat *st,
                                enum sp_tree_walk_event event, void *ctx, sp_error_t *err);

/* A long walk's meter (normalization, digests): called once per entry with
   the bytes it weighed, so that a caller can show progress and stop the
   walk (a negative return, *err set).  NULL: none.  */
typedef int (*sp_tree_tick_fn) (void *ctx, uint64_t bytes, sp_error_t *err);

/* Walks the tree below rootfd (rootfd itself is not visited).  */
int sp_tree_walk (int rootfd, sp_tree_walk_fn fn, void *ctx, sp_error_t *err);

#endif
