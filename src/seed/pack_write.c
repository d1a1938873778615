/* Writing the seed's pack: see pack_write.h.  Recomputing every delta, as a
   pack builder does, cost about 8x the CPU of `git clone` for a 500 MB
   history; the clone's entries are reused instead, as git's pack-objects
   reuses them, and only what cannot be reused is read and deflated.  */
#define _GNU_SOURCE
#include "seed/pack_write.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <nettle/sha1.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "base/quote.h"
#include "os/dir_names.h"
#include "os/fileio.h"

#include "seed/pack_check.h"
#include "seed/pack_index.h"

#define WRITE_BUF_SIZE (1024 * 1024)

/* One of the clone's packs.  */
struct source
{
  int fd;
  struct sp_pack_index idx;
  char name[SP_QUOTE_BUF_SIZE];
};

struct writer
{
  int fd; /* the new pack, as it is written */
  struct sha1_ctx sha1;
  unsigned char *buf;
  size_t used;
  uint64_t written;
  uint32_t crc; /* of the entry being written */
  struct sp_progress *progress;
  z_stream z;
  bool z_ready;
};

static int
git_fail (sp_error_t *err, const char *what)
{
  const git_error *e = git_error_last ();
  char q[SP_QUOTE_BUF_SIZE];

  return sp_make_error (err, 0, "%s: %s", what,
                        sp_quote_name (e && e->message ? e->message : "unknown libgit2 error", q));
}

/* ---- the clone's packs ---- */

static void
sources_release (struct source *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      if (s[i].fd >= 0)
        close (s[i].fd);
      sp_pack_index_release (&s[i].idx);
    }
  free (s);
}

static bool
is_pack_index_name (const char *name)
{
  size_t len = strlen (name);

  return len > 9 && strncmp (name, "pack-", 5) == 0 && strcmp (name + len - 4, ".idx") == 0;
}

static int
open_regular (int dirfd, const char *name, struct stat *st, sp_error_t *err)
{
  cleanup_close int fd = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  char q[SP_QUOTE_BUF_SIZE];

  if (fd < 0)
    return sp_make_error (err, errno, "open `.git/objects/pack/%s`", sp_quote_name (name, q));
  if (fstat (fd, st) < 0)
    return sp_make_error (err, errno, "stat `.git/objects/pack/%s`", sp_quote_name (name, q));
  if (!S_ISREG (st->st_mode))
    return sp_make_error (err, 0, "`.git/objects/pack/%s` is not a regular file", sp_quote_name (name, q));
  return get_and_reset_fd (&fd);
}

/* Opens pack-X.pack for pack-X.idx, and parses the index.  Returns 1, or 0
   for an index that is not version 2 (its objects are read and written
   whole: git has not written one since 2009).  */
static int
open_source (int packdirfd, const char *idx_name, struct source *s, sp_error_t *err)
{
  cleanup_close int idx_fd = -1;
  cleanup_free char *pack_name = NULL;
  unsigned char *bytes = NULL;
  unsigned char head[SP_PACK_HEADER_SIZE];
  struct stat idx_st, pack_st;
  size_t len = 0;

  sp_quote_name (idx_name, s->name);
  /* pack-X.idx names pack-X.pack: one byte longer.  */
  if (asprintf (&pack_name, "%.*s.pack", (int)(strlen (idx_name) - 4), idx_name) < 0)
    return sp_make_error (err, ENOMEM, "`%s`", s->name);
  idx_fd = open_regular (packdirfd, idx_name, &idx_st, err);
  if (idx_fd < 0)
    return -1;
  s->fd = open_regular (packdirfd, pack_name, &pack_st, err);
  if (s->fd < 0)
    return -1;
  if ((uint64_t)idx_st.st_size > SP_GIT_PACK_INDEX_MAX_BYTES)
    return sp_make_error (err, 0, "`.git/objects/pack/%s` is over %llu bytes", s->name,
                          (unsigned long long)SP_GIT_PACK_INDEX_MAX_BYTES);
  if (sp_read_fd_capped (idx_fd, SP_GIT_PACK_INDEX_MAX_BYTES, (char **)&bytes, &len, err) < 0)
    return sp_error_wrap (err, "read `.git/objects/pack/%s`", s->name);
  if (len >= 8 && memcmp (bytes, "\377tOc", 4) != 0)
    {
      free (bytes);
      return 0;
    }
  if (sp_pack_index_parse (bytes, len, (uint64_t)pack_st.st_size, &s->idx, err) < 0)
    return sp_error_wrap (err, "`.git/objects/pack/%s`", s->name);
  if (pread (s->fd, head, sizeof (head), 0) != (ssize_t)sizeof (head) || memcmp (head, "PACK", 4) != 0
      || (head[7] != 2 && head[7] != 3) || head[4] || head[5] || head[6]
      || ((uint32_t)head[8] << 24 | (uint32_t)head[9] << 16 | (uint32_t)head[10] << 8 | head[11])
             != s->idx.count)
    return sp_make_error (err, 0,
                          "`.git/objects/pack/%s`: its pack is not a version 2 pack of its %u objects",
                          s->name, s->idx.count);
  return 1;
}

