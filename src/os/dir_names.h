/* The names in one directory but "." and "..", sorted in byte order (strcmp),
   so that a walk over a tree, and the first failure it meets, are the same on
   every run; and the '/'-joined path of a child such a walk keeps.  The
   rootfs walk, the safe tree copy and the git sanitizer share them.  */
#ifndef SP_OS_DIR_NAMES_H
#define SP_OS_DIR_NAMES_H

#include <stddef.h>
#include <sys/types.h>

#include "base/error.h"

struct sp_dir_names
{
  char **v; /* len names, each NUL-terminated, in byte order */
  size_t len;
  size_t cap;
};

/* Lists dirfd into out, which must start empty ({ 0 }).  dirfd may be O_PATH;
   it stays open, and its offset is not moved: the listing reads a fresh open
   of ".".  Messages name no path: a caller wraps them with the directory's
   path, quoted as it quotes paths ("list `x`: read: ...").  On failure out may
   hold part of the listing; release it as always.  */
int sp_dir_names_read (int dirfd, struct sp_dir_names *out, sp_error_t *err);

/* Frees the names and leaves names empty.  */
void sp_dir_names_release (struct sp_dir_names *names);
#define cleanup_dir_names __attribute__ ((cleanup (sp_dir_names_release)))

/* path (size bytes) holds a directory's path below the walk's top, path_len
   bytes long ("" for the top itself).  Writes the path of its child name
   there: "name" below the top, "path/name" further down.  Returns the child
   path's length, or -1, leaving path as it was, when it would not fit in size
   bytes with its NUL.  Cutting path at path_len again gives back the
   parent.  */
ssize_t sp_dir_child_path (char *path, size_t size, size_t path_len, const char *name);

#endif
