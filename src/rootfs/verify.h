/* A built probe root filesystem (docs/rootfs.md): a directory DIR holding
   DIR/root, the read-only tree every bundle points at, and DIR/digest, the
   content digest the builder recorded ("sha256:<hex>\n").  */
#ifndef SP_ROOTFS_VERIFY_H
#define SP_ROOTFS_VERIFY_H

#include "base/error.h"
#include "base/sha256.h"

struct sp_rootfs_info
{
  char *root_path;                  /* absolute, canonical path of DIR/root */
  char digest[SP_DIGEST_TEXT_SIZE]; /* the verified content digest */
};

/* The preflight check: recomputes the digest of DIR/root and compares it with
   DIR/digest, and checks that the tree is read-only (owned by root, no write
   bits, no setuid/setgid) and holds the mount points a bundle needs.  Any
   mismatch is an error naming what differs.  */
int sp_rootfs_verify (const char *dir, struct sp_rootfs_info *info, sp_error_t *err);

void sp_rootfs_info_release (struct sp_rootfs_info *info);

#endif
