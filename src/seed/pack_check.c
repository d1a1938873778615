/* Checking the seed's pack: see pack_check.h.  Like git's index-pack, each
   object is inflated from the new pack and hashed, and a delta is resolved
   from its base's bytes while they are at hand, so no chain is ever walked
   twice (libgit2's indexer rebuilds each chain from its start, which cost 35
   s of a 500 MB history's 73).  */
#define _GNU_SOURCE
#include "seed/pack_check.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/bounds.h"
#include "base/cleanup.h"

#include "seed/pack_index.h"

/* ---- every object of the new pack, read back and hashed ---- */

/* What the check shares: the new pack, and which delta rests on which base.
   Each base and the deltas on it are one piece of work; threads take the
   next one as they finish one.  */
struct checker
{
  int fd;
  const struct sp_pack_item *items;
  size_t n;
  uint64_t pack_end;     /* where the trailer starts */
  uint32_t *first_child; /* n + 1: children of i are child[first_child[i] .. first_child[i + 1]) */
  uint32_t *child;
  uint32_t *roots; /* the items that are no delta */
  size_t n_roots;
  size_t next_root;             /* atomic */
  size_t checked;               /* atomic */
  int failed;                   /* atomic */
  struct sp_progress *progress; /* drawn by the calling thread only */
};

struct check_worker
{
  struct checker *c;
  bool reports; /* the calling thread: it draws the progress */
  sp_error_t err;
  z_stream z;
  bool z_ready;
  unsigned char *packed; /* compressed bytes of the entry being read */
  size_t packed_cap;
};

/* Inflates item i's entry, which must end exactly where the next begins and
   hold exactly the size its header gives.  */
static int
inflate_item (struct check_worker *w, size_t i, uint64_t size, unsigned char **out, sp_error_t *err)
{
  const struct checker *c = w->c;
  const struct sp_pack_item *it = &c->items[i];
  uint64_t from = it->new_offset + it->new_header_len;
  uint64_t to = i + 1 < c->n ? c->items[i + 1].new_offset : c->pack_end;
  size_t len = (size_t)(to - from);
  int ret;

  *out = NULL;
  if (to <= from || size > SP_SEED_MAX_BYTES || len > UINT32_MAX)
    return sp_make_error (err, 0, "the new pack's entry at %llu is malformed",
                          (unsigned long long)it->new_offset);
  if (len > w->packed_cap)
    {
      free (w->packed);
      w->packed = malloc (len);
      w->packed_cap = w->packed ? len : 0;
      if (w->packed == NULL)
        return sp_make_error (err, ENOMEM, "check the new pack");
    }
  if (pread (c->fd, w->packed, len, (off_t)from) != (ssize_t)len)
    return sp_make_error (err, errno, "read the new pack back");
  *out = malloc (size ? (size_t)size : 1);
  if (*out == NULL)
    return sp_make_error (err, ENOMEM, "check the new pack");
  if (!w->z_ready)
    {
      if (inflateInit (&w->z) != Z_OK)
        return sp_make_error (err, 0, "zlib: inflateInit");
      w->z_ready = true;
    }
  else if (inflateReset (&w->z) != Z_OK)
    return sp_make_error (err, 0, "zlib: inflateReset");
  w->z.next_in = w->packed;
  w->z.avail_in = (uInt)len;
  w->z.next_out = *out;
  w->z.avail_out = (uInt)size;
  ret = inflate (&w->z, Z_FINISH);
  if (ret != Z_STREAM_END || w->z.avail_in != 0 || w->z.total_out != size)
    return sp_make_error (err, 0,
                          "an entry of the clone's pack does not inflate to its size, or does not end "
                          "where the next begins");
  return 0;
}

static int
check_id (struct check_worker *w, size_t i, unsigned type, const unsigned char *data, size_t len,
          sp_error_t *err)
{
  unsigned char id[SP_PACK_OID_SIZE];
  char hex[GIT_OID_HEXSZ + 1];

  sp_pack_object_id (type, data, len, id);
  if (memcmp (id, w->c->items[i].id.id, sizeof (id)) != 0)
    return sp_make_error (err, 0, "the clone's pack entry for %s holds another object",
                          git_oid_tostr (hex, sizeof (hex), &w->c->items[i].id));
  __atomic_add_fetch (&w->c->checked, 1, __ATOMIC_RELAXED);
  return 0;
}

