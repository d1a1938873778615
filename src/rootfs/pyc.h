/* The precompiled standard library (docs/rootfs.md, "The precompiled
   standard library"): every *.py file under SP_ROOTFS_STDLIB_DIR gets its
   __pycache__/NAME.cpython-311.pyc, written by the tree's own interpreter
   (so the magic number is the one the sandbox reads) in unchecked-hash mode,
   so that no pyc depends on a source mtime and two builds from one lock are
   byte-for-byte the same.  */
#ifndef SP_ROOTFS_PYC_H
#define SP_ROOTFS_PYC_H

#include "base/error.h"

/* The interpreter and the stdlib it compiles, as paths inside the tree; the
   prune rules (prune.c) name the same version.  */
#define SP_ROOTFS_PYTHON     "/usr/bin/python3.11"
#define SP_ROOTFS_STDLIB_DIR "/usr/lib/python3.11"

/* The pyc header's flags word (PEP 552), little-endian at offset 4: bit 0
   "hash-based", bit 1 "check the source".  Unchecked hash: 0b01.  */
#define SP_PYC_FLAGS_UNCHECKED_HASH 1u

/* Compiles the stdlib of the tree under rootfd, before normalization (which
   then gives the new __pycache__ directories and pyc files their owner, mode
   and mtime).  Runs SP_ROOTFS_PYTHON chrooted into the tree, without any
   capability, for at most SP_ROOTFS_COMPILE_TIMEOUT_MS; a module that does
   not compile, a missing interpreter or a tree grown past the rootfs bounds
   is an error that says which.  fchdir's into the tree only in the child.
   On success *compiled holds the number of modules compiled.  Needs root
   (chroot).  */
int sp_rootfs_compile_stdlib (int rootfd, unsigned *compiled, sp_error_t *err);

#endif
