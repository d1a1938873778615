/* A git pack's index and entry headers (src/seed/pack_index.h): the header
   and base-distance encodings against git's, what the entry parser refuses,
   an index written by sp_pack_index_write and parsed back, the index
   parser's refusals, git's delta format and object ids.  The cases that need
   the git CLI (a real pack from `git repack`, read back and rewritten, and
   `git show-index` on a written index) say SKIP, and why, without it; the
   product never runs git.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <nettle/sha1.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/cleanup.h"
#include "os/fileio.h"

#include "seed/pack_index.h"
#include "seed_fixture.h"
#include "sp_check.h"

#define BIT(n)         ((uint64_t)1 << (n))
#define FILE_MAX_BYTES (16 * 1024 * 1024)

/* ---- entry headers ---- */

static const enum sp_pack_type all_types[]
    = { SP_PACK_COMMIT, SP_PACK_TREE, SP_PACK_BLOB, SP_PACK_TAG, SP_PACK_OFS_DELTA, SP_PACK_REF_DELTA };

/* The header of type and size, followed by a base for a delta, parses back
   to them; one byte fewer is refused.  */
static void
header_round_trips (enum sp_pack_type type, uint64_t size)
{
  unsigned char buf[SP_PACK_ENTRY_HEADER_MAX];
  size_t n = sp_pack_encode_header (type, size, buf), base_len = 0;
  struct sp_pack_entry e;

  ck_assert_uint_le (n, 10);
  if (type == SP_PACK_OFS_DELTA)
    base_len = sp_pack_encode_ofs (1234, buf + n);
  else if (type == SP_PACK_REF_DELTA)
    {
      memset (buf + n, 0xab, SP_PACK_OID_SIZE);
      base_len = SP_PACK_OID_SIZE;
    }
  ck_assert_msg (sp_pack_entry_parse (buf, n + base_len, &e) == 0, "type %d size %" PRIu64 " refused", type,
                 size);
  ck_assert_int_eq (e.type, type);
  ck_assert_msg (e.size == size, "type %d: size %" PRIu64 " parsed as %" PRIu64, type, size, e.size);
  ck_assert_uint_eq (e.size_len, n);
  ck_assert_uint_eq (e.header_len, n + base_len);
  if (type == SP_PACK_OFS_DELTA)
    ck_assert_uint_eq (e.base_dist, 1234);
  if (type == SP_PACK_REF_DELTA)
    ck_assert_uint_eq (e.base_id[0], 0xab);
  ck_assert_int_eq (sp_pack_entry_parse (buf, n + base_len - 1, &e), -1);
}

START_TEST (entry_header_round_trips_every_type_and_size)
{
  /* 2^60 - 1 is the largest size git reads back: see the next test.  */
  static const uint64_t sizes[] = { 0, 15, 16, 127, 128, 2047, 2048, BIT (32), BIT (60) - 1 };

  for (size_t t = 0; t < sizeof (all_types) / sizeof (*all_types); t++)
    for (size_t s = 0; s < sizeof (sizes) / sizeof (*sizes); s++)
      header_round_trips (all_types[t], sizes[s]);
}
END_TEST

/* git reads at most 9 bytes of type and size (unpack_object_header_buffer
   refuses a shift past bitsizeof(long) - 7): 60 bits.  Bigger sizes encode
   to 10 bytes that neither git nor sp_pack_entry_parse reads back.  */
START_TEST (entry_size_of_60_bits_or_more_is_refused_as_git_does)
{
  static const uint64_t sizes[] = { BIT (60), BIT (63), UINT64_MAX };
  unsigned char buf[SP_PACK_ENTRY_HEADER_MAX];
  struct sp_pack_entry e;

  for (size_t s = 0; s < sizeof (sizes) / sizeof (*sizes); s++)
    {
      size_t n = sp_pack_encode_header (SP_PACK_BLOB, sizes[s], buf);

      ck_assert_uint_eq (n, 10);
      ck_assert_int_eq (sp_pack_entry_parse (buf, n, &e), -1);
    }
}
END_TEST

START_TEST (entry_header_encodes_as_git_does)
{
  unsigned char buf[10];

  ck_assert_uint_eq (sp_pack_encode_header (SP_PACK_COMMIT, 0, buf), 1);
  ck_assert_uint_eq (buf[0], 0x10);
  ck_assert_uint_eq (sp_pack_encode_header (SP_PACK_TREE, 15, buf), 1);
  ck_assert_uint_eq (buf[0], 0x2f);
  ck_assert_uint_eq (sp_pack_encode_header (SP_PACK_BLOB, 16, buf), 2);
  ck_assert_mem_eq (buf, "\xb0\x01", 2);
  ck_assert_uint_eq (sp_pack_encode_header (SP_PACK_BLOB, 100, buf), 2);
  ck_assert_mem_eq (buf, "\xb4\x06", 2);
  ck_assert_uint_eq (sp_pack_encode_header (SP_PACK_REF_DELTA, BIT (32), buf), 6);
  ck_assert_mem_eq (buf, "\xf0\x80\x80\x80\x80\x01", 6);
}
END_TEST

/* An OFS_DELTA entry with base distance dist parses back to it.  */
static size_t
ofs_round_trips (uint64_t dist, unsigned char ofs[10])
{
  unsigned char buf[SP_PACK_ENTRY_HEADER_MAX];
  size_t n = sp_pack_encode_header (SP_PACK_OFS_DELTA, 5, buf);
  size_t m = sp_pack_encode_ofs (dist, ofs);
  struct sp_pack_entry e;

  ck_assert_uint_ge (m, 1);
  ck_assert_uint_le (m, 10);
  memcpy (buf + n, ofs, m);
  ck_assert_msg (sp_pack_entry_parse (buf, n + m, &e) == 0, "distance %" PRIu64 " refused", dist);
  ck_assert_int_eq (e.type, SP_PACK_OFS_DELTA);
  ck_assert_msg (e.base_dist == dist, "distance %" PRIu64 " parsed as %" PRIu64, dist, e.base_dist);
  ck_assert_uint_eq (e.header_len, n + m);
  ck_assert_int_eq (sp_pack_entry_parse (buf, n + m - 1, &e), -1);
  return m;
}

START_TEST (ofs_distance_round_trips_and_encodes_as_git_does)
{
  /* git's offset encoding adds one at each continuation, so every byte
     string has one value: 1 byte up to 127, 2 up to 16511, then 3.  */
  static const struct
  {
    uint64_t dist;
    size_t len;
    const char *bytes;
  } known[] = {
    { 1, 1, "\x01" },         { 127, 1, "\x7f" },           { 128, 2, "\x80\x00" },
    { 16511, 2, "\xff\x7f" }, { 16512, 3, "\x80\x80\x00" }, { BIT (40), 6, "\x9e\xfe\xfe\xfe\xff\x00" },
  };
  unsigned char ofs[10];

  for (size_t i = 0; i < sizeof (known) / sizeof (*known); i++)
    {
      size_t m = ofs_round_trips (known[i].dist, ofs);

      ck_assert_uint_eq (m, known[i].len);
      ck_assert_mem_eq (ofs, known[i].bytes, m);
    }
  /* The largest distance takes all 10 bytes.  */
  ck_assert_uint_eq (ofs_round_trips (UINT64_MAX, ofs), 10);
  ofs_round_trips (BIT (63), ofs);
}
END_TEST

