/* The tree digest: see src/tree/digest.h.  The encoding is
   specified in docs/rootfs.md ("Digest encoding"); change both together.  */
#define _GNU_SOURCE
#include "tree/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "tree/walk.h"

/* Hashed first, so that a future encoding can never collide with this one.  */
#define TREE_DIGEST_MAGIC "sealed-probe tree digest 1\n"
#define READ_CHUNK        (64 * 1024)

static void
put_u32 (struct sp_sha256 *ctx, uint32_t v)
{
  uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
  sp_sha256_update (ctx, b, sizeof (b));
}

static void
put_u64 (struct sp_sha256 *ctx, uint64_t v)
{
  put_u32 (ctx, (uint32_t)(v >> 32));
  put_u32 (ctx, (uint32_t)v);
}

/* The SHA-256 of a regular file's bytes, which must be the st_size bytes
   that the walk saw.  */
static int
file_sha256 (int dirfd, const char *name, const char *path, const struct stat *st,
             uint8_t digest[SP_SHA256_BYTES], sp_error_t *err)
{
  cleanup_close int fd = -1;
  char q[SP_QUOTE_BUF_SIZE];
  struct sp_sha256 ctx;
  uint8_t buf[READ_CHUNK];
  struct stat opened;
  uint64_t total = 0;

  fd = TEMP_FAILURE_RETRY (openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", sp_quote_name (path, q));
  if (fstat (fd, &opened) < 0)
    return sp_make_error (err, errno, "stat `%s`", sp_quote_name (path, q));
  if (!S_ISREG (opened.st_mode) || opened.st_dev != st->st_dev || opened.st_ino != st->st_ino)
    return sp_make_error (err, 0, "`%s` changed during the digest", sp_quote_name (path, q));
  sp_sha256_init (&ctx);
  for (;;)
    {
      ssize_t n = TEMP_FAILURE_RETRY (read (fd, buf, sizeof (buf)));
      if (n < 0)
        return sp_make_error (err, errno, "read `%s`", sp_quote_name (path, q));
      if (n == 0)
        break;
      sp_sha256_update (&ctx, buf, (size_t)n);
      total += (uint64_t)n;
    }
  if (total != (uint64_t)st->st_size)
    return sp_make_error (err, 0, "`%s` changed size during the digest", sp_quote_name (path, q));
  sp_sha256_final (&ctx, digest);
  return 0;
}

/* One entry into the digest: its type, path, mode, owner, and its bytes'
   or link target's digest.  */
static int
digest_entry (int dirfd, const char *name, const char *path, const struct stat *st, struct sp_sha256 *ctx,
              sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];
  size_t path_len = strlen (path);
  uint8_t type;

  if (S_ISDIR (st->st_mode))
    type = 'd';
  else if (S_ISREG (st->st_mode))
    type = 'f';
  else if (S_ISLNK (st->st_mode))
    type = 'l';
  else
    return sp_make_error (err, 0, "`%s` is neither a directory, a regular file nor a symlink",
                          sp_quote_name (path, q));

  sp_sha256_update (ctx, &type, 1);
  put_u32 (ctx, (uint32_t)path_len);
  sp_sha256_update (ctx, path, path_len);
  put_u32 (ctx, (uint32_t)(st->st_mode & 07777));
  put_u32 (ctx, (uint32_t)st->st_uid);
  put_u32 (ctx, (uint32_t)st->st_gid);

  if (type == 'f')
    {
      uint8_t digest[SP_SHA256_BYTES];

      if (file_sha256 (dirfd, name, path, st, digest, err) < 0)
        return -1;
      put_u64 (ctx, (uint64_t)st->st_size);
      sp_sha256_update (ctx, digest, sizeof (digest));
    }
  else if (type == 'l')
    {
      char target[PATH_MAX];
      ssize_t n = readlinkat (dirfd, name, target, sizeof (target));

      if (n < 0)
        return sp_make_error (err, errno, "read the symlink `%s`", sp_quote_name (path, q));
      if ((size_t)n == sizeof (target))
        return sp_make_error (err, 0, "the symlink `%s` has a target longer than %d bytes",
                              sp_quote_name (path, q), PATH_MAX - 1);
      put_u64 (ctx, (uint64_t)n);
      sp_sha256_update (ctx, target, (size_t)n);
    }
  else
    put_u64 (ctx, 0);
  return 0;
}

struct digest_walk
{
  struct sp_sha256 sha;
  sp_tree_tick_fn tick;
  void *tick_ctx;
};

static int
on_entry (int dirfd, const char *name, const char *path, const struct stat *st, enum sp_tree_walk_event event,
          void *ctx_, sp_error_t *err)
{
  struct digest_walk *w = ctx_;

  if (event != SP_TREE_WALK_ENTRY)
    return 0;
  if (digest_entry (dirfd, name, path, st, &w->sha, err) < 0)
    return -1;
  return w->tick != NULL ? w->tick (w->tick_ctx, S_ISREG (st->st_mode) ? (uint64_t)st->st_size : 0, err) : 0;
}

int
sp_tree_digest (int dirfd, char out[SP_DIGEST_TEXT_SIZE], sp_error_t *err)
{
  return sp_tree_digest_counted (dirfd, out, NULL, NULL, err);
}

int
sp_tree_digest_counted (int dirfd, char out[SP_DIGEST_TEXT_SIZE], sp_tree_tick_fn tick, void *tick_ctx,
                        sp_error_t *err)
{
  struct digest_walk w = { .tick = tick, .tick_ctx = tick_ctx };
  uint8_t digest[SP_SHA256_BYTES];

  sp_sha256_init (&w.sha);
  sp_sha256_update (&w.sha, TREE_DIGEST_MAGIC, strlen (TREE_DIGEST_MAGIC));
  if (sp_tree_walk (dirfd, on_entry, &w, err) < 0)
    return sp_error_wrap (err, "digest the tree");
  sp_sha256_final (&w.sha, digest);
  sp_sha256_digest_text (digest, out);
  return 0;
}