static int
open_sources (int gitfd, struct source **out, size_t *n_out, sp_error_t *err)
{
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_close int packdirfd
      = openat (gitfd, "objects/pack", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct source *s = NULL;
  size_t n = 0;

  *out = NULL;
  *n_out = 0;
  if (packdirfd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open `.git/objects/pack`");
  if (sp_dir_names_read (packdirfd, &names, err) < 0) /* sorted: the same packs, the same choices */
    return sp_error_wrap (err, "list `.git/objects/pack`");
  s = calloc (names.len ? names.len : 1, sizeof (*s));
  if (s == NULL)
    return sp_make_error (err, ENOMEM, "list `.git/objects/pack`");
  for (size_t i = 0; i < names.len; i++)
    {
      int ret;

      if (!is_pack_index_name (names.v[i]))
        continue;
      s[n].fd = -1;
      ret = open_source (packdirfd, names.v[i], &s[n], err);
      if (ret < 0)
        {
          sources_release (s, n + 1);
          return -1;
        }
      if (ret == 0)
        {
          close (s[n].fd);
          s[n].fd = -1;
          continue;
        }
      n++;
    }
  *out = s;
  *n_out = n;
  return 0;
}

/* ---- what to write, and how ---- */

static int
compare_items (const void *a, const void *b)
{
  const struct sp_pack_item *x = a, *y = b;

  if (x->source != y->source)
    return x->source < y->source ? -1 : 1;
  if (x->source != NO_SOURCE)
    return x->offset < y->offset ? -1 : x->offset > y->offset;
  return git_oid_cmp (&x->id, &y->id);
}

/* The item at (source, offset), among the sorted items.  */
static uint32_t
find_item (const struct sp_pack_item *items, size_t n, uint32_t source, uint64_t offset)
{
  size_t lo = 0, hi = n;

  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      const struct sp_pack_item *m = &items[mid];

      if (m->source == source && m->offset == offset)
        return (uint32_t)mid;
      if (m->source < source || (m->source == source && m->offset < offset))
        lo = mid + 1;
      else
        hi = mid;
    }
  return NO_ITEM;
}

/* Decides, from the entry's header, whether the item is copied or written
   whole.  A delta is kept only when its base is written before it (earlier
   in the same pack, and one of the objects to keep); anything else is read
   whole, so no base outside the kept set is ever needed.  */
static int
plan_item (const struct source *sources, struct sp_pack_item *items, size_t n, size_t i, sp_error_t *err)
{
  struct sp_pack_item *it = &items[i];
  const struct source *s = &sources[it->source];
  unsigned char head[SP_PACK_ENTRY_HEADER_MAX];
  struct sp_pack_entry e;
  uint32_t pos;
  ssize_t got;

  if (!sp_pack_index_entry_end (&s->idx, it->offset, &it->end))
    return sp_make_error (err, 0, "`.git/objects/pack/%s`: an entry has no end", s->name);
  got = pread (s->fd, head, sizeof (head), (off_t)it->offset);
  if (got < 0)
    return sp_make_error (err, errno, "read `.git/objects/pack/%s`", s->name);
  if ((uint64_t)got > it->end - it->offset)
    got = (ssize_t)(it->end - it->offset);
  if (sp_pack_entry_parse (head, (size_t)got, &e) < 0 || e.header_len >= it->end - it->offset)
    return sp_make_error (err, 0, "`.git/objects/pack/%s`: a malformed entry at offset %llu", s->name,
                          (unsigned long long)it->offset);
  it->kind = ITEM_RAW;
  it->new_type = (uint8_t)e.type;
  it->size_len = (uint8_t)e.size_len;
  it->header_len = (uint8_t)e.header_len;
  if (e.type == SP_PACK_OFS_DELTA)
    {
      it->base
          = e.base_dist <= it->offset ? find_item (items, n, it->source, it->offset - e.base_dist) : NO_ITEM;
      it->kind = it->base != NO_ITEM ? ITEM_OFS_DELTA : ITEM_WHOLE;
    }
  else if (e.type == SP_PACK_REF_DELTA)
    {
      bool base_before = sp_pack_index_find (&s->idx, e.base_id, &pos)
                         && sp_pack_index_offset (&s->idx, pos) < it->offset
                         && find_item (items, n, it->source, sp_pack_index_offset (&s->idx, pos)) != NO_ITEM;

      it->base
          = base_before ? find_item (items, n, it->source, sp_pack_index_offset (&s->idx, pos)) : NO_ITEM;
      it->kind = base_before ? ITEM_RAW : ITEM_WHOLE;
    }
  return 0;
}

/* Finds each item in the first pack that has it, sorts the items into the
   new pack's order (by pack and offset, so a base comes before its deltas;
   then loose objects by id), and decides how each is written.  */
static int
plan (const struct source *sources, size_t n_sources, struct sp_pack_item *items, size_t n, sp_error_t *err)
{
  for (size_t i = 0; i < n; i++)
    {
      items[i].source = NO_SOURCE;
      items[i].kind = ITEM_WHOLE;
      items[i].base = NO_ITEM;
      for (size_t s = 0; s < n_sources; s++)
        {
          uint32_t pos;

          if (sp_pack_index_find (&sources[s].idx, items[i].id.id, &pos))
            {
              items[i].source = (uint32_t)s;
              items[i].offset = sp_pack_index_offset (&sources[s].idx, pos);
              break;
            }
        }
    }
  qsort (items, n, sizeof (*items), compare_items);
  for (size_t i = 0; i < n && items[i].source != NO_SOURCE; i++)
    if (plan_item (sources, items, n, i, err) < 0)
      return -1;
  return 0;
}

/* ---- the output: hashed for the trailer, each entry's CRC for the index ---- */

static int
flush (struct writer *w, sp_error_t *err)
{
  if (w->used == 0)
    return 0;
  sha1_update (&w->sha1, w->used, w->buf);
  if (sp_write_all (w->fd, w->buf, w->used, err) < 0)
    return sp_error_wrap (err, "write the new pack");
  w->written += w->used;
  w->used = 0;
  return 0;
}

static int
emit (struct writer *w, const void *data, size_t len, sp_error_t *err)
{
  const unsigned char *p = data;

  w->crc = (uint32_t)crc32 (w->crc, p, (uInt)len);
  while (len > 0)
    {
      size_t room = WRITE_BUF_SIZE - w->used;
      size_t take = len < room ? len : room;

      memcpy (w->buf + w->used, p, take);
      w->used += take;
      p += take;
      len -= take;
      if (w->used == WRITE_BUF_SIZE && flush (w, err) < 0)
        return -1;
    }
  return 0;
}

static uint64_t
position (const struct writer *w)
{
  return w->written + w->used;
}

/* Copies [from, to) of the source pack.  */
static int
emit_range (struct writer *w, const struct source *s, uint64_t from, uint64_t to, sp_error_t *err)
{
  while (from < to)
    {
      size_t room = WRITE_BUF_SIZE - w->used;
      size_t take = to - from < room ? (size_t)(to - from) : room;
      ssize_t got = pread (s->fd, w->buf + w->used, take, (off_t)from);

      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0)
        return sp_make_error (err, errno, "read `.git/objects/pack/%s`", s->name);
      if (got == 0)
        return sp_make_error (err, 0, "`.git/objects/pack/%s` is shorter than its index says", s->name);
      w->crc = (uint32_t)crc32 (w->crc, w->buf + w->used, (uInt)got);
      w->used += (size_t)got;
      from += (uint64_t)got;
      if (w->used == WRITE_BUF_SIZE && flush (w, err) < 0)
        return -1;
    }
  return 0;
}