static void
entry_refused (const char *what, const void *bytes, size_t len)
{
  cleanup_free unsigned char *copy = malloc (len ? len : 1);
  struct sp_pack_entry e;

  memcpy (copy, bytes, len);
  ck_assert_msg (sp_pack_entry_parse (copy, len, &e) == -1, "%s: accepted", what);
}

START_TEST (entry_parse_refuses_malformed_headers)
{
  unsigned char ref[1 + SP_PACK_OID_SIZE] = { 0x75 };
  unsigned char ofs_overflow[12] = { 0x65 };
  unsigned char long_size[11];
  struct sp_pack_entry e;

  entry_refused ("empty", "", 0);
  entry_refused ("a size continued past the end", "\xb0", 1);
  entry_refused ("a size continued twice past the end", "\xb0\x80", 2);
  entry_refused ("type 0", "\x05", 1);
  entry_refused ("type 5", "\x55", 1);
  entry_refused ("type 5 with a long size", "\xd5\x01", 2);
  entry_refused ("an OFS_DELTA without its distance", "\x65", 1);
  entry_refused ("an OFS_DELTA distance continued past the end", "\x65\x80", 2);
  entry_refused ("an OFS_DELTA distance continued twice past the end", "\x65\xff\x80", 3);
  entry_refused ("an OFS_DELTA distance of 0", "\x65\x00", 2);
  /* 11 bytes of distance: past 64 bits however they are read.  */
  memset (ofs_overflow + 1, 0xff, 10);
  ofs_overflow[11] = 0x7f;
  entry_refused ("an OFS_DELTA distance over 64 bits", ofs_overflow, sizeof (ofs_overflow));
  /* 10 bytes whose value is just over UINT64_MAX.  */
  entry_refused ("an OFS_DELTA distance of 2^64", "\x65\x80\xfe\xfe\xfe\xfe\xfe\xfe\xfe\xff\x00", 11);
  memset (ref + 1, 0x11, SP_PACK_OID_SIZE);
  entry_refused ("a REF_DELTA with 19 bytes of base id", ref, SP_PACK_OID_SIZE);
  entry_refused ("a REF_DELTA with no base id", ref, 1);
  ck_assert_int_eq (sp_pack_entry_parse (ref, sizeof (ref), &e), 0);
  /* A first byte and ten continuations: 74 bits of size.  */
  memset (long_size, 0xff, sizeof (long_size));
  long_size[0] = 0xbf;
  long_size[10] = 0x01;
  entry_refused ("a size varint over 64 bits", long_size, sizeof (long_size));
}
END_TEST

START_TEST (type_names_are_git_s_for_whole_objects_only)
{
  ck_assert_str_eq (sp_pack_type_name (SP_PACK_COMMIT), "commit");
  ck_assert_str_eq (sp_pack_type_name (SP_PACK_TREE), "tree");
  ck_assert_str_eq (sp_pack_type_name (SP_PACK_BLOB), "blob");
  ck_assert_str_eq (sp_pack_type_name (SP_PACK_TAG), "tag");
  ck_assert_ptr_null (sp_pack_type_name (0));
  ck_assert_ptr_null (sp_pack_type_name (5));
  ck_assert_ptr_null (sp_pack_type_name (SP_PACK_OFS_DELTA));
  ck_assert_ptr_null (sp_pack_type_name (SP_PACK_REF_DELTA));
  ck_assert_ptr_null (sp_pack_type_name (8));
  ck_assert_ptr_null (sp_pack_type_name (UINT_MAX));
}
END_TEST

/* ---- object ids ---- */

static void
hex_of (const unsigned char id[SP_PACK_OID_SIZE], char hex[2 * SP_PACK_OID_SIZE + 1])
{
  for (size_t i = 0; i < SP_PACK_OID_SIZE; i++)
    sprintf (hex + 2 * i, "%02x", id[i]);
}

static void
bin_of (const char *hex, unsigned char id[SP_PACK_OID_SIZE])
{
  for (size_t i = 0; i < SP_PACK_OID_SIZE; i++)
    ck_assert_int_eq (sscanf (hex + 2 * i, "%2hhx", &id[i]), 1);
}

static void
object_id_is (unsigned type, const char *data, size_t len, const char *expected)
{
  unsigned char id[SP_PACK_OID_SIZE];
  char hex[2 * SP_PACK_OID_SIZE + 1];

  sp_pack_object_id (type, (const unsigned char *)data, len, id);
  hex_of (id, hex);
  ck_assert_str_eq (hex, expected);
}

