/* Removal of a directory tree: a failed stage's run, unstage's runs, a
   failed rootfs build, a dry run's bundle, the git sanitizer's pruning.  */
#ifndef SP_TREE_REMOVE_H
#define SP_TREE_REMOVE_H

#include <stdint.h>

#include "base/error.h"

/* Removes parentfd/name and everything below it, never following a symlink
   and never entering a mount (a mount point is left, and reported).  It
   works by fds, one directory open at a time, so no path length or depth
   limits it; directories are made writable on the way down.  It keeps going
   past an entry it cannot remove, removes everything else, and then fails
   with the first such entry, quoted (sp_quote_name), and how many more
   stayed: a second call, once the obstacle is gone, finishes the job.  An
   absent parentfd/name is not an error.  */
int sp_tree_remove_at (int parentfd, const char *name, sp_error_t *err);

/* sp_tree_remove_at, calling count (ctx, its size) for each file (anything
   but a directory; a symlink's size is 0) once it is gone, so that a caller
   can show a long removal's progress.  The removal itself never stops
   early: whatever asked for it wants all of it gone.  */
int sp_tree_remove_counted (int parentfd, const char *name, void (*count) (void *ctx, uint64_t bytes),
                            void *ctx, sp_error_t *err);

#endif