static int
deflate_into (struct writer *w, const void *data, size_t len, sp_error_t *err)
{
  int ret;

  if (!w->z_ready)
    {
      if (deflateInit (&w->z, Z_DEFAULT_COMPRESSION) != Z_OK)
        return sp_make_error (err, 0, "zlib: deflateInit");
      w->z_ready = true;
    }
  else if (deflateReset (&w->z) != Z_OK)
    return sp_make_error (err, 0, "zlib: deflateReset");
  w->z.next_in = (unsigned char *)data;
  w->z.avail_in = 0;
  do
    {
      size_t before;

      /* avail_in is 32 bits: feed a blob over 4 GiB in slices.  */
      if (w->z.avail_in == 0 && len > 0)
        {
          w->z.avail_in = len > UINT32_MAX ? UINT32_MAX : (uInt)len;
          len -= w->z.avail_in;
        }
      if (w->used == WRITE_BUF_SIZE && flush (w, err) < 0)
        return -1;
      before = w->used;
      w->z.next_out = w->buf + w->used;
      w->z.avail_out = (uInt)(WRITE_BUF_SIZE - w->used);
      ret = deflate (&w->z, len > 0 ? Z_NO_FLUSH : Z_FINISH);
      if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR)
        return sp_make_error (err, 0, "zlib: deflate failed");
      w->used = WRITE_BUF_SIZE - w->z.avail_out;
      w->crc = (uint32_t)crc32 (w->crc, w->buf + before, (uInt)(w->used - before));
    }
  while (ret != Z_STREAM_END);
  return 0;
}