START_TEST (object_id_is_git_s)
{
  object_id_is (SP_PACK_BLOB, "hello\n", 6, "ce013625030ba8dba906f756967f9e9ca394464a");
  object_id_is (SP_PACK_TREE, "", 0, "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
  object_id_is (SP_PACK_BLOB, "", 0, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}
END_TEST

/* ---- the index ---- */

/* Four items, out of id order, for a pack of 8 GiB: B and C on either side
   of 2^31, so C and D go through the 64-bit table.  Sorted by id: A, B, C,
   D; B and C share a first byte.  */
#define FX_PACK_SIZE BIT (33)
#define FX_N         4
#define FX_OFF_A     12
#define FX_OFF_B     (BIT (31) - 1) /* the largest in 31 bits */
#define FX_OFF_C     BIT (31)       /* the smallest that is not */
#define FX_OFF_D     UINT64_C (0x123456789)
/* Where the tables of a FX_N-item index start, and its length.  */
#define AT_FANOUT 8
#define AT_IDS    (AT_FANOUT + 256 * 4)
#define AT_CRCS   (AT_IDS + FX_N * SP_PACK_OID_SIZE)
#define AT_OFF32  (AT_CRCS + FX_N * 4)
#define AT_OFF64  (AT_OFF32 + FX_N * 4)
#define FX_LEN    (AT_OFF64 + 2 * 8 + 2 * SP_PACK_OID_SIZE)

static const unsigned char fx_trailer[SP_PACK_OID_SIZE] = "the pack's checksum";

static struct sp_pack_item
fx_item (unsigned char first, unsigned char second, uint32_t crc, uint64_t offset)
{
  struct sp_pack_item it;

  memset (&it, 0, sizeof (it));
  memset (it.id.id, 0x5a, sizeof (it.id.id));
  it.id.id[0] = first;
  it.id.id[1] = second;
  it.crc = crc;
  it.new_offset = offset;
  return it;
}

static void
fx_items (struct sp_pack_item items[FX_N])
{
  items[0] = fx_item (0x7f, 0x02, 0xc0c0c0c0, FX_OFF_C);
  items[1] = fx_item (0xff, 0x00, 0xd0d0d0d0, FX_OFF_D);
  items[2] = fx_item (0x00, 0x11, 0xa0a0a0a0, FX_OFF_A);
  items[3] = fx_item (0x7f, 0x01, 0xb0b0b0b0, FX_OFF_B);
}

static uint32_t
get32 (const unsigned char *p)
{
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void
set32 (unsigned char *p, uint32_t v)
{
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* What sp_pack_index_write writes for items, malloc'd.  */
static unsigned char *
write_index (const struct sp_pack_item *items, size_t n, const unsigned char trailer[SP_PACK_OID_SIZE],
             size_t *len)
{
  cleanup_close int fd = memfd_create ("idx", MFD_CLOEXEC);
  cleanup_error sp_error_t err = NULL;
  unsigned char *bytes;
  struct stat st;

  ck_assert_int_ge (fd, 0);
  if (sp_pack_index_write (fd, items, n, trailer, &err) < 0)
    ck_abort_msg ("sp_pack_index_write: %s", sp_error_message (err));
  ck_assert_int_eq (fstat (fd, &st), 0);
  *len = (size_t)st.st_size;
  bytes = malloc (*len);
  ck_assert_ptr_nonnull (bytes);
  ck_assert_int_eq (pread (fd, bytes, *len, 0), (ssize_t)*len);
  return bytes;
}

static unsigned char *
fx_index (size_t *len)
{
  struct sp_pack_item items[FX_N];

  fx_items (items);
  return write_index (items, FX_N, fx_trailer, len);
}

/* Parses an exactly-sized heap copy of bytes.  */
static int
parse_copy (const unsigned char *bytes, size_t len, uint64_t pack_size, struct sp_pack_index *idx,
            sp_error_t *err)
{
  unsigned char *copy = malloc (len ? len : 1);

  ck_assert_ptr_nonnull (copy);
  memcpy (copy, bytes, len);
  return sp_pack_index_parse (copy, len, pack_size, idx, err);
}

static void
index_refused (const unsigned char *bytes, size_t len, uint64_t pack_size, const char *fragment)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_pack_index idx;
  int ret = parse_copy (bytes, len, pack_size, &idx, &err);

  sp_pack_index_release (&idx);
  ck_assert_msg (ret == -1, "accepted: expected an error with `%s`", fragment);
  ck_assert_msg (strstr (sp_error_message (err), fragment) != NULL, "`%s` is not in the error: %s", fragment,
                 sp_error_message (err));
}

static void
index_accepted (const unsigned char *bytes, size_t len, uint64_t pack_size)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_pack_index idx;
  int ret = parse_copy (bytes, len, pack_size, &idx, &err);

  sp_pack_index_release (&idx);
  ck_assert_msg (ret == 0, "refused: %s", sp_error_message (err));
}

START_TEST (index_write_lays_out_git_s_version_2)
{
  struct sp_pack_item items[FX_N];
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);
  unsigned char digest[SP_PACK_OID_SIZE];
  struct sha1_ctx sha1;

  fx_items (items);
  ck_assert_uint_eq (len, FX_LEN);
  ck_assert_mem_eq (b, "\377tOc\0\0\0\2", 8);
  for (unsigned i = 0; i < 256; i++)
    ck_assert_uint_eq (get32 (b + AT_FANOUT + 4 * i), i < 0x7f ? 1 : i < 0xff ? 3 : 4);
  /* Sorted by id: A, B, C, D.  */
  ck_assert_mem_eq (b + AT_IDS + 0 * SP_PACK_OID_SIZE, items[2].id.id, SP_PACK_OID_SIZE);
  ck_assert_mem_eq (b + AT_IDS + 1 * SP_PACK_OID_SIZE, items[3].id.id, SP_PACK_OID_SIZE);
  ck_assert_mem_eq (b + AT_IDS + 2 * SP_PACK_OID_SIZE, items[0].id.id, SP_PACK_OID_SIZE);
  ck_assert_mem_eq (b + AT_IDS + 3 * SP_PACK_OID_SIZE, items[1].id.id, SP_PACK_OID_SIZE);
  ck_assert_uint_eq (get32 (b + AT_CRCS + 0), 0xa0a0a0a0);
  ck_assert_uint_eq (get32 (b + AT_CRCS + 12), 0xd0d0d0d0);
  /* Small offsets in place; large ones through the 64-bit table, in id
     order.  */
  ck_assert_uint_eq (get32 (b + AT_OFF32 + 0), FX_OFF_A);
  ck_assert_uint_eq (get32 (b + AT_OFF32 + 4), FX_OFF_B);
  ck_assert_uint_eq (get32 (b + AT_OFF32 + 8), 0x80000000u);
  ck_assert_uint_eq (get32 (b + AT_OFF32 + 12), 0x80000001u);
  ck_assert_mem_eq (b + AT_OFF64, "\0\0\0\0\x80\0\0\0\0\0\0\x01\x23\x45\x67\x89", 16);
  ck_assert_mem_eq (b + FX_LEN - 2 * SP_PACK_OID_SIZE, fx_trailer, SP_PACK_OID_SIZE);
  sha1_init (&sha1);
  sha1_update (&sha1, FX_LEN - SP_PACK_OID_SIZE, b);
  sha1_digest (&sha1, SP_PACK_OID_SIZE, digest);
  ck_assert_mem_eq (b + FX_LEN - SP_PACK_OID_SIZE, digest, SP_PACK_OID_SIZE);
}
END_TEST

START_TEST (index_written_parses_back_with_find_offset_and_entry_end)
{
  static const uint64_t sorted[FX_N] = { FX_OFF_A, FX_OFF_B, FX_OFF_C, FX_OFF_D };
  struct sp_pack_item items[FX_N];
  cleanup_error sp_error_t err = NULL;
  struct sp_pack_index idx;
  unsigned char absent[SP_PACK_OID_SIZE];
  uint64_t end;
  uint32_t pos;
  size_t len;
  unsigned char *b = fx_index (&len);

  fx_items (items);
  if (sp_pack_index_parse (b, len, FX_PACK_SIZE, &idx, &err) < 0)
    ck_abort_msg ("sp_pack_index_parse: %s", sp_error_message (err));
  ck_assert_uint_eq (idx.count, FX_N);
  ck_assert_uint_eq (idx.n64, 2);
  for (size_t i = 0; i < FX_N; i++)
    {
      ck_assert (sp_pack_index_find (&idx, items[i].id.id, &pos));
      ck_assert_uint_eq (sp_pack_index_offset (&idx, pos), items[i].new_offset);
      ck_assert_uint_eq (get32 (idx.oids + (size_t)FX_N * SP_PACK_OID_SIZE + 4 * pos), items[i].crc);
    }
  for (size_t i = 0; i < FX_N; i++)
    {
      ck_assert (sp_pack_index_entry_end (&idx, sorted[i], &end));
      ck_assert_uint_eq (end, i + 1 < FX_N ? sorted[i + 1] : FX_PACK_SIZE - SP_PACK_TRAILER_SIZE);
    }
  ck_assert (!sp_pack_index_entry_end (&idx, FX_OFF_A + 1, &end));
  ck_assert (!sp_pack_index_entry_end (&idx, 0, &end));
  ck_assert (!sp_pack_index_entry_end (&idx, FX_PACK_SIZE - SP_PACK_TRAILER_SIZE, &end));
  /* Between B and C, and in a first byte with no id.  */
  memcpy (absent, items[3].id.id, sizeof (absent));
  absent[SP_PACK_OID_SIZE - 1]++;
  ck_assert (!sp_pack_index_find (&idx, absent, &pos));
  absent[0] = 0x80;
  ck_assert (!sp_pack_index_find (&idx, absent, &pos));
  absent[0] = 0xff;
  absent[1] = 0xff;
  ck_assert (!sp_pack_index_find (&idx, absent, &pos));
  sp_pack_index_release (&idx);
}
END_TEST

START_TEST (index_of_no_objects_parses_for_the_smallest_pack)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_pack_index idx;
  unsigned char id[SP_PACK_OID_SIZE] = { 0 };
  uint64_t end;
  uint32_t pos;
  size_t len;
  unsigned char *b = write_index (NULL, 0, fx_trailer, &len);

  ck_assert_uint_eq (len, 8 + 256 * 4 + 2 * SP_PACK_OID_SIZE);
  index_refused (b, len, SP_PACK_HEADER_SIZE + SP_PACK_TRAILER_SIZE - 1, "too short");
  if (sp_pack_index_parse (b, len, SP_PACK_HEADER_SIZE + SP_PACK_TRAILER_SIZE, &idx, &err) < 0)
    ck_abort_msg ("sp_pack_index_parse: %s", sp_error_message (err));
  ck_assert_uint_eq (idx.count, 0);
  ck_assert (!sp_pack_index_find (&idx, id, &pos));
  ck_assert (!sp_pack_index_entry_end (&idx, SP_PACK_HEADER_SIZE, &end));
  sp_pack_index_release (&idx);
}
END_TEST

