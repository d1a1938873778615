/* Removal of a directory tree, for a failed build's temporary directory.  */
#ifndef SEALED_PROBE_TREE_REMOVE_H
#define SEALED_PROBE_TREE_REMOVE_H

#include <sealed-probe/error.h>

/* Removes parentfd/name and everything below it, never following a symlink.
   Read-only directories are made writable on the way down.  */
int sp_tree_remove_at (int parentfd, const char *name, sp_error_t *err);

#endif
