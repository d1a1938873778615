/* A git pack's index and entry headers: see pack_index.h.  The format is
   git's (Documentation/gitformat-pack): a version 2 index is a magic and a
   version, 256 fanout counts, the sorted ids, a CRC each, a 31-bit offset
   each (or, with the top bit set, the position of a 64-bit offset in the
   table after them), then the pack's and its own checksums.  */
#include "seed/pack_index.h"

#include <errno.h>
#include <nettle/sha1.h>
#include <stdio.h>

#include "base/cleanup.h"
#include "os/fileio.h"

#include <stdlib.h>
#include <string.h>

#define IDX_MAGIC      "\377tOc"
#define IDX_HEAD_SIZE  8
#define IDX_FANOUT     (256 * 4)
#define IDX_TAIL_SIZE  (2 * SP_PACK_OID_SIZE)
#define IDX_LARGE_FLAG 0x80000000u

static uint32_t
be32 (const unsigned char *p)
{
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t
be64 (const unsigned char *p)
{
  return (uint64_t)be32 (p) << 32 | be32 (p + 4);
}

static int
compare_offsets (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

  return x < y ? -1 : x > y;
}

uint64_t
sp_pack_index_offset (const struct sp_pack_index *idx, uint32_t pos)
{
  uint32_t word = be32 (idx->offsets32 + (size_t)pos * 4);

  if (word & IDX_LARGE_FLAG)
    return be64 (idx->offsets64 + (size_t)(word & ~IDX_LARGE_FLAG) * 8);
  return word;
}

void
sp_pack_index_release (struct sp_pack_index *idx)
{
  free (idx->bytes);
  free (idx->sorted);
  memset (idx, 0, sizeof (*idx));
}

static int
parse_layout (struct sp_pack_index *idx, sp_error_t *err)
{
  const unsigned char *fanout = idx->bytes + IDX_HEAD_SIZE;
  uint64_t fixed;
  uint32_t previous = 0;

  if (idx->len < IDX_HEAD_SIZE + IDX_FANOUT + IDX_TAIL_SIZE || memcmp (idx->bytes, IDX_MAGIC, 4) != 0
      || be32 (idx->bytes + 4) != 2)
    return sp_make_error (err, 0, "not a version 2 pack index");
  for (unsigned i = 0; i < 256; i++)
    {
      uint32_t n = be32 (fanout + i * 4);

      if (n < previous)
        return sp_make_error (err, 0, "the index's fanout table goes down");
      previous = n;
    }
  idx->count = previous;
  fixed = IDX_HEAD_SIZE + IDX_FANOUT + (uint64_t)idx->count * (SP_PACK_OID_SIZE + 4 + 4) + IDX_TAIL_SIZE;
  if (fixed > idx->len || (idx->len - fixed) % 8 != 0 || (idx->len - fixed) / 8 > UINT32_MAX)
    return sp_make_error (err, 0, "the index's length does not match its %u objects", idx->count);
  idx->oids = fanout + IDX_FANOUT;
  idx->offsets32 = idx->oids + (size_t)idx->count * (SP_PACK_OID_SIZE + 4);
  idx->offsets64 = idx->offsets32 + (size_t)idx->count * 4;
  idx->n64 = (uint32_t)((idx->len - fixed) / 8);
  return 0;
}

/* The fanout counts ids by first byte, so ids ascending and the fanout agree
   only when every id sits in its first byte's range.  */
static int
check_ids (const struct sp_pack_index *idx, sp_error_t *err)
{
  const unsigned char *fanout = idx->bytes + IDX_HEAD_SIZE;

  for (uint32_t i = 0; i < idx->count; i++)
    {
      const unsigned char *id = idx->oids + (size_t)i * SP_PACK_OID_SIZE;
      uint32_t below = id[0] == 0 ? 0 : be32 (fanout + (id[0] - 1) * 4);

      if (i > 0 && memcmp (id - SP_PACK_OID_SIZE, id, SP_PACK_OID_SIZE) >= 0)
        return sp_make_error (err, 0, "the index's ids are not in ascending order");
      if (i < below || i >= be32 (fanout + id[0] * 4))
        return sp_make_error (err, 0, "the index's fanout table does not match its ids");
    }
  return 0;
}

static int
check_offsets (struct sp_pack_index *idx, sp_error_t *err)
{
  uint64_t end = idx->pack_size - SP_PACK_TRAILER_SIZE;

  idx->sorted = malloc ((idx->count ? idx->count : 1) * sizeof (*idx->sorted));
  if (idx->sorted == NULL)
    return sp_make_error (err, 0, "out of memory for the index's %u offsets", idx->count);
  for (uint32_t i = 0; i < idx->count; i++)
    {
      uint32_t word = be32 (idx->offsets32 + (size_t)i * 4);

      if ((word & IDX_LARGE_FLAG) && (word & ~IDX_LARGE_FLAG) >= idx->n64)
        return sp_make_error (err, 0, "the index names a 64-bit offset it does not have");
      idx->sorted[i] = sp_pack_index_offset (idx, i);
      if (idx->sorted[i] < SP_PACK_HEADER_SIZE || idx->sorted[i] >= end)
        return sp_make_error (err, 0, "the index places an object outside the pack");
    }
  qsort (idx->sorted, idx->count, sizeof (*idx->sorted), compare_offsets);
  for (uint32_t i = 1; i < idx->count; i++)
    if (idx->sorted[i] == idx->sorted[i - 1])
      return sp_make_error (err, 0, "the index places two objects at one offset");
  return 0;
}

int
sp_pack_index_parse (unsigned char *bytes, size_t len, uint64_t pack_size, struct sp_pack_index *idx,
                     sp_error_t *err)
{
  memset (idx, 0, sizeof (*idx));
  idx->bytes = bytes;
  idx->len = len;
  idx->pack_size = pack_size;
  if (pack_size < SP_PACK_HEADER_SIZE + SP_PACK_TRAILER_SIZE)
    return sp_make_error (err, 0, "the pack is too short to be one");
  if (parse_layout (idx, err) < 0 || check_ids (idx, err) < 0 || check_offsets (idx, err) < 0)
    return -1;
  return 0;
}

bool
sp_pack_index_find (const struct sp_pack_index *idx, const unsigned char id[SP_PACK_OID_SIZE], uint32_t *pos)
{
  const unsigned char *fanout = idx->bytes + IDX_HEAD_SIZE;
  uint32_t lo = id[0] == 0 ? 0 : be32 (fanout + (id[0] - 1) * 4);
  uint32_t hi = be32 (fanout + id[0] * 4);

  while (lo < hi)
    {
      uint32_t mid = lo + (hi - lo) / 2;
      int c = memcmp (idx->oids + (size_t)mid * SP_PACK_OID_SIZE, id, SP_PACK_OID_SIZE);

      if (c == 0)
        {
          *pos = mid;
          return true;
        }
      if (c < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return false;
}

bool
sp_pack_index_entry_end (const struct sp_pack_index *idx, uint64_t offset, uint64_t *end)
{
  uint32_t lo = 0, hi = idx->count;

  while (lo < hi)
    {
      uint32_t mid = lo + (hi - lo) / 2;

      if (idx->sorted[mid] == offset)
        {
          *end = mid + 1 < idx->count ? idx->sorted[mid + 1] : idx->pack_size - SP_PACK_TRAILER_SIZE;
          return true;
        }
      if (idx->sorted[mid] < offset)
        lo = mid + 1;
      else
        hi = mid;
    }
  return false;
}

int
sp_pack_entry_parse (const unsigned char *buf, size_t len, struct sp_pack_entry *e)
{
  size_t used = 0;
  unsigned shift = 4;
  unsigned char c;

  memset (e, 0, sizeof (*e));
  if (len == 0)
    return -1;
  c = buf[used++];
  e->type = (enum sp_pack_type) ((c >> 4) & 7);
  e->size = c & 15;
  while (c & 0x80)
    {
      if (used >= len || shift > 57)
        return -1;
      c = buf[used++];
      e->size |= (uint64_t)(c & 0x7f) << shift;
      shift += 7;
    }
  e->size_len = used;
  switch (e->type)
    {
    case SP_PACK_COMMIT:
    case SP_PACK_TREE:
    case SP_PACK_BLOB:
    case SP_PACK_TAG:
      break;
    case SP_PACK_OFS_DELTA:
      if (used >= len)
        return -1;
      c = buf[used++];
      e->base_dist = c & 0x7f;
      while (c & 0x80)
        {
          if (used >= len || e->base_dist > (UINT64_MAX >> 7) - 1)
            return -1;
          c = buf[used++];
          e->base_dist = ((e->base_dist + 1) << 7) | (c & 0x7f);
        }
      if (e->base_dist == 0)
        return -1;
      break;
    case SP_PACK_REF_DELTA:
      if (len - used < SP_PACK_OID_SIZE)
        return -1;
      memcpy (e->base_id, buf + used, SP_PACK_OID_SIZE);
      used += SP_PACK_OID_SIZE;
      break;
    default:
      return -1;
    }
  e->header_len = used;
  return 0;
}

size_t
sp_pack_encode_header (enum sp_pack_type type, uint64_t size, unsigned char out[10])
{
  size_t n = 0;
  unsigned char c = (unsigned char)(((unsigned)type << 4) | (size & 15));

  size >>= 4;
  while (size)
    {
      out[n++] = c | 0x80;
      c = size & 0x7f;
      size >>= 7;
    }
  out[n++] = c;
  return n;
}

size_t
sp_pack_encode_ofs (uint64_t dist, unsigned char out[10])
{
  unsigned char tmp[10];
  size_t pos = sizeof (tmp) - 1;

  tmp[pos] = dist & 0x7f;
  while (dist >>= 7)
    tmp[--pos] = 0x80 | (--dist & 0x7f);
  memcpy (out, tmp + pos, sizeof (tmp) - pos);
  return sizeof (tmp) - pos;
}

static int
delta_size (const unsigned char *d, size_t len, size_t *at, uint64_t *size)
{
  unsigned shift = 0;
  unsigned char c;

  *size = 0;
  do
    {
      if (*at >= len || shift > 63)
        return -1;
      c = d[(*at)++];
      /* The tenth byte holds bit 63 alone: more would be dropped, not read.  */
      if (shift == 63 && (c & 0x7f) > 1)
        return -1;
      *size |= (uint64_t)(c & 0x7f) << shift;
      shift += 7;
    }
  while (c & 0x80);
  return 0;
}

int
sp_pack_delta_apply (const unsigned char *base, size_t base_len, const unsigned char *delta, size_t len,
                     size_t max_len, unsigned char **out, size_t *out_len)
{
  uint64_t src_size, dst_size;
  size_t at = 0, pos = 0;
  unsigned char *dst;

  *out = NULL;
  if (delta_size (delta, len, &at, &src_size) < 0 || src_size != base_len
      || delta_size (delta, len, &at, &dst_size) < 0 || dst_size > max_len)
    return -1;
  dst = malloc (dst_size ? (size_t)dst_size : 1);
  if (dst == NULL)
    return -1;
  while (at < len)
    {
      unsigned char cmd = delta[at++];

      if (cmd & 0x80)
        {
          uint64_t offset = 0, size = 0;

          for (unsigned i = 0; i < 4; i++)
            if (cmd & (1u << i))
              {
                if (at >= len)
                  goto bad;
                offset |= (uint64_t)delta[at++] << (8 * i);
              }
          for (unsigned i = 0; i < 3; i++)
            if (cmd & (0x10u << i))
              {
                if (at >= len)
                  goto bad;
                size |= (uint64_t)delta[at++] << (8 * i);
              }
          if (size == 0)
            size = 0x10000;
          if (offset > base_len || size > base_len - offset || size > dst_size - pos)
            goto bad;
          memcpy (dst + pos, base + offset, (size_t)size);
          pos += (size_t)size;
        }
      else if (cmd != 0)
        {
          if (cmd > len - at || cmd > dst_size - pos)
            goto bad;
          memcpy (dst + pos, delta + at, cmd);
          at += cmd;
          pos += cmd;
        }
      else
        goto bad; /* reserved */
    }
  if (pos != dst_size)
    goto bad;
  *out = dst;
  *out_len = pos;
  return 0;
bad:
  free (dst);
  return -1;
}

const char *
sp_pack_type_name (unsigned type)
{
  static const char *const names[] = {
    [SP_PACK_COMMIT] = "commit", [SP_PACK_TREE] = "tree", [SP_PACK_BLOB] = "blob", [SP_PACK_TAG] = "tag"
  };

  return type >= SP_PACK_COMMIT && type <= SP_PACK_TAG ? names[type] : NULL;
}

/* An object's id: the SHA-1 of "TYPE SIZE\0" and its bytes.  */
void
sp_pack_object_id (unsigned type, const unsigned char *data, size_t len, unsigned char id[SP_PACK_OID_SIZE])
{
  struct sha1_ctx ctx;
  char head[64];
  int n = snprintf (head, sizeof (head), "%s %zu", sp_pack_type_name (type), len);

  sha1_init (&ctx);
  sha1_update (&ctx, (size_t)n + 1, (const uint8_t *)head);
  sha1_update (&ctx, len, data);
  sha1_digest (&ctx, SP_PACK_OID_SIZE, id);
}

/* ---- the index: git's version 2 ---- */

static const struct sp_pack_item *sort_items; /* qsort has no context argument */

static int
compare_by_id (const void *a, const void *b)
{
  return git_oid_cmp (&sort_items[*(const uint32_t *)a].id, &sort_items[*(const uint32_t *)b].id);
}

static void
put32 (unsigned char *p, uint32_t v)
{
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* The index goes out through a small buffer, hashed as it goes: built
   whole, it was 28 bytes an object on top of the pack's plan.  */
struct index_out
{
  int fd;
  struct sha1_ctx sha1;
  unsigned char buf[64 * 1024];
  size_t used;
};

static int
index_flush (struct index_out *o, sp_error_t *err)
{
  sha1_update (&o->sha1, o->used, o->buf);
  if (sp_write_all (o->fd, o->buf, o->used, err) < 0)
    return sp_error_wrap (err, "write the pack's index");
  o->used = 0;
  return 0;
}

static int
index_put (struct index_out *o, const void *data, size_t len, sp_error_t *err)
{
  if (o->used + len > sizeof (o->buf) && index_flush (o, err) < 0)
    return -1;
  memcpy (o->buf + o->used, data, len);
  o->used += len;
  return 0;
}

static int
index_put32 (struct index_out *o, uint32_t v, sp_error_t *err)
{
  unsigned char b[4];

  put32 (b, v);
  return index_put (o, b, sizeof (b), err);
}

int
sp_pack_index_write (int fd, const struct sp_pack_item *items, size_t n,
                     const unsigned char trailer[SP_PACK_OID_SIZE], sp_error_t *err)
{
  cleanup_free uint32_t *order = malloc ((n ? n : 1) * sizeof (*order));
  cleanup_free struct index_out *o = malloc (sizeof (*o));
  unsigned char checksum[SP_PACK_OID_SIZE];
  uint32_t fanout[256] = { 0 };
  uint32_t large = 0;

  if (order == NULL || o == NULL)
    return sp_make_error (err, ENOMEM, "write the pack's index");
  o->fd = fd;
  o->used = 0;
  sha1_init (&o->sha1);
  for (size_t i = 0; i < n; i++)
    {
      order[i] = (uint32_t)i;
      fanout[items[i].id.id[0]]++;
    }
  sort_items = items;
  qsort (order, n, sizeof (*order), compare_by_id);
  if (index_put (o, "\377tOc\0\0\0\2", 8, err) < 0)
    return -1;
  for (unsigned b = 0, total = 0; b < 256; b++)
    {
      total += fanout[b];
      if (index_put32 (o, total, err) < 0)
        return -1;
    }
  for (size_t i = 0; i < n; i++)
    if (index_put (o, items[order[i]].id.id, SP_PACK_OID_SIZE, err) < 0)
      return -1;
  for (size_t i = 0; i < n; i++)
    if (index_put32 (o, items[order[i]].crc, err) < 0)
      return -1;
  for (size_t i = 0; i < n; i++)
    {
      uint64_t off = items[order[i]].new_offset;

      if (index_put32 (o, off < 0x80000000u ? (uint32_t)off : 0x80000000u | large++, err) < 0)
        return -1;
    }
  /* The 64-bit offsets, in the order their slots were handed out.  */
  for (size_t i = 0; i < n; i++)
    {
      uint64_t off = items[order[i]].new_offset;

      if (off >= 0x80000000u
          && (index_put32 (o, (uint32_t)(off >> 32), err) < 0 || index_put32 (o, (uint32_t)off, err) < 0))
        return -1;
    }
  if (index_put (o, trailer, SP_PACK_OID_SIZE, err) < 0 || index_flush (o, err) < 0)
    return -1;
  sha1_digest (&o->sha1, SP_PACK_OID_SIZE, checksum);
  if (sp_write_all (fd, checksum, sizeof (checksum), err) < 0)
    return sp_error_wrap (err, "write the pack's index");
  return 0;
}