START_TEST (index_parse_refuses_another_magic_or_version)
{
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);

  index_accepted (b, len, FX_PACK_SIZE);
  b[0] = 0;
  index_refused (b, len, FX_PACK_SIZE, "not a version 2 pack index");
  b[0] = 0xff;
  b[7] = 1;
  index_refused (b, len, FX_PACK_SIZE, "not a version 2 pack index");
  b[7] = 3;
  index_refused (b, len, FX_PACK_SIZE, "not a version 2 pack index");
  b[7] = 2;
  b[4] = 1;
  index_refused (b, len, FX_PACK_SIZE, "not a version 2 pack index");
}
END_TEST

START_TEST (index_parse_refuses_a_bad_fanout)
{
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);

  /* Down from 2 to 1.  */
  set32 (b + AT_FANOUT + 4 * 0x10, 2);
  index_refused (b, len, FX_PACK_SIZE, "fanout table goes down");
  set32 (b + AT_FANOUT + 4 * 0x10, 1);
  /* Monotonic, but A (first byte 0x00) is not counted under 0x00.  */
  set32 (b + AT_FANOUT, 0);
  index_refused (b, len, FX_PACK_SIZE, "fanout table does not match its ids");
  set32 (b + AT_FANOUT, 1);
  /* C (0x7f) counted under 0x80.  */
  set32 (b + AT_FANOUT + 4 * 0x7f, 2);
  index_refused (b, len, FX_PACK_SIZE, "fanout table does not match its ids");
  set32 (b + AT_FANOUT + 4 * 0x7f, 3);
  /* B (0x7f) counted under 0x7e.  */
  set32 (b + AT_FANOUT + 4 * 0x7e, 2);
  index_refused (b, len, FX_PACK_SIZE, "fanout table does not match its ids");
  set32 (b + AT_FANOUT + 4 * 0x7e, 1);
  index_accepted (b, len, FX_PACK_SIZE);
}
END_TEST

START_TEST (index_parse_refuses_ids_out_of_order_or_twice)
{
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);
  unsigned char *id_b = b + AT_IDS + SP_PACK_OID_SIZE, *id_c = id_b + SP_PACK_OID_SIZE;
  unsigned char saved[SP_PACK_OID_SIZE];

  /* B and C swapped: one first byte, so the fanout still agrees.  */
  memcpy (saved, id_b, SP_PACK_OID_SIZE);
  memcpy (id_b, id_c, SP_PACK_OID_SIZE);
  memcpy (id_c, saved, SP_PACK_OID_SIZE);
  index_refused (b, len, FX_PACK_SIZE, "ids are not in ascending order");
  memcpy (id_b, saved, SP_PACK_OID_SIZE);
  index_refused (b, len, FX_PACK_SIZE, "ids are not in ascending order");
}
END_TEST

START_TEST (index_parse_refuses_a_length_that_does_not_add_up)
{
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);
  cleanup_free unsigned char *longer = calloc (1, len + 8);

  index_refused (b, len - 1, FX_PACK_SIZE, "length does not match its 4 objects");
  index_refused (b, len - 8, FX_PACK_SIZE, "the index names a 64-bit offset it does not have");
  index_refused (b, len - 16, FX_PACK_SIZE, "the index names a 64-bit offset it does not have");
  index_refused (b, len - 20, FX_PACK_SIZE, "length does not match its 4 objects");
  memcpy (longer, b, len);
  index_refused (longer, len + 4, FX_PACK_SIZE, "length does not match its 4 objects");
  index_refused (b, 8 + 256 * 4 + 2 * SP_PACK_OID_SIZE - 1, FX_PACK_SIZE, "not a version 2 pack index");
  index_refused (b, 0, FX_PACK_SIZE, "not a version 2 pack index");
  /* A fifth object the index has no room for.  */
  set32 (b + AT_FANOUT + 4 * 0xff, 5);
  index_refused (b, len, FX_PACK_SIZE, "length does not match its 5 objects");
  set32 (b + AT_FANOUT + 4 * 0xff, 0xffffffff);
  index_refused (b, len, FX_PACK_SIZE, "length does not match");
}
END_TEST