static int
read_entry_header (const struct checker *c, size_t i, struct sp_pack_entry *e, sp_error_t *err)
{
  const struct sp_pack_item *it = &c->items[i];
  unsigned char head[SP_PACK_ENTRY_HEADER_MAX];

  if (pread (c->fd, head, it->new_header_len, (off_t)it->new_offset) != it->new_header_len
      || sp_pack_entry_parse (head, it->new_header_len, e) < 0)
    return sp_make_error (err, 0, "the new pack's entry at %llu is malformed",
                          (unsigned long long)it->new_offset);
  return 0;
}

/* One level of the walk down a base's deltas.  */
struct frame
{
  size_t item;
  unsigned char *data;
  size_t len;
  uint32_t next; /* the next child to resolve */
};

static bool
stopping (const struct checker *c)
{
  return __atomic_load_n (&c->failed, __ATOMIC_RELAXED) || sp_progress_stopped (c->progress);
}

/* Resolves one delta on the base in f.  *result is the delta's object, for
   the deltas on it.  */
static int
check_delta (struct check_worker *w, const struct frame *f, size_t child, unsigned type,
             unsigned char **result, size_t *result_len, sp_error_t *err)
{
  cleanup_free unsigned char *delta = NULL;
  struct sp_pack_entry e;

  if (read_entry_header (w->c, child, &e, err) < 0 || inflate_item (w, child, e.size, &delta, err) < 0)
    return -1;
  if (sp_pack_delta_apply (f->data, f->len, delta, (size_t)e.size, SP_SEED_MAX_BYTES, result, result_len) < 0)
    return sp_make_error (err, 0, "a delta in the clone's pack is malformed");
  return check_id (w, child, type, *result, *result_len, err);
}

/* Every delta that rests on root, and on those, depth first: a base's bytes
   are kept only while deltas on it are still to resolve.  */
static int
check_tree_of (struct check_worker *w, size_t root, unsigned type, unsigned char *root_data, size_t root_len,
               sp_error_t *err)
{
  const struct checker *c = w->c;
  cleanup_free struct frame *stack = malloc (SP_GIT_DELTA_DEPTH_MAX * sizeof (*stack));
  size_t depth = 0;
  int ret = 0;

  if (stack == NULL)
    {
      free (root_data);
      return sp_make_error (err, ENOMEM, "check the new pack");
    }
  stack[depth++] = (struct frame){ root, root_data, root_len, c->first_child[root] };
  while (depth > 0 && ret == 0)
    {
      struct frame *f = &stack[depth - 1];
      unsigned char *result = NULL;
      size_t result_len = 0;
      size_t child;

      if (f->next == c->first_child[f->item + 1])
        {
          free (f->data);
          depth--;
          continue;
        }
      child = c->child[f->next++];
      if (sp_progress_check (c->progress, err) < 0
          || check_delta (w, f, child, type, &result, &result_len, err) < 0)
        ret = -1;
      else if (c->first_child[child] == c->first_child[child + 1])
        ;
      else if (depth == SP_GIT_DELTA_DEPTH_MAX)
        ret = sp_make_error (err, 0, "a delta chain in the clone is more than %d deep",
                             SP_GIT_DELTA_DEPTH_MAX);
      else
        {
          stack[depth++] = (struct frame){ child, result, result_len, c->first_child[child] };
          result = NULL;
        }
      free (result);
    }
  while (depth > 0)
    free (stack[--depth].data);
  return ret;
}

static int
check_root (struct check_worker *w, size_t i, sp_error_t *err)
{
  unsigned char *data = NULL;
  struct sp_pack_entry e;

  if (read_entry_header (w->c, i, &e, err) < 0)
    return -1;
  if (sp_pack_type_name (e.type) == NULL)
    return sp_make_error (err, 0, "the new pack's entry at %llu is not an object",
                          (unsigned long long)w->c->items[i].new_offset);
  if (inflate_item (w, i, e.size, &data, err) < 0 || check_id (w, i, e.type, data, (size_t)e.size, err) < 0)
    {
      free (data);
      return -1;
    }
  return check_tree_of (w, i, e.type, data, (size_t)e.size, err);
}

