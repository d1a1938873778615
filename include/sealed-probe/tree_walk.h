/* A walk of a directory tree relative to directory fds, the one traversal the
   digest, normalization, removal and verification share.  It never follows a
   symlink, visits siblings in byte order of their names, and stops at
   SP_TREE_MAX_DEPTH levels.  */
#ifndef SEALED_PROBE_TREE_WALK_H
#define SEALED_PROBE_TREE_WALK_H

#include <sys/stat.h>

#include <sealed-probe/error.h>

enum sp_tree_walk_event
{
  SP_TREE_WALK_ENTRY,    /* any entry; for a directory, before its children */
  SP_TREE_WALK_DIR_DONE, /* a directory, after its children */
};

/* dirfd is the entry's parent directory, name its name there and path its
   '/'-joined path below the root.  st is its lstat; on SP_TREE_WALK_ENTRY a
   callback may change the entry's metadata (the walk re-reads it) but must not
   remove a directory.  A negative return stops the walk.  */
typedef int (*sp_tree_walk_fn) (int dirfd, const char *name, const char *path, const struct stat *st,
                                enum sp_tree_walk_event event, void *ctx, sp_error_t *err);

/* Walks the tree below rootfd (rootfd itself is not visited).  */
int sp_tree_walk (int rootfd, sp_tree_walk_fn fn, void *ctx, sp_error_t *err);

#endif
