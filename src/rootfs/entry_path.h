/* The path of an archive entry, checked and put in the one form the builder
   uses: relative, '/'-separated, no "./" prefix, no trailing '/', no empty,
   "." or ".." component.  Pure; no I/O.  */
#ifndef SP_ROOTFS_ENTRY_PATH_H
#define SP_ROOTFS_ENTRY_PATH_H

#include "base/error.h"

#include "base/bounds.h"

/* Cleans raw (a tar member name such as "./usr/bin/" or a hardlink target)
   into out, which has SP_TREE_PATH_MAX bytes.  The archive root ("." or
   "./") becomes "".  An absolute path, a ".." component, an empty or "."
   component inside the path, an overlong path or one of SP_TREE_MAX_DEPTH
   or more components is an error.  */
int sp_entry_path_clean (const char *raw, char out[SP_TREE_PATH_MAX], sp_error_t *err);

#endif
