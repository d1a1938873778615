/* The seed's pack, object by object: what pack_write.c plans and writes,
   pack_check.c checks and pack_index.c indexes.  */
#ifndef SP_SEED_PACK_ITEM_H
#define SP_SEED_PACK_ITEM_H

#include <git2.h>
#include <stdint.h>

#define NO_SOURCE UINT32_MAX
#define NO_ITEM   UINT32_MAX

enum item_kind
{
  ITEM_RAW,       /* the entry as the clone packed it, a REF_DELTA too */
  ITEM_OFS_DELTA, /* as packed, with the distance to its base rewritten */
  ITEM_WHOLE,     /* read and deflated */
};

struct sp_pack_item
{
  git_oid id;
  uint32_t source; /* NO_SOURCE: loose */
  uint32_t base;   /* a delta's base item, or NO_ITEM */
  uint32_t crc;    /* of the entry in the new pack, for its index */
  uint64_t offset; /* in the source pack */
  uint64_t end;
  uint64_t new_offset;
  uint8_t kind;
  uint8_t size_len; /* the type and size bytes of the source entry */
  uint8_t header_len;
  uint8_t new_type; /* the entry's type in the new pack */
  uint8_t new_header_len;
};

#endif
