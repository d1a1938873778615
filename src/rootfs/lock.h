/* rootfs.lock: the pinned packages of the rootfs (docs/rootfs.md).  One line
   per package, "NAME VERSION ARCH SHA256", after a fixed header line; lines
   starting with '#' are comments.  The parser is pure and strict: every field
   is validated, and an error names the line and the field.  */
#ifndef SP_ROOTFS_LOCK_H
#define SP_ROOTFS_LOCK_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/sha256.h"

#include "base/bounds.h"

#define SP_LOCK_HEADER "# sealed-probe-rootfs-lock 1"

struct sp_lock_entry
{
  char name[SP_LOCK_NAME_MAX + 1];
  char version[SP_LOCK_VERSION_MAX + 1];
  char arch[SP_LOCK_ARCH_MAX + 1];
  uint8_t sha256[SP_SHA256_BYTES];
  unsigned line; /* 1-based, for messages */
};

struct sp_lock
{
  size_t count;
  struct sp_lock_entry *entries;
};

/* Parses text[0..len).  On success *out holds at least one entry, in file
   order, with no name twice.  */
int sp_lock_parse (const char *text, size_t len, struct sp_lock *out, sp_error_t *err);

/* Reads (at most SP_LOCK_MAX_BYTES) and parses the lock file at path.  */
int sp_lock_load (const char *path, struct sp_lock *out, sp_error_t *err);

void sp_lock_release (struct sp_lock *lock);

/* The file name `apt-get download` gives the entry's .deb:
   NAME_VERSION_ARCH.deb with every ':' of VERSION written as "%3a".  */
#define SP_LOCK_DEB_NAME_SIZE (SP_LOCK_NAME_MAX + 3 * SP_LOCK_VERSION_MAX + SP_LOCK_ARCH_MAX + 8)
void sp_lock_deb_filename (const struct sp_lock_entry *entry, char out[SP_LOCK_DEB_NAME_SIZE]);

#endif