START_TEST (index_parse_refuses_an_offset_outside_the_pack)
{
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);

  set32 (b + AT_OFF32, SP_PACK_HEADER_SIZE - 1);
  index_refused (b, len, FX_PACK_SIZE, "places an object outside the pack");
  set32 (b + AT_OFF32, 0);
  index_refused (b, len, FX_PACK_SIZE, "places an object outside the pack");
  set32 (b + AT_OFF32, SP_PACK_HEADER_SIZE);
  index_accepted (b, len, FX_PACK_SIZE);
  /* D is the last entry: at the trailer, or past it, is outside.  */
  index_refused (b, len, FX_OFF_D + SP_PACK_TRAILER_SIZE, "places an object outside the pack");
  index_refused (b, len, FX_OFF_D, "places an object outside the pack");
  index_accepted (b, len, FX_OFF_D + SP_PACK_TRAILER_SIZE + 1);
  /* A small offset past a small pack.  */
  index_refused (b, len, FX_OFF_B + SP_PACK_TRAILER_SIZE, "places an object outside the pack");
}
END_TEST

START_TEST (index_parse_refuses_two_entries_at_one_offset)
{
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);

  set32 (b + AT_OFF32 + 4, FX_OFF_A);
  index_refused (b, len, FX_PACK_SIZE, "two objects at one offset");
  set32 (b + AT_OFF32 + 4, FX_OFF_B);
  /* C and D through the same 64-bit slot.  */
  set32 (b + AT_OFF32 + 8, 0x80000001u);
  index_refused (b, len, FX_PACK_SIZE, "two objects at one offset");
  /* A 64-bit slot holding a small offset already taken.  */
  set32 (b + AT_OFF32 + 8, 0x80000000u);
  memcpy (b + AT_OFF64, "\0\0\0\0\x7f\xff\xff\xff", 8); /* B's */
  index_refused (b, len, FX_PACK_SIZE, "two objects at one offset");
}
END_TEST

START_TEST (index_parse_refuses_a_64_bit_offset_it_does_not_have)
{
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);

  set32 (b + AT_OFF32 + 12, 0x80000002u);
  index_refused (b, len, FX_PACK_SIZE, "64-bit offset it does not have");
  set32 (b + AT_OFF32 + 12, 0xffffffffu);
  index_refused (b, len, FX_PACK_SIZE, "64-bit offset it does not have");
  /* A 64-bit offset outside the pack.  */
  set32 (b + AT_OFF32 + 12, 0x80000001u);
  memset (b + AT_OFF64 + 8, 0xff, 8);
  index_refused (b, len, FX_PACK_SIZE, "places an object outside the pack");
}
END_TEST

START_TEST (index_parse_refuses_a_pack_too_short_to_be_one)
{
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);

  index_refused (b, len, 0, "too short");
  index_refused (b, len, SP_PACK_HEADER_SIZE + SP_PACK_TRAILER_SIZE - 1, "too short");
  /* 32 bytes is a pack, but not one with these offsets.  */
  index_refused (b, len, SP_PACK_HEADER_SIZE + SP_PACK_TRAILER_SIZE, "outside the pack");
}
END_TEST

/* ---- deltas ---- */

static const char fox[] = "The quick brown fox jumps over the lazy dog";
#define FOX_LEN (sizeof (fox) - 1)

static size_t
put_varint (unsigned char *p, uint64_t v)
{
  size_t n = 0;

  do
    {
      p[n] = v & 0x7f;
      v >>= 7;
      if (v)
        p[n] |= 0x80;
      n++;
    }
  while (v);
  return n;
}

/* A delta: the base's and result's sizes, then ops bytes.  */
static size_t
make_delta (unsigned char *out, uint64_t base_size, uint64_t result_size, const void *ops, size_t ops_len)
{
  size_t n = put_varint (out, base_size);

  n += put_varint (out + n, result_size);
  memcpy (out + n, ops, ops_len);
  return n + ops_len;
}

static int
apply (const void *base, size_t base_len, const unsigned char *delta, size_t len, size_t max_len,
       unsigned char **out, size_t *out_len)
{
  cleanup_free unsigned char *b = malloc (base_len ? base_len : 1);
  cleanup_free unsigned char *d = malloc (len ? len : 1);

  memcpy (b, base, base_len);
  memcpy (d, delta, len);
  *out_len = SIZE_MAX;
  return sp_pack_delta_apply (b, base_len, d, len, max_len, out, out_len);
}

static void
delta_refused (const char *what, const void *base, size_t base_len, uint64_t base_size, uint64_t result_size,
               const void *ops, size_t ops_len, size_t max_len)
{
  unsigned char delta[256];
  unsigned char *out = (unsigned char *)"not touched";
  size_t out_len, n = make_delta (delta, base_size, result_size, ops, ops_len);

  ck_assert_msg (apply (base, base_len, delta, n, max_len, &out, &out_len) == -1, "%s: accepted", what);
  ck_assert_msg (out == NULL, "%s: a result on failure", what);
}

/* "quick", "ly ", "lazy dog", "!".  */
static const unsigned char fox_ops[] = { 0x91, 4, 5, 3, 'l', 'y', ' ', 0x91, 35, 8, 1, '!' };
static const char fox_result[] = "quickly lazy dog!";
#define FOX_RESULT_LEN (sizeof (fox_result) - 1)

START_TEST (delta_copies_and_inserts)
{
  unsigned char delta[64];
  cleanup_free unsigned char *out = NULL;
  size_t out_len, n = make_delta (delta, FOX_LEN, FOX_RESULT_LEN, fox_ops, sizeof (fox_ops));

  ck_assert_int_eq (apply (fox, FOX_LEN, delta, n, FOX_RESULT_LEN, &out, &out_len), 0);
  ck_assert_uint_eq (out_len, FOX_RESULT_LEN);
  ck_assert_mem_eq (out, fox_result, FOX_RESULT_LEN);
}
END_TEST

START_TEST (delta_to_nothing_gives_an_empty_result)
{
  unsigned char delta[8];
  cleanup_free unsigned char *out = NULL;
  size_t out_len, n = make_delta (delta, FOX_LEN, 0, "", 0);

  ck_assert_int_eq (apply (fox, FOX_LEN, delta, n, 0, &out, &out_len), 0);
  ck_assert_ptr_nonnull (out);
  ck_assert_uint_eq (out_len, 0);
}
END_TEST

START_TEST (delta_copy_of_size_0_copies_0x10000_bytes)
{
  size_t base_len = 0x10000 + 0x200, out_len, n;
  cleanup_free unsigned char *base = malloc (base_len);
  cleanup_free unsigned char *out = NULL;
  /* Only the offset's second byte: 0x100; no size bytes: 0x10000.  */
  static const unsigned char ops[] = { 0x82, 0x01 };
  unsigned char delta[16];

  for (size_t i = 0; i < base_len; i++)
    base[i] = (unsigned char)(i * 7 + (i >> 8));
  n = make_delta (delta, base_len, 0x10000, ops, sizeof (ops));
  ck_assert_int_eq (apply (base, base_len, delta, n, 0x10000, &out, &out_len), 0);
  ck_assert_uint_eq (out_len, 0x10000);
  ck_assert_mem_eq (out, base + 0x100, 0x10000);
  /* 0x10000 from 0x201 is past the base's end.  */
  delta_refused ("0x10000 bytes copied past the base", base, base_len, base_len, 0x10000, "\x83\x01\x02", 3,
                 0x10000);
  /* And from a base shorter than 0x10000.  */
  delta_refused ("0x10000 bytes copied from a short base", fox, FOX_LEN, FOX_LEN, 0x10000, "\x80", 1,
                 0x10000);
}
END_TEST