static void *
check_worker_run (void *arg)
{
  struct check_worker *w = arg;
  struct checker *c = w->c;

  while (!stopping (c))
    {
      size_t r = __atomic_fetch_add (&c->next_root, 1, __ATOMIC_RELAXED);

      if (r >= c->n_roots)
        break;
      if (check_root (w, c->roots[r], &w->err) < 0)
        {
          __atomic_store_n (&c->failed, 1, __ATOMIC_RELAXED);
          break;
        }
      if (w->reports)
        sp_progress_set (c->progress, __atomic_load_n (&c->checked, __ATOMIC_RELAXED), 0, c->n);
    }
  return NULL;
}

static void
check_worker_release (struct check_worker *w)
{
  sp_error_cleanup (&w->err);
  free (w->packed);
  if (w->z_ready)
    inflateEnd (&w->z);
}

static int
build_children (struct checker *c, sp_error_t *err)
{
  c->first_child = calloc (c->n + 1, sizeof (*c->first_child));
  c->child = malloc ((c->n ? c->n : 1) * sizeof (*c->child));
  c->roots = malloc ((c->n ? c->n : 1) * sizeof (*c->roots));
  if (c->first_child == NULL || c->child == NULL || c->roots == NULL)
    return sp_make_error (err, ENOMEM, "check the new pack");
  for (size_t i = 0; i < c->n; i++)
    if (c->items[i].base != NO_ITEM)
      c->first_child[c->items[i].base + 1]++;
    else
      c->roots[c->n_roots++] = (uint32_t)i;
  for (size_t i = 0; i < c->n; i++)
    c->first_child[i + 1] += c->first_child[i];
  /* Filling moves each base's start up to the next one's; shift back.  */
  for (size_t i = 0; i < c->n; i++)
    if (c->items[i].base != NO_ITEM)
      c->child[c->first_child[c->items[i].base]++] = (uint32_t)i;
  memmove (c->first_child + 1, c->first_child, c->n * sizeof (*c->first_child));
  c->first_child[0] = 0;
  return 0;
}

static unsigned
check_threads (void)
{
  long cpus = sysconf (_SC_NPROCESSORS_ONLN);

  return cpus < 1 ? 1 : cpus > SP_GIT_CHECK_THREADS_MAX ? SP_GIT_CHECK_THREADS_MAX : (unsigned)cpus;
}

static int
check_pack (struct checker *c, sp_error_t *err)
{
  struct check_worker workers[SP_GIT_CHECK_THREADS_MAX] = { 0 };
  pthread_t threads[SP_GIT_CHECK_THREADS_MAX];
  unsigned n_threads = check_threads (), started = 1;
  int ret = 0;

  if (build_children (c, err) < 0)
    return -1;
  sp_progress_phase (c->progress, "check the pack", SP_PROGRESS_OBJECTS, c->n);
  for (unsigned t = 0; t < n_threads; t++)
    workers[t] = (struct check_worker){ .c = c, .reports = t == 0 };
  for (; started < n_threads; started++)
    if (pthread_create (&threads[started], NULL, check_worker_run, &workers[started]) != 0)
      break; /* fewer threads: the work is the same */
  check_worker_run (&workers[0]);
  for (unsigned t = 1; t < started; t++)
    pthread_join (threads[t], NULL);
  for (unsigned t = 0; t < n_threads; t++)
    {
      if (workers[t].err != NULL && ret == 0)
        {
          *err = workers[t].err;
          workers[t].err = NULL;
          ret = -1;
        }
      check_worker_release (&workers[t]);
    }
  if (ret < 0 || sp_progress_check (c->progress, err) < 0)
    return -1;
  sp_progress_set (c->progress, c->checked, 0, c->n);
  if (c->checked != c->n)
    return sp_make_error (err, 0, "%zu of the new pack's %zu objects rest on no base", c->n - c->checked,
                          c->n);
  return 0;
}

static void
checker_release (struct checker *c)
{
  free (c->first_child);
  free (c->child);
  free (c->roots);
}
#define cleanup_checker __attribute__ ((cleanup (checker_release)))

int
sp_pack_check (int fd, const struct sp_pack_item *items, size_t n, uint64_t pack_end,
               struct sp_progress *progress, sp_error_t *err)
{
  cleanup_checker struct checker c
      = { .fd = fd, .items = items, .n = n, .pack_end = pack_end, .progress = progress };

  return check_pack (&c, err);
}
