/* libFuzzer harness for the pack helpers of pack_index.h, which read a
   hostile clone's pack.  The first byte picks the parser (its value modulo
   3); each part below goes in as an exactly-sized heap copy.
   0. an index: 8 bytes of pack size (big-endian), then the `.idx` bytes for
      sp_pack_index_parse.  A parsed index finds every id it holds at its
      own position, at an offset inside the pack's entries whose entry_end
      lies past it, ends at the trailer or where another entry starts, and
      adds up; sp_pack_index_write, given its entries, writes the same
      header, fanout, ids and CRCs and an index that parses to the same
      offsets.
   1. an entry's header for sp_pack_entry_parse: accepted exactly when the
      rules written out again below accept it, with the same fields;
      header_len <= len; the size re-encodes to the bytes read when they are
      canonical (shorter when not), and the OFS_DELTA distance, whose
      encoding has one form, re-encodes to the bytes read.
   2. a delta: 3 bytes of base length (big-endian, cut to what follows),
      then the base, then the delta for sp_pack_delta_apply, whose result
      is the one git's patch_delta rules, written out again below, give, and
      within max_len.
   Every failure of the index parser sets a one-line printable message.  */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"

#include "fuzz.h"
#include "seed/pack_index.h"

/* Enough for an index of some two thousand entries and any header.  */
#define INPUT_MAX_BYTES (64 * 1024)
/* The largest delta result tried: the allocation a delta may ask for.  */
#define DELTA_RESULT_MAX (1024 * 1024)

#define IDX_FANOUT_AT 8
#define IDX_IDS_AT    (IDX_FANOUT_AT + 256 * 4)

