/* The rootfs build (docs/rootfs.md): the lock's packages, read from a
   directory of fetched .debs, extracted and pruned, given the bundle
   skeleton and a compiled stdlib (pyc.h), normalized and digested, into a new
   directory DIR holding DIR/root (the tree) and DIR/digest
   ("sha256:<hex>\n").  */
#ifndef SP_ROOTFS_BUILD_H
#define SP_ROOTFS_BUILD_H

#include "base/error.h"
#include "base/sha256.h"

/* The layout of DIR, shared with rootfs/verify.c.  */
#define SP_ROOTFS_ROOT_DIR    "root"
#define SP_ROOTFS_DIGEST_FILE "digest"

/* sp_rootfs_build's flags.  NO_PYC leaves the stdlib uncompiled (pyc.h):
   for trees without a real interpreter (the synthetic packages of the tests)
   and for measuring what the pycs save.  */
#define SP_ROOTFS_BUILD_NO_PYC (1u << 0)

/* Builds out_dir, which must not exist, in a sibling temporary directory that
   is renamed into place only once complete; any failure removes it again, so
   a failed build leaves nothing behind.  Extraction changes the process's
   current directory for its duration (extract.h), and compiling the stdlib
   forks a child (pyc.h).  Needs root.  On success digest holds the recorded
   digest.  */
int sp_rootfs_build (const char *lock_path, const char *debs_dir, const char *out_dir, unsigned flags,
                     char digest[SP_DIGEST_TEXT_SIZE], sp_error_t *err);

#endif