static int
emit_whole (struct writer *w, git_odb *odb, struct sp_pack_item *it, sp_error_t *err)
{
  git_odb_object *obj = NULL;
  unsigned char head[10], id[SP_PACK_OID_SIZE];
  git_object_t type;
  size_t len;
  int ret;

  if (git_odb_read (&obj, odb, &it->id) < 0)
    {
      char hex[GIT_OID_HEXSZ + 1];

      git_oid_tostr (hex, sizeof (hex), &it->id);
      return git_fail (err, hex);
    }
  type = git_odb_object_type (obj);
  if (type < GIT_OBJECT_COMMIT || type > GIT_OBJECT_TAG)
    {
      git_odb_object_free (obj);
      return sp_make_error (err, 0, "an object of unknown type");
    }
  /* git's object types and the pack's agree, 1 to 4.  */
  it->new_type = (uint8_t)type;
  sp_pack_object_id (type, git_odb_object_data (obj), git_odb_object_size (obj), id);
  len = sp_pack_encode_header ((enum sp_pack_type)type, git_odb_object_size (obj), head);
  it->new_header_len = (uint8_t)len;
  ret = memcmp (id, it->id.id, sizeof (id)) != 0
            ? sp_make_error (err, 0, "an object read from the clone is not the object its id names")
        : emit (w, head, len, err) < 0
            ? -1
            : deflate_into (w, git_odb_object_data (obj), git_odb_object_size (obj), err);
  git_odb_object_free (obj);
  return ret;
}

static int
emit_item (struct writer *w, const struct source *sources, git_odb *odb, struct sp_pack_item *items, size_t i,
           sp_error_t *err)
{
  struct sp_pack_item *it = &items[i];
  const struct source *s = it->source == NO_SOURCE ? NULL : &sources[it->source];
  unsigned char ofs[10];
  size_t ofs_len;

  it->new_offset = position (w);
  w->crc = (uint32_t)crc32 (0, NULL, 0);
  switch (it->kind)
    {
    case ITEM_RAW:
      it->new_header_len = it->header_len;
      if (emit_range (w, s, it->offset, it->end, err) < 0)
        return -1;
      break;
    case ITEM_OFS_DELTA:
      ofs_len = sp_pack_encode_ofs (it->new_offset - items[it->base].new_offset, ofs);
      it->new_header_len = (uint8_t)(it->size_len + ofs_len);
      if (emit_range (w, s, it->offset, it->offset + it->size_len, err) < 0 || emit (w, ofs, ofs_len, err) < 0
          || emit_range (w, s, it->offset + it->header_len, it->end, err) < 0)
        return -1;
      break;
    default:
      it->base = NO_ITEM;
      if (emit_whole (w, odb, it, err) < 0)
        return -1;
      break;
    }
  it->crc = w->crc;
  return 0;
}