static uint32_t
get32 (const unsigned char *p)
{
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t
get64 (const unsigned char *p)
{
  return (uint64_t)get32 (p) << 32 | get32 (p + 4);
}

/* ---- 0: the index ---- */

/* What sp_pack_index_write writes for items, as an exactly-sized copy.  */
static unsigned char *
write_index (const struct sp_pack_item *items, size_t n, const unsigned char *trailer, size_t *len)
{
  cleanup_close int fd = memfd_create ("fuzz-idx", MFD_CLOEXEC);
  sp_error_t err = NULL;
  unsigned char *bytes;
  struct stat st;

  FUZZ_REQUIRE (fd >= 0);
  FUZZ_REQUIRE (sp_pack_index_write (fd, items, n, trailer, &err) == 0 && err == NULL);
  FUZZ_REQUIRE (fstat (fd, &st) == 0);
  *len = (size_t)st.st_size;
  bytes = malloc (*len);
  FUZZ_REQUIRE (bytes != NULL);
  FUZZ_REQUIRE (pread (fd, bytes, *len, 0) == (ssize_t)*len);
  return bytes;
}

/* The index parsed from buf: every id found where it sits, every offset
   inside the pack with an end past it that is the trailer or the next
   entry.  */
static void
check_index (const struct sp_pack_index *idx, const unsigned char *buf, size_t len, uint64_t pack_size)
{
  const uint64_t entries_end = pack_size - SP_PACK_TRAILER_SIZE;
  uint64_t end, next_end, first = 0;
  uint32_t pos;

  FUZZ_REQUIRE (pack_size >= SP_PACK_HEADER_SIZE + SP_PACK_TRAILER_SIZE);
  FUZZ_REQUIRE (memcmp (buf, "\377tOc\0\0\0\2", 8) == 0);
  FUZZ_REQUIRE (idx->count == get32 (buf + IDX_FANOUT_AT + 255 * 4));
  FUZZ_REQUIRE (len == IDX_IDS_AT + (size_t)idx->count * 28 + (size_t)idx->n64 * 8 + 2 * SP_PACK_OID_SIZE);
  FUZZ_REQUIRE (idx->oids == idx->bytes + IDX_IDS_AT);
  for (uint32_t i = 0; i < idx->count; i++)
    {
      const unsigned char *id = idx->oids + (size_t)i * SP_PACK_OID_SIZE;
      uint64_t offset = sp_pack_index_offset (idx, i);
      unsigned char probe[SP_PACK_OID_SIZE];

      FUZZ_REQUIRE (i == 0 || memcmp (id - SP_PACK_OID_SIZE, id, SP_PACK_OID_SIZE) < 0);
      FUZZ_REQUIRE (sp_pack_index_find (idx, id, &pos) && pos == i);
      /* An id next to it is found only where it is held.  */
      memcpy (probe, id, SP_PACK_OID_SIZE);
      probe[SP_PACK_OID_SIZE - 1] ^= 1;
      if (sp_pack_index_find (idx, probe, &pos))
        FUZZ_REQUIRE (pos < idx->count
                      && memcmp (idx->oids + (size_t)pos * SP_PACK_OID_SIZE, probe, SP_PACK_OID_SIZE) == 0);
      FUZZ_REQUIRE (offset >= SP_PACK_HEADER_SIZE && offset < entries_end);
      FUZZ_REQUIRE (sp_pack_index_entry_end (idx, offset, &end));
      FUZZ_REQUIRE (end > offset && end <= entries_end);
      FUZZ_REQUIRE (end == entries_end || sp_pack_index_entry_end (idx, end, &next_end));
      FUZZ_REQUIRE (offset + 1 == end || !sp_pack_index_entry_end (idx, offset + 1, &next_end));
      if (i == 0 || offset < first)
        first = offset;
    }
  FUZZ_REQUIRE (!sp_pack_index_entry_end (idx, entries_end, &end));
  FUZZ_REQUIRE (!sp_pack_index_entry_end (idx, SP_PACK_HEADER_SIZE - 1, &end));
  /* From the first entry, one end after another reaches the trailer after
     every entry, once each.  */
  for (uint32_t walked = 0; walked < idx->count; walked++)
    {
      FUZZ_REQUIRE (sp_pack_index_entry_end (idx, first, &end));
      FUZZ_REQUIRE ((end == entries_end) == (walked + 1 == idx->count));
      first = end;
    }
}

/* The index written for the parsed entries has the same header, fanout,
   ids and CRCs, the pack's checksum it was given, and parses to the same
   offsets; with no 64-bit table, it is the same up to its own checksum.  */
static void
check_rewrite (const struct sp_pack_index *idx, const unsigned char *buf, size_t len, uint64_t pack_size)
{
  const size_t offsets_at = IDX_IDS_AT + (size_t)idx->count * (SP_PACK_OID_SIZE + 4);
  cleanup_free struct sp_pack_item *items = calloc (idx->count ? idx->count : 1, sizeof (*items));
  cleanup_free unsigned char *written = NULL;
  struct sp_pack_index again;
  sp_error_t err = NULL;
  size_t written_len;

  FUZZ_REQUIRE (items != NULL);
  for (uint32_t i = 0; i < idx->count; i++)
    {
      /* Reversed, so that the writer has the sorting to do.  */
      struct sp_pack_item *it = &items[idx->count - 1 - i];

      memcpy (it->id.id, idx->oids + (size_t)i * SP_PACK_OID_SIZE, SP_PACK_OID_SIZE);
      it->crc = get32 (idx->oids + (size_t)idx->count * SP_PACK_OID_SIZE + (size_t)i * 4);
      it->new_offset = sp_pack_index_offset (idx, i);
    }
  written = write_index (items, idx->count, buf + len - 2 * SP_PACK_OID_SIZE, &written_len);
  FUZZ_REQUIRE (written_len >= offsets_at + 2 * SP_PACK_OID_SIZE);
  FUZZ_REQUIRE (memcmp (written, buf, offsets_at) == 0);
  FUZZ_REQUIRE (memcmp (written + written_len - 2 * SP_PACK_OID_SIZE, buf + len - 2 * SP_PACK_OID_SIZE,
                        SP_PACK_OID_SIZE)
                == 0);
  if (idx->n64 == 0)
    FUZZ_REQUIRE (written_len == len && memcmp (written, buf, len - SP_PACK_OID_SIZE) == 0);
  FUZZ_REQUIRE (sp_pack_index_parse ((unsigned char *)fuzz_exact_copy (written, written_len), written_len,
                                     pack_size, &again, &err)
                == 0);
  FUZZ_REQUIRE (again.count == idx->count && again.n64 <= idx->n64);
  for (uint32_t i = 0; i < idx->count; i++)
    FUZZ_REQUIRE (sp_pack_index_offset (&again, i) == sp_pack_index_offset (idx, i));
  sp_pack_index_release (&again);
}

static void
fuzz_index (const uint8_t *data, size_t size)
{
  struct sp_pack_index idx;
  sp_error_t err = NULL;
  uint64_t pack_size;
  unsigned char *buf;
  size_t len;

  if (size < 8)
    return;
  pack_size = get64 (data);
  len = size - 8;
  buf = (unsigned char *)fuzz_exact_copy (data + 8, len);
  if (sp_pack_index_parse (buf, len, pack_size, &idx, &err) < 0)
    {
      FUZZ_REQUIRE (fuzz_message_ok (sp_error_message (err)));
      sp_error_release (&err);
      sp_pack_index_release (&idx);
      return;
    }
  FUZZ_REQUIRE (err == NULL && idx.bytes == buf && idx.len == len && idx.pack_size == pack_size);
  check_index (&idx, buf, len, pack_size);
  check_rewrite (&idx, buf, len, pack_size);
  sp_pack_index_release (&idx);
}

/* ---- 1: an entry's header ---- */

/* git's rules for an entry header, written out again: type and size in at
   most 9 bytes (git refuses a shift past 57 bits), a known type, and for a
   delta its base: an offset distance that fits 64 bits and is not 0, or 20
   bytes of id.  */
static bool
reference_entry (const unsigned char *b, size_t len, struct sp_pack_entry *r)
{
  size_t n = 0;

  memset (r, 0, sizeof (*r));
  if (len == 0)
    return false;
  r->type = (enum sp_pack_type) ((b[0] >> 4) & 7);
  r->size = b[0] & 15;
  while (b[n] & 0x80)
    {
      if (++n >= len || n > 8)
        return false;
      r->size |= (uint64_t)(b[n] & 0x7f) << (4 + 7 * (n - 1));
    }
  r->size_len = ++n;
  if (r->type == SP_PACK_OFS_DELTA)
    {
      unsigned __int128 dist;

      if (n >= len)
        return false;
      dist = b[n] & 0x7f;
      while (b[n] & 0x80)
        {
          if (++n >= len)
            return false;
          dist = ((dist + 1) << 7) | (b[n] & 0x7f);
          if (dist > UINT64_MAX)
            return false;
        }
      if (dist == 0)
        return false;
      r->base_dist = (uint64_t)dist;
      n++;
    }
  else if (r->type == SP_PACK_REF_DELTA)
    {
      if (len - n < SP_PACK_OID_SIZE)
        return false;
      memcpy (r->base_id, b + n, SP_PACK_OID_SIZE);
      n += SP_PACK_OID_SIZE;
    }
  else if (r->type < SP_PACK_COMMIT || r->type > SP_PACK_TAG)
    return false;
  r->header_len = n;
  return true;
}

static void
fuzz_entry (const uint8_t *data, size_t size)
{
  cleanup_free unsigned char *buf = (unsigned char *)fuzz_exact_copy (data, size);
  struct sp_pack_entry e, r;
  unsigned char again[10];
  size_t n;
  bool ok = reference_entry (buf, size, &r);

  if (sp_pack_entry_parse (buf, size, &e) < 0)
    {
      FUZZ_REQUIRE (!ok);
      return;
    }
  FUZZ_REQUIRE (ok);
  FUZZ_REQUIRE (e.type == r.type && e.size == r.size && e.size_len == r.size_len
                && e.header_len == r.header_len && e.base_dist == r.base_dist
                && memcmp (e.base_id, r.base_id, SP_PACK_OID_SIZE) == 0);
  FUZZ_REQUIRE (e.size_len >= 1 && e.size_len <= e.header_len && e.header_len <= size
                && e.header_len <= SP_PACK_ENTRY_HEADER_MAX);
  n = sp_pack_encode_header (e.type, e.size, again);
  if (e.size_len == 1 || buf[e.size_len - 1] != 0)
    FUZZ_REQUIRE (n == e.size_len && memcmp (again, buf, n) == 0);
  else
    FUZZ_REQUIRE (n < e.size_len);
  if (e.type == SP_PACK_OFS_DELTA)
    {
      n = sp_pack_encode_ofs (e.base_dist, again);
      FUZZ_REQUIRE (n == e.header_len - e.size_len && memcmp (again, buf + e.size_len, n) == 0);
    }
  else if (e.type == SP_PACK_REF_DELTA)
    FUZZ_REQUIRE (e.header_len == e.size_len + SP_PACK_OID_SIZE);
  else
    FUZZ_REQUIRE (e.header_len == e.size_len);
}

/* ---- 2: a delta ---- */

/* A delta's size as pack_index.c reads it: git's little-endian base 128,
   at most 10 bytes, bits past 64 dropped as git drops them.  */
static bool
reference_size (const unsigned char *d, size_t len, size_t *at, uint64_t *size)
{
  *size = 0;
  for (unsigned i = 0; i < 10; i++)
    {
      if (*at >= len)
        return false;
      *size |= (uint64_t)(d[*at] & 0x7f) << (7 * i);
      if (!(d[(*at)++] & 0x80))
        return true;
    }
  return false;
}

/* git's patch_delta, written out again: into out (room for max_len), or
   false.  */
static bool
reference_delta (const unsigned char *base, size_t base_len, const unsigned char *d, size_t len,
                 size_t max_len, unsigned char *out, size_t *out_len)
{
  uint64_t src_size, left;
  size_t at = 0;

  if (!reference_size (d, len, &at, &src_size) || src_size != base_len || !reference_size (d, len, &at, &left)
      || left > max_len)
    return false;
  *out_len = (size_t)left;
  while (at < len)
    {
      unsigned cmd = d[at++];

      if (cmd == 0)
        return false;
      if (cmd & 0x80)
        {
          uint64_t off = 0, n = 0;

          for (unsigned bit = 0; bit < 7; bit++)
            if (cmd & (1u << bit))
              {
                if (at == len)
                  return false;
                if (bit < 4)
                  off += (uint64_t)d[at++] << (8 * bit);
                else
                  n += (uint64_t)d[at++] << (8 * (bit - 4));
              }
          if (n == 0)
            n = 0x10000;
          if (off + n > base_len || n > left)
            return false;
          memcpy (out, base + off, (size_t)n);
          out += n;
          left -= n;
        }
      else
        {
          if (cmd > len - at || cmd > left)
            return false;
          memcpy (out, d + at, cmd);
          out += cmd;
          at += cmd;
          left -= cmd;
        }
    }
  return left == 0;
}

static void
fuzz_delta (const uint8_t *data, size_t size)
{
  size_t base_len, delta_len, out_len = 0, ref_len = 0;
  cleanup_free unsigned char *base = NULL;
  cleanup_free unsigned char *delta = NULL;
  cleanup_free unsigned char *out = NULL;
  static unsigned char ref[DELTA_RESULT_MAX];
  bool ok;

  if (size < 3)
    return;
  base_len = (size_t)data[0] << 16 | (size_t)data[1] << 8 | data[2];
  data += 3;
  size -= 3;
  if (base_len > size)
    base_len = size;
  delta_len = size - base_len;
  base = (unsigned char *)fuzz_exact_copy (data, base_len);
  delta = (unsigned char *)fuzz_exact_copy (data + base_len, delta_len);
  ok = reference_delta (base, base_len, delta, delta_len, DELTA_RESULT_MAX, ref, &ref_len);
  if (sp_pack_delta_apply (base, base_len, delta, delta_len, DELTA_RESULT_MAX, &out, &out_len) < 0)
    {
      FUZZ_REQUIRE (!ok && out == NULL);
      return;
    }
  FUZZ_REQUIRE (ok && out != NULL);
  FUZZ_REQUIRE (out_len == ref_len && out_len <= DELTA_RESULT_MAX);
  FUZZ_REQUIRE (out_len == 0 || memcmp (out, ref, out_len) == 0);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size < 1 || size > INPUT_MAX_BYTES)
    return 0;
  switch (data[0] % 3)
    {
    case 0:
      fuzz_index (data + 1, size - 1);
      break;
    case 1:
      fuzz_entry (data + 1, size - 1);
      break;
    default:
      fuzz_delta (data + 1, size - 1);
      break;
    }
  return 0;
}
