/* The seed's one pack, written from the clone's own packs: see
   docs/staging.md ("The object store: one pack of what is reachable").  */
#ifndef SP_SEED_PACK_WRITE_H
#define SP_SEED_PACK_WRITE_H

#include <git2.h>
#include <stddef.h>

#include "base/error.h"
#include "os/progress.h"

#include "seed/pack_item.h"

/* Writes one pack holding exactly the n objects whose ids items hold
   (distinct; the rest of each item is the writer's), with its
   index, into the directory dest_dirfd, reading the clone's store at
   gitfd/objects.  An object the clone packs is copied as the clone packed it
   (a delta too, when its base is one of the n and sits before it in the same
   pack); any other is read through odb and written whole.  The pack is then
   read back and every object in it hashed (pack_check.h): it is refused
   unless it holds exactly the n objects.  The output depends only on the ids
   and the clone's store.  */
int sp_pack_write (int gitfd, int dest_dirfd, git_odb *odb, struct sp_pack_item *items, size_t n,
                   struct sp_progress *progress, sp_error_t *err);

#endif