static int
write_items (struct writer *w, const struct source *sources, git_odb *odb, struct sp_pack_item *items,
             size_t n, unsigned char trailer[SP_PACK_OID_SIZE], sp_error_t *err)
{
  unsigned char head[SP_PACK_HEADER_SIZE] = { 'P', 'A', 'C', 'K', 0, 0, 0, 2 };

  head[8] = (unsigned char)(n >> 24);
  head[9] = (unsigned char)(n >> 16);
  head[10] = (unsigned char)(n >> 8);
  head[11] = (unsigned char)n;
  if (emit (w, head, sizeof (head), err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    {
      if (sp_progress_check (w->progress, err) < 0 || emit_item (w, sources, odb, items, i, err) < 0)
        return -1;
      sp_progress_add (w->progress, 1, 0);
    }
  if (flush (w, err) < 0)
    return -1;
  sha1_digest (&w->sha1, SP_PACK_OID_SIZE, trailer);
  if (sp_write_all (w->fd, trailer, SP_PACK_OID_SIZE, err) < 0)
    return sp_error_wrap (err, "write the new pack");
  return 0;
}

/* ---- the whole ---- */

#define TMP_PACK  "tmp-sp.pack"
#define TMP_INDEX "tmp-sp.idx"

static void
writer_release (struct writer *w)
{
  free (w->buf);
  if (w->z_ready)
    deflateEnd (&w->z);
}
#define cleanup_writer __attribute__ ((cleanup (writer_release)))

static int
write_and_check (int gitfd, git_odb *odb, struct sp_pack_item *items, size_t n, int pack_fd,
                 unsigned char trailer[SP_PACK_OID_SIZE], struct sp_progress *progress, sp_error_t *err)
{
  cleanup_writer struct writer w = { .fd = pack_fd, .progress = progress };
  struct source *sources = NULL;
  size_t n_sources = 0;
  int ret;

  w.buf = malloc (WRITE_BUF_SIZE);
  if (w.buf == NULL)
    return sp_make_error (err, ENOMEM, "write the pack");
  sha1_init (&w.sha1);
  if (open_sources (gitfd, &sources, &n_sources, err) < 0)
    return -1;
  ret = plan (sources, n_sources, items, n, err);
  if (ret == 0)
    {
      sp_progress_phase (progress, "write the pack", SP_PROGRESS_OBJECTS, n);
      ret = write_items (&w, sources, odb, items, n, trailer, err);
    }
  sources_release (sources, n_sources);
  if (ret < 0)
    return -1;
  return sp_pack_check (pack_fd, items, n, position (&w), progress, err);
}

int
sp_pack_write (int gitfd, int dest_dirfd, git_odb *odb, struct sp_pack_item *items, size_t n,
               struct sp_progress *progress, sp_error_t *err)
{
  cleanup_close int pack_fd = -1, index_fd = -1;
  unsigned char trailer[SP_PACK_OID_SIZE];
  char hex[2 * SP_PACK_OID_SIZE + 1];
  char name[2 * SP_PACK_OID_SIZE + 16];

  if (n > UINT32_MAX - 1)
    return sp_make_error (err, 0, "%zu objects are more than one pack holds", n);
  pack_fd = openat (dest_dirfd, TMP_PACK, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (pack_fd < 0)
    return sp_make_error (err, errno, "create the new pack");
  if (write_and_check (gitfd, odb, items, n, pack_fd, trailer, progress, err) < 0)
    return -1;
  index_fd = openat (dest_dirfd, TMP_INDEX, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (index_fd < 0)
    return sp_make_error (err, errno, "create the new pack's index");
  if (sp_pack_index_write (index_fd, items, n, trailer, err) < 0)
    return -1;
  for (size_t i = 0; i < SP_PACK_OID_SIZE; i++)
    snprintf (hex + 2 * i, 3, "%02x", trailer[i]);
  snprintf (name, sizeof (name), "pack-%s.pack", hex);
  if (renameat (dest_dirfd, TMP_PACK, dest_dirfd, name) < 0)
    return sp_make_error (err, errno, "name the new pack");
  snprintf (name, sizeof (name), "pack-%s.idx", hex);
  if (renameat (dest_dirfd, TMP_INDEX, dest_dirfd, name) < 0)
    return sp_make_error (err, errno, "name the new pack's index");
  return 0;
}
