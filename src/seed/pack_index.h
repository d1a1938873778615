/* Reading a git pack's index (version 2) and its entries' headers, for the
   pack writer (pack_write.c) that reuses a clone's entries.  Everything here
   is parsed from bytes of a hostile clone: every offset, count and length is
   checked before it is used.  Nothing here trusts an entry to be what the
   index says: the new pack is indexed by libgit2, which hashes every object
   it holds, and checked against the objects meant to be in it.  */
#ifndef SP_SEED_PACK_INDEX_H
#define SP_SEED_PACK_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#include "seed/pack_item.h"

#define SP_PACK_OID_SIZE     20 /* SHA-1: SHA-256 clones are refused before */
#define SP_PACK_HEADER_SIZE  12 /* "PACK", the version, the object count */
#define SP_PACK_TRAILER_SIZE SP_PACK_OID_SIZE

/* The entry types a pack holds (git's pack format).  */
enum sp_pack_type
{
  SP_PACK_COMMIT = 1,
  SP_PACK_TREE = 2,
  SP_PACK_BLOB = 3,
  SP_PACK_TAG = 4,
  SP_PACK_OFS_DELTA = 6,
  SP_PACK_REF_DELTA = 7,
};

struct sp_pack_index
{
  unsigned char *bytes; /* the whole `.idx`, owned */
  size_t len;
  uint32_t count;
  const unsigned char *oids;      /* count ids, strictly ascending */
  const unsigned char *offsets32; /* count big-endian words */
  const unsigned char *offsets64; /* n64 big-endian 64-bit offsets */
  uint32_t n64;
  uint64_t *sorted; /* every entry's offset, ascending: where each one ends */
  uint64_t pack_size;
};

/* Parses an index of bytes (taking ownership of them, freed by
   sp_pack_index_release even on failure) for a pack of pack_size bytes.
   Refused: anything but version 2, a bad fanout, ids not strictly
   ascending, an offset outside the pack's entries, two entries at one
   offset, a length that does not add up.  */
int sp_pack_index_parse (unsigned char *bytes, size_t len, uint64_t pack_size, struct sp_pack_index *idx,
                         sp_error_t *err);

void sp_pack_index_release (struct sp_pack_index *idx);

/* The position of id in the index, or false.  */
bool sp_pack_index_find (const struct sp_pack_index *idx, const unsigned char id[SP_PACK_OID_SIZE],
                         uint32_t *pos);

/* The entry offset at pos (checked when parsed).  */
uint64_t sp_pack_index_offset (const struct sp_pack_index *idx, uint32_t pos);

/* Where the entry at offset ends: the next entry's offset, or the trailer.
   False when no entry starts at offset.  */
bool sp_pack_index_entry_end (const struct sp_pack_index *idx, uint64_t offset, uint64_t *end);

/* An entry's header, parsed from the bytes at its offset.  */
struct sp_pack_entry
{
  enum sp_pack_type type;
  uint64_t size;                           /* the inflated size (of the delta, for a delta) */
  size_t size_len;                         /* bytes of the type and size */
  size_t header_len;                       /* and of the base that follows, for a delta */
  uint64_t base_dist;                      /* OFS_DELTA: the base is this far before the entry */
  unsigned char base_id[SP_PACK_OID_SIZE]; /* REF_DELTA */
};

/* The longest header: 10 bytes of size, 20 of a base id.  */
#define SP_PACK_ENTRY_HEADER_MAX 32

/* Parses the header at buf (len bytes available).  -1 when it is malformed,
   truncated, of an unknown type, or of a size of 2^60 or more (git's own
   limit).  */
int sp_pack_entry_parse (const unsigned char *buf, size_t len, struct sp_pack_entry *e);

/* Writes a type and size header; returns its length (at most 10 bytes).  */
size_t sp_pack_encode_header (enum sp_pack_type type, uint64_t size, unsigned char out[10]);

/* Writes an OFS_DELTA base distance (dist > 0); returns its length.  */
size_t sp_pack_encode_ofs (uint64_t dist, unsigned char out[10]);

/* Applies a delta (git's format: the base's size, the result's size, then
   copy and insert instructions) to base.  The result, malloc'd, goes to *out
   and *out_len.  -1 when the delta is malformed, names another base size,
   copies from outside the base, or builds more or less than it says, or a
   result over max_len.  */
int sp_pack_delta_apply (const unsigned char *base, size_t base_len, const unsigned char *delta, size_t len,
                         size_t max_len, unsigned char **out, size_t *out_len);

/* "commit", "tree", "blob" or "tag" for types 1 to 4, else NULL.  */
const char *sp_pack_type_name (unsigned type);

/* An object's id: the SHA-1 of "TYPE SIZE\0" and its bytes.  */
void sp_pack_object_id (unsigned type, const unsigned char *data, size_t len,
                        unsigned char id[SP_PACK_OID_SIZE]);

/* Writes to fd the version 2 index of the n items, as written at their
   new_offset with their crc, for the pack whose trailer is trailer.  */
int sp_pack_index_write (int fd, const struct sp_pack_item *items, size_t n,
                         const unsigned char trailer[SP_PACK_OID_SIZE], sp_error_t *err);

#endif
