/* What the rootfs leaves out, and what it must never hold (docs/rootfs.md,
   "Prune rules").  Both are tables in prune.c.  Pure; no I/O.  Paths are
   clean entry paths (entry_path.h): "usr/bin/python3.11".  */
#ifndef SP_ROOTFS_PRUNE_H
#define SP_ROOTFS_PRUNE_H

#include <stdbool.h>

/* True when the entry at path is not extracted at all.  The first rule of the
   table that matches decides; no rule matching means keep.  */
bool sp_prune_skip (const char *path);

/* When a kept entry's name is one the rootfs must never hold (a shell, pip, a
   compiler, a package manager), returns why; otherwise NULL.  The builder
   refuses such a tree rather than shipping it.  */
const char *sp_prune_forbidden (const char *path);

#endif