START_TEST (delta_apply_refuses_malformed_deltas)
{
  unsigned char delta[8];
  unsigned char *out = (unsigned char *)"not touched";
  size_t out_len;

  delta_refused ("another base size", fox, FOX_LEN, FOX_LEN - 1, FOX_RESULT_LEN, fox_ops, sizeof (fox_ops),
                 1024);
  delta_refused ("a larger base size", fox, FOX_LEN, FOX_LEN + 1, FOX_RESULT_LEN, fox_ops, sizeof (fox_ops),
                 1024);
  delta_refused ("a copy one byte out of the base", fox, FOX_LEN, FOX_LEN, 5, "\x91\x27\x05", 3, 1024);
  delta_refused ("a copy starting at the base's end", fox, FOX_LEN, FOX_LEN, 1, "\x91\x2b\x01", 3, 1024);
  delta_refused ("a copy far past the base", fox, FOX_LEN, FOX_LEN, 1, "\x98\x01\x01", 3, 1024);
  delta_refused ("a copy at offset 2^32 - 1", fox, FOX_LEN, FOX_LEN, 1, "\x9f\xff\xff\xff\xff\x01", 6, 1024);
  delta_refused ("a copy past the result's size", fox, FOX_LEN, FOX_LEN, 4, "\x91\x04\x05", 3, 1024);
  delta_refused ("an insert past the result's size", fox, FOX_LEN, FOX_LEN, 2, "\x03xyz", 4, 1024);
  delta_refused ("an insert one byte past the delta's end", fox, FOX_LEN, FOX_LEN, 4, "\x04xyz", 4, 1024);
  delta_refused ("a copy's offset past the delta's end", fox, FOX_LEN, FOX_LEN, 5, "\x91", 1, 1024);
  delta_refused ("a copy's size past the delta's end", fox, FOX_LEN, FOX_LEN, 5, "\x91\x04", 2, 1024);
  delta_refused ("op 0", fox, FOX_LEN, FOX_LEN, 1, "\x00\x01x", 3, 1024);
  delta_refused ("a result shorter than declared", fox, FOX_LEN, FOX_LEN, FOX_RESULT_LEN + 1, fox_ops,
                 sizeof (fox_ops), 1024);
  delta_refused ("a result over max_len", fox, FOX_LEN, FOX_LEN, FOX_RESULT_LEN, fox_ops, sizeof (fox_ops),
                 FOX_RESULT_LEN - 1);
  /* Truncated sizes.  */
  ck_assert_int_eq (apply (fox, FOX_LEN, delta, 0, 1024, &out, &out_len), -1);
  ck_assert_ptr_null (out);
  delta[0] = FOX_LEN;
  ck_assert_int_eq (apply (fox, FOX_LEN, delta, 1, 1024, &out, &out_len), -1);
  delta[1] = 0x80;
  ck_assert_int_eq (apply (fox, FOX_LEN, delta, 2, 1024, &out, &out_len), -1);
  ck_assert_ptr_null (out);
}
END_TEST

/* ---- with the git CLI: a real pack ---- */

static unsigned char *
read_whole (const char *path, size_t *len)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  cleanup_error sp_error_t err = NULL;
  char *bytes = NULL;

  ck_assert_msg (fd >= 0, "open %s", path);
  if (sp_read_fd_capped (fd, FILE_MAX_BYTES, &bytes, len, &err) < 0)
    ck_abort_msg ("read %s: %s", path, sp_error_message (err));
  return (unsigned char *)bytes;
}

