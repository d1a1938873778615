/* Checking the seed's new pack before it is used: every object in it is
   inflated and hashed, deltas resolved from their bases, and each must be
   exactly the object its item names.  Entries must end where the next
   begins, and hold the size their headers give.  See docs/staging.md.  */
#ifndef SP_SEED_PACK_CHECK_H
#define SP_SEED_PACK_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "os/progress.h"

#include "seed/pack_item.h"

/* fd holds the new pack, its entries at items[i].new_offset in order, the
   trailer at pack_end.  Up to SP_GIT_CHECK_THREADS_MAX threads, one per CPU;
   progress is drawn by the calling thread, and an interrupt stops them all.  */
int sp_pack_check (int fd, const struct sp_pack_item *items, size_t n, uint64_t pack_end,
                   struct sp_progress *progress, sp_error_t *err);

#endif