static void
write_at (int dirfd, const char *path, const void *bytes, size_t len)
{
  cleanup_close int fd = openat (dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_ge (fd, 0);
  if (sp_write_all (fd, bytes, len, &err) < 0)
    ck_abort_msg ("write %s: %s", path, sp_error_message (err));
}

struct real_object
{
  unsigned char id[SP_PACK_OID_SIZE];
  uint64_t offset;
  uint32_t crc; /* as git show-index lists it */
  unsigned type;
  unsigned char *data; /* resolved, or NULL */
  size_t len;
};

struct real_pack
{
  char idx_path[PATH_MAX];
  char pack_path[PATH_MAX];
  unsigned char *pack;
  size_t pack_len;
  struct sp_pack_index idx;
  struct real_object *objects; /* in the index's order */
  uint32_t n;
  unsigned ofs_deltas, ref_deltas;
};

static void
real_pack_release (struct real_pack *p)
{
  for (uint32_t i = 0; i < p->n; i++)
    free (p->objects[i].data);
  free (p->objects);
  free (p->pack);
  sp_pack_index_release (&p->idx);
}

/* The repository's one pack, its index parsed, and what `git show-index`
   lists in it.  */
static void
real_pack_open (struct real_pack *p, const char *repo)
{
  char pattern[PATH_MAX], list[PATH_MAX], hex[2 * SP_PACK_OID_SIZE + 1];
  cleanup_error sp_error_t err = NULL;
  cleanup_file FILE *f = NULL;
  unsigned char *idx_bytes;
  size_t idx_len;
  uint64_t offset;
  uint32_t crc, pos;
  glob_t g;

  memset (p, 0, sizeof (*p));
  snprintf (pattern, sizeof (pattern), "%s/%s/.git/objects/pack/pack-*.idx", fx_dir, repo);
  ck_assert_int_eq (glob (pattern, 0, NULL, &g), 0);
  ck_assert_uint_eq (g.gl_pathc, 1);
  snprintf (p->idx_path, sizeof (p->idx_path), "%s", g.gl_pathv[0]);
  globfree (&g);
  snprintf (p->pack_path, sizeof (p->pack_path), "%.*s.pack", (int)(strlen (p->idx_path) - 4), p->idx_path);
  p->pack = read_whole (p->pack_path, &p->pack_len);
  idx_bytes = read_whole (p->idx_path, &idx_len);
  if (sp_pack_index_parse (idx_bytes, idx_len, p->pack_len, &p->idx, &err) < 0)
    ck_abort_msg ("sp_pack_index_parse of git's index: %s", sp_error_message (err));
  p->n = p->idx.count;
  p->objects = calloc (p->n ? p->n : 1, sizeof (*p->objects));
  ck_assert_ptr_nonnull (p->objects);

  snprintf (list, sizeof (list), "%s/show-index.txt", fx_dir);
  ck_assert_int_eq (fx_sh ("git show-index < %s > %s", p->idx_path, list), 0);
  f = fopen (list, "re");
  ck_assert_ptr_nonnull (f);
  for (uint32_t i = 0;; i++)
    {
      unsigned char id[SP_PACK_OID_SIZE];
      int got = fscanf (f, "%" SCNu64 " %40s (%" SCNx32 ")\n", &offset, hex, &crc);

      if (got == EOF)
        {
          ck_assert_uint_eq (i, p->n);
          break;
        }
      ck_assert_int_eq (got, 3);
      ck_assert_uint_lt (i, p->n);
      bin_of (hex, id);
      ck_assert_msg (sp_pack_index_find (&p->idx, id, &pos), "%s is not found", hex);
      ck_assert_msg (sp_pack_index_offset (&p->idx, pos) == offset, "%s is not at %" PRIu64, hex, offset);
      memcpy (p->objects[pos].id, id, SP_PACK_OID_SIZE);
      p->objects[pos].offset = offset;
      p->objects[pos].crc = crc;
    }
}

static void resolve (struct real_pack *p, uint32_t pos, unsigned depth);

static uint32_t
position_at (const struct real_pack *p, uint64_t offset)
{
  for (uint32_t i = 0; i < p->n; i++)
    if (p->objects[i].offset == offset)
      return i;
  ck_abort_msg ("no entry at %" PRIu64, offset);
  return 0;
}

/* The object at pos: its entry inflated and, for a delta, applied to its
   base, resolved first; its id must be the one the index lists.  */
static void
resolve (struct real_pack *p, uint32_t pos, unsigned depth)
{
  struct real_object *o = &p->objects[pos];
  cleanup_free unsigned char *inflated = NULL;
  unsigned char id[SP_PACK_OID_SIZE];
  struct sp_pack_entry e;
  uLongf inflated_len;
  uint64_t end;
  uint32_t base;

  if (o->data != NULL)
    return;
  ck_assert_uint_lt (depth, 100);
  ck_assert (sp_pack_index_entry_end (&p->idx, o->offset, &end));
  ck_assert_uint_gt (end, o->offset);
  ck_assert_uint_le (end, p->pack_len - SP_PACK_TRAILER_SIZE);
  ck_assert_uint_eq (crc32 (0, p->pack + o->offset, (uInt)(end - o->offset)), o->crc);
  ck_assert_int_eq (sp_pack_entry_parse (p->pack + o->offset, (size_t)(end - o->offset), &e), 0);
  ck_assert_uint_lt (e.header_len, end - o->offset);
  inflated = malloc (e.size + 1);
  inflated_len = (uLongf)e.size;
  ck_assert_int_eq (uncompress (inflated, &inflated_len, p->pack + o->offset + e.header_len,
                                (uLong)(end - o->offset - e.header_len)),
                    Z_OK);
  ck_assert_uint_eq (inflated_len, e.size);
  if (e.type == SP_PACK_OFS_DELTA || e.type == SP_PACK_REF_DELTA)
    {
      if (e.type == SP_PACK_OFS_DELTA)
        {
          ck_assert_uint_le (e.base_dist, o->offset - SP_PACK_HEADER_SIZE);
          base = position_at (p, o->offset - e.base_dist);
          p->ofs_deltas++;
        }
      else
        {
          ck_assert (sp_pack_index_find (&p->idx, e.base_id, &base));
          p->ref_deltas++;
        }
      resolve (p, base, depth + 1);
      ck_assert_int_eq (sp_pack_delta_apply (p->objects[base].data, p->objects[base].len, inflated,
                                             inflated_len, FILE_MAX_BYTES, &o->data, &o->len),
                        0);
      o->type = p->objects[base].type;
    }
  else
    {
      o->type = e.type;
      o->data = inflated;
      o->len = inflated_len;
      inflated = NULL;
    }
  sp_pack_object_id (o->type, o->data, o->len, id);
  ck_assert_mem_eq (id, o->id, SP_PACK_OID_SIZE);
}

/* Every entry of the real pack resolves to the object its id names; the
   index sp_pack_index_write makes for the entries is git's, byte for byte,
   and `git verify-pack` accepts it beside a copy of the pack.  */
static void
check_real_pack (const char *repo, bool ref_deltas)
{
  struct real_pack p;
  cleanup_free struct sp_pack_item *items = NULL;
  cleanup_free unsigned char *git_idx = NULL;
  cleanup_free unsigned char *ours = NULL;
  char copy[PATH_MAX];
  size_t git_len, our_len;

  real_pack_open (&p, repo);
  ck_assert_uint_ge (p.n, 8);
  for (uint32_t i = 0; i < p.n; i++)
    resolve (&p, i, 0);
  if (ref_deltas)
    ck_assert_msg (p.ref_deltas > 0 && p.ofs_deltas == 0, "%u REF_DELTA, %u OFS_DELTA", p.ref_deltas,
                   p.ofs_deltas);
  else
    ck_assert_msg (p.ofs_deltas > 0 && p.ref_deltas == 0, "%u REF_DELTA, %u OFS_DELTA", p.ref_deltas,
                   p.ofs_deltas);

  items = calloc (p.n, sizeof (*items));
  ck_assert_ptr_nonnull (items);
  for (uint32_t i = 0; i < p.n; i++)
    {
      /* Reversed, so that the writer has the sorting to do.  */
      struct sp_pack_item *it = &items[p.n - 1 - i];

      memcpy (it->id.id, p.objects[i].id, SP_PACK_OID_SIZE);
      it->crc = p.objects[i].crc;
      it->new_offset = p.objects[i].offset;
    }
  ours = write_index (items, p.n, p.pack + p.pack_len - SP_PACK_TRAILER_SIZE, &our_len);
  git_idx = read_whole (p.idx_path, &git_len);
  ck_assert_uint_eq (our_len, git_len);
  ck_assert_mem_eq (ours, git_idx, git_len);

  snprintf (copy, sizeof (copy), "%s/ours", fx_dir);
  close (fx_mkdirs (fx_fd, "ours"));
  ck_assert_int_eq (fx_sh ("cp %s %s/pack-ours.pack", p.pack_path, copy), 0);
  write_at (fx_fd, "ours/pack-ours.idx", ours, our_len);
  ck_assert_int_eq (fx_sh ("git verify-pack %s/pack-ours.idx", copy), 0);
  real_pack_release (&p);
}

static void
setup (void)
{
  fx_setup ();
}

static void
teardown (void)
{
  fx_teardown ();
}

/* A repository with blobs git deltifies, trees, commits and a tag.  */
static void
make_repo (void)
{
  ck_assert_int_eq (
      fx_sh ("set -e; cd %s; git init -q -b main repo; cd repo; g='git -c user.name=t -c "
             "user.email=t@example.com';"
             " seq 1 400 > lines; printf 'hello\\n' > hello; git add .; $g commit -q -m one;"
             " seq 1 401 | sed 's/^200$/changed/' > lines; git add .; $g commit -q -m two;"
             " mkdir d; seq 5 300 > d/more; git add .; $g commit -q -m three; $g tag -a -m tag v1",
             fx_dir),
      0);
}

START_TEST (real_pack_with_ofs_deltas_reads_back_and_reindexes_as_git_does)
{
  make_repo ();
  ck_assert_int_eq (fx_sh ("cd %s/repo && git repack -a -d -f -q", fx_dir), 0);
  check_real_pack ("repo", false);
}
END_TEST

START_TEST (real_pack_with_ref_deltas_reads_back_and_reindexes_as_git_does)
{
  make_repo ();
  ck_assert_int_eq (fx_sh ("cd %s/repo && git -c repack.useDeltaBaseOffset=false repack -a -d -f -q", fx_dir),
                    0);
  check_real_pack ("repo", true);
}
END_TEST

/* `git show-index` reads the index written for the four items, the 64-bit
   offsets included.  */
START_TEST (written_index_with_64_bit_offsets_is_read_by_git_show_index)
{
  struct sp_pack_item items[FX_N];
  size_t len;
  cleanup_free unsigned char *b = fx_index (&len);
  cleanup_file FILE *f = NULL;
  char hex[2 * SP_PACK_OID_SIZE + 1], path[PATH_MAX];
  unsigned matched = 0;
  uint64_t offset;
  uint32_t crc;

  fx_items (items);
  write_at (fx_fd, "fx.idx", b, len);
  ck_assert_int_eq (fx_sh ("cd %s && git show-index < fx.idx > fx.txt", fx_dir), 0);
  snprintf (path, sizeof (path), "%s/fx.txt", fx_dir);
  f = fopen (path, "re");
  ck_assert_ptr_nonnull (f);
  while (fscanf (f, "%" SCNu64 " %40s (%" SCNx32 ")\n", &offset, hex, &crc) == 3)
    {
      unsigned char id[SP_PACK_OID_SIZE];

      bin_of (hex, id);
      for (size_t i = 0; i < FX_N; i++)
        if (memcmp (items[i].id.id, id, SP_PACK_OID_SIZE) == 0)
          {
            ck_assert_uint_eq (offset, items[i].new_offset);
            ck_assert_uint_eq (crc, items[i].crc);
            matched |= 1u << i;
          }
    }
  ck_assert_uint_eq (matched, (1u << FX_N) - 1);
}
END_TEST

/* ---- the suite ---- */

/* The names of the cases that need git, for their skips: keep in step with
   make_suite.  */
static const char *const git_cases[] = {
  "real_pack_with_ofs_deltas_reads_back_and_reindexes_as_git_does",
  "real_pack_with_ref_deltas_reads_back_and_reindexes_as_git_does",
  "written_index_with_64_bit_offsets_is_read_by_git_show_index",
};
#define N_GIT_CASES (sizeof (git_cases) / sizeof (*git_cases))

static Suite *
make_suite (bool with_git)
{
  Suite *s = suite_create ("seed_pack");
  TCase *tc = tcase_create ("pack");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, entry_header_round_trips_every_type_and_size);
  tcase_add_test (tc, entry_size_of_60_bits_or_more_is_refused_as_git_does);
  tcase_add_test (tc, entry_header_encodes_as_git_does);
  tcase_add_test (tc, ofs_distance_round_trips_and_encodes_as_git_does);
  tcase_add_test (tc, entry_parse_refuses_malformed_headers);
  tcase_add_test (tc, type_names_are_git_s_for_whole_objects_only);
  tcase_add_test (tc, object_id_is_git_s);
  tcase_add_test (tc, index_write_lays_out_git_s_version_2);
  tcase_add_test (tc, index_written_parses_back_with_find_offset_and_entry_end);
  tcase_add_test (tc, index_of_no_objects_parses_for_the_smallest_pack);
  tcase_add_test (tc, index_parse_refuses_another_magic_or_version);
  tcase_add_test (tc, index_parse_refuses_a_bad_fanout);
  tcase_add_test (tc, index_parse_refuses_ids_out_of_order_or_twice);
  tcase_add_test (tc, index_parse_refuses_a_length_that_does_not_add_up);
  tcase_add_test (tc, index_parse_refuses_an_offset_outside_the_pack);
  tcase_add_test (tc, index_parse_refuses_two_entries_at_one_offset);
  tcase_add_test (tc, index_parse_refuses_a_64_bit_offset_it_does_not_have);
  tcase_add_test (tc, index_parse_refuses_a_pack_too_short_to_be_one);
  tcase_add_test (tc, delta_copies_and_inserts);
  tcase_add_test (tc, delta_to_nothing_gives_an_empty_result);
  tcase_add_test (tc, delta_copy_of_size_0_copies_0x10000_bytes);
  tcase_add_test (tc, delta_apply_refuses_malformed_deltas);
  if (with_git)
    {
      tcase_add_test (tc, real_pack_with_ofs_deltas_reads_back_and_reindexes_as_git_does);
      tcase_add_test (tc, real_pack_with_ref_deltas_reads_back_and_reindexes_as_git_does);
      tcase_add_test (tc, written_index_with_64_bit_offsets_is_read_by_git_show_index);
    }
  suite_add_tcase (s, tc);
  return s;
}

/* Without git, its cases are TAP skips, each saying why.  check numbers its
   own results and prints its plan last, so the skips come first and check's
   lines, written to a file, are renumbered after them.  */
static int
run_skipping_git_cases (void)
{
  char path[] = "/tmp/sp-seed-pack-tap-XXXXXX";
  cleanup_close int fd = mkstemp (path);
  cleanup_file FILE *tap = NULL;
  SRunner *runner;
  char line[4096];
  int failed, num, used;

  if (fd < 0)
    return EXIT_FAILURE;
  runner = srunner_create (make_suite (false));
  srunner_set_tap (runner, path);
  srunner_run_all (runner, CK_SILENT);
  failed = srunner_ntests_failed (runner);
  srunner_free (runner);
  for (size_t i = 0; i < N_GIT_CASES; i++)
    printf ("ok %zu - %s # SKIP the git CLI, which makes and reads the real packs, is not installed\n", i + 1,
            git_cases[i]);
  tap = fopen (path, "re");
  unlink (path);
  if (tap == NULL)
    return EXIT_FAILURE;
  while (fgets (line, sizeof (line), tap) != NULL)
    {
      if (sscanf (line, "ok %d%n", &num, &used) == 1)
        printf ("ok %d%s", num + (int)N_GIT_CASES, line + used);
      else if (sscanf (line, "not ok %d%n", &num, &used) == 1)
        printf ("not ok %d%s", num + (int)N_GIT_CASES, line + used);
      else if (sscanf (line, "1..%d%n", &num, &used) == 1)
        printf ("1..%d%s", num + (int)N_GIT_CASES, line + used);
      else
        fputs (line, stdout);
    }
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int
main (void)
{
  if (!fx_have_git ())
    return run_skipping_git_cases ();
  return sp_check_run (make_suite (true));
}
