/* The safe tree copy: see src/tree/copy.h and
   docs/staging.md ("Local clones: the safe copy").  Every entry is opened
   relative to its parent's fd by a name read from that directory, O_NOFOLLOW,
   so no path is ever resolved through a link.  */
#define _GNU_SOURCE
#include "tree/copy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "os/dir_names.h"
#include "os/fileio.h"
#include "os/progress.h"

#define COPY_CHUNK (64 * 1024)

/* One name of a regular file with more than one link.  After the walk the
   names are sorted by (dev, ino, seq) and counted per file: sorting keeps a
   tree with many linked files O(n log n).  */
struct linked_name
{
  dev_t dev;
  ino_t ino;
  nlink_t nlink;
  size_t seq; /* walk order: the first name of a file is the one reported */
  char *path;
};

struct copy_ctx
{
  const struct sp_copy_options *limits;
  uid_t uid;
  gid_t gid;
  dev_t dev; /* the source tree's device: the copy never crosses a mount */
  uint64_t bytes;
  uint64_t entries;
  struct linked_name *linked;
  size_t linked_len;
  size_t linked_cap;
  char *buf; /* COPY_CHUNK bytes */
  char path[SP_TREE_PATH_MAX];
};

static void
copy_ctx_release (struct copy_ctx *ctx)
{
  for (size_t i = 0; i < ctx->linked_len; i++)
    free (ctx->linked[i].path);
  free (ctx->linked);
  free (ctx->buf);
}
#define cleanup_copy_ctx __attribute__ ((cleanup (copy_ctx_release)))

static const char *
shown (const char *path, char buf[SP_QUOTE_BUF_SIZE])
{
  return sp_quote_name (*path ? path : ".", buf);
}

/* Records one more name of a multiply linked file.  */
static int
note_link (struct copy_ctx *ctx, const struct stat *st, sp_error_t *err)
{
  struct linked_name *l;

  if (ctx->linked_len == ctx->linked_cap)
    {
      size_t cap = ctx->linked_cap ? ctx->linked_cap * 2 : 16;
      l = realloc (ctx->linked, cap * sizeof (*l));
      if (l == NULL)
        return sp_make_error (err, errno, "allocate the link table");
      ctx->linked = l;
      ctx->linked_cap = cap;
    }
  l = &ctx->linked[ctx->linked_len];
  l->path = strdup (ctx->path);
  if (l->path == NULL)
    return sp_make_error (err, errno, "allocate the link table");
  l->dev = st->st_dev;
  l->ino = st->st_ino;
  l->nlink = st->st_nlink;
  l->seq = ctx->linked_len;
  ctx->linked_len++;
  return 0;
}

static int
compare_linked (const void *a_, const void *b_)
{
  const struct linked_name *a = a_, *b = b_;

  if (a->dev != b->dev)
    return a->dev < b->dev ? -1 : 1;
  if (a->ino != b->ino)
    return a->ino < b->ino ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Gives an entry to uid:gid, then sets its permission bits without setuid,
   setgid or sticky, but a directory's sticky bit when the caller keeps it
   (chown first: it may clear bits, and chmod decides).  */
static int
set_owner_and_mode (int fd, const struct copy_ctx *ctx, mode_t mode, sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];
  mode_t sticky = ctx->limits->keep_sticky && S_ISDIR (mode) ? (mode & S_ISVTX) : 0;

  if (fchown (fd, ctx->uid, ctx->gid) < 0)
    return sp_make_error (err, errno, "chown `%s`", shown (ctx->path, q));
  if (fchmod (fd, (mode & 0777) | sticky | (ctx->limits->owner_writable ? S_IWUSR : 0)) < 0)
    return sp_make_error (err, errno, "chmod `%s`", shown (ctx->path, q));
  return 0;
}

static int
copy_file (int srcdir, int dstdir, const char *name, const struct stat *st, struct copy_ctx *ctx,
           sp_error_t *err)
{
  cleanup_close int in = -1;
  cleanup_close int out = -1;
  char q[SP_QUOTE_BUF_SIZE];
  struct stat opened;

  /* O_NONBLOCK: a FIFO swapped in after the lstat must not block the open.  */
  in = TEMP_FAILURE_RETRY (openat (srcdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (in < 0)
    return sp_make_error (err, errno, "open `%s`", shown (ctx->path, q));
  if (fstat (in, &opened) < 0)
    return sp_make_error (err, errno, "stat `%s`", shown (ctx->path, q));
  if (!S_ISREG (opened.st_mode) || opened.st_dev != st->st_dev || opened.st_ino != st->st_ino)
    return sp_make_error (err, 0, "`%s` changed during the copy", shown (ctx->path, q));
  if (opened.st_nlink > 1 && note_link (ctx, &opened, err) < 0)
    return -1;
  /* Sizes before bytes: the apparent size counts before anything is
     written, so an oversized or sparse file is refused at once and costs no
     disk.  The bytes read still count below, for a file that grows.  */
  if ((uint64_t)opened.st_size > ctx->limits->max_bytes - ctx->bytes)
    return sp_make_error (err, 0, "the tree holds more than %llu bytes of files (at `%s`, %lld bytes)",
                          (unsigned long long)ctx->limits->max_bytes, shown (ctx->path, q),
                          (long long)opened.st_size);

  out = TEMP_FAILURE_RETRY (
      openat (dstdir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out < 0)
    return sp_make_error (err, errno, "create `%s` in the copy", shown (ctx->path, q));
  for (;;)
    {
      ssize_t n = TEMP_FAILURE_RETRY (read (in, ctx->buf, COPY_CHUNK));

      if (n < 0)
        return sp_make_error (err, errno, "read `%s`", shown (ctx->path, q));
      if (n == 0)
        break;
      /* A big file is many blocks: an interrupted stage stops within one.  */
      if (sp_progress_check (ctx->limits->progress, err) < 0)
        return -1;
      if ((uint64_t)n > ctx->limits->max_bytes - ctx->bytes)
        return sp_make_error (err, 0, "the tree holds more than %llu bytes of files (at `%s`)",
                              (unsigned long long)ctx->limits->max_bytes, shown (ctx->path, q));
      ctx->bytes += (uint64_t)n;
      sp_progress_add (ctx->limits->progress, 0, (uint64_t)n);
      for (ssize_t done = 0; done < n;)
        {
          ssize_t w = TEMP_FAILURE_RETRY (write (out, ctx->buf + done, (size_t)(n - done)));
          if (w < 0)
            return sp_make_error (err, errno, "write `%s` in the copy", shown (ctx->path, q));
          done += w;
        }
    }
  sp_progress_add (ctx->limits->progress, 1, 0);
  return set_owner_and_mode (out, ctx, opened.st_mode, err);
}

static int
copy_symlink (int srcdir, int dstdir, const char *name, struct copy_ctx *ctx, sp_error_t *err)
{
  char target[SP_COPY_LINK_MAX];
  char q[SP_QUOTE_BUF_SIZE];
  ssize_t n = readlinkat (srcdir, name, target, sizeof (target));

  if (n < 0)
    return sp_make_error (err, errno, "read the symlink `%s`", shown (ctx->path, q));
  if ((size_t)n >= sizeof (target))
    return sp_make_error (err, 0, "the symlink `%s` has a target longer than %d bytes", shown (ctx->path, q),
                          SP_COPY_LINK_MAX - 1);
  target[n] = '\0';
  if (symlinkat (target, dstdir, name) < 0)
    return sp_make_error (err, errno, "create the symlink `%s` in the copy", shown (ctx->path, q));
  if (fchownat (dstdir, name, ctx->uid, ctx->gid, AT_SYMLINK_NOFOLLOW) < 0)
    return sp_make_error (err, errno, "chown `%s`", shown (ctx->path, q));
  sp_progress_add (ctx->limits->progress, 1, 0);
  return 0;
}

static int copy_dir (int srcdir, int dstdir, size_t path_len, unsigned depth, struct copy_ctx *ctx,
                     sp_error_t *err);

static int
copy_subdir (int srcdir, int dstdir, const char *name, const struct stat *st, size_t path_len, unsigned depth,
             struct copy_ctx *ctx, sp_error_t *err)
{
  cleanup_close int src = -1;
  cleanup_close int dst = -1;
  char q[SP_QUOTE_BUF_SIZE];
  struct stat opened;

  if (depth > ctx->limits->max_depth)
    return sp_make_error (err, 0, "`%s` is more than %u directories deep", shown (ctx->path, q),
                          ctx->limits->max_depth);
  src = TEMP_FAILURE_RETRY (openat (srcdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (src < 0)
    return sp_make_error (err, errno, "open `%s`", shown (ctx->path, q));
  if (fstat (src, &opened) < 0)
    return sp_make_error (err, errno, "stat `%s`", shown (ctx->path, q));
  if (opened.st_dev != st->st_dev || opened.st_ino != st->st_ino)
    return sp_make_error (err, 0, "`%s` changed during the copy", shown (ctx->path, q));
  /* Private until it is full; its own mode comes last, so that a read-only
     directory can still be filled.  */
  if (mkdirat (dstdir, name, 0700) < 0)
    return sp_make_error (err, errno, "create `%s` in the copy", shown (ctx->path, q));
  dst = TEMP_FAILURE_RETRY (openat (dstdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dst < 0)
    return sp_make_error (err, errno, "open `%s` in the copy", shown (ctx->path, q));
  if (copy_dir (src, dst, path_len, depth, ctx, err) < 0)
    return -1;
  ctx->path[path_len] = '\0';
  return set_owner_and_mode (dst, ctx, opened.st_mode, err);
}

/* Copies the children of srcdir; ctx->path holds srcdir's path (path_len
   bytes) and is restored on return.  depth is srcdir's level (top: 0).  */
static int
copy_dir (int srcdir, int dstdir, size_t path_len, unsigned depth, struct copy_ctx *ctx, sp_error_t *err)
{
  cleanup_dir_names struct sp_dir_names names = { 0 };
  char q[SP_QUOTE_BUF_SIZE];

  if (sp_dir_names_read (srcdir, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", shown (ctx->path, q));
  for (size_t i = 0; i < names.len; i++)
    {
      const char *name = names.v[i];
      ssize_t child_len = sp_dir_child_path (ctx->path, sizeof (ctx->path), path_len, name);
      struct stat st;
      int ret;

      if (child_len < 0)
        return sp_make_error (err, 0, "a path below `%s` is longer than %d bytes", shown (ctx->path, q),
                              SP_TREE_PATH_MAX - 1);
      /* Before any stat: what the caller leaves out is not even looked at.  */
      if (depth == 0 && ctx->limits->skip_top != NULL && strcmp (name, ctx->limits->skip_top) == 0)
        {
          ctx->path[path_len] = '\0';
          continue;
        }
      if (sp_progress_check (ctx->limits->progress, err) < 0)
        return -1;

      if (++ctx->entries > ctx->limits->max_entries)
        return sp_make_error (err, 0, "the tree holds more than %llu entries (at `%s`)",
                              (unsigned long long)ctx->limits->max_entries, shown (ctx->path, q));
      if (fstatat (srcdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_make_error (err, errno, "stat `%s`", shown (ctx->path, q));
      if (st.st_dev != ctx->dev)
        return sp_make_error (err, 0,
                              "`%s` is on another filesystem than the top of the tree (a mount point?)",
                              shown (ctx->path, q));

      if (S_ISDIR (st.st_mode))
        ret = copy_subdir (srcdir, dstdir, name, &st, (size_t)child_len, depth + 1, ctx, err);
      else if (S_ISREG (st.st_mode))
        ret = copy_file (srcdir, dstdir, name, &st, ctx, err);
      else if (S_ISLNK (st.st_mode))
        ret = copy_symlink (srcdir, dstdir, name, ctx, err);
      else
        ret = sp_make_error (err, 0, "`%s` is %s: only directories, regular files and symlinks are copied",
                             shown (ctx->path, q), sp_file_type_name (st.st_mode));
      if (ret < 0)
        return -1;
      ctx->path[path_len] = '\0';
    }
  return 0;
}

/* After the walk: a file with names the walk did not see has a name outside
   the tree, and copying it would copy content from outside.  */
static int
check_links (struct copy_ctx *ctx, sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];
  const struct linked_name *worst = NULL;
  size_t worst_seen = 0;

  if (ctx->linked_len > 1)
    qsort (ctx->linked, ctx->linked_len, sizeof (*ctx->linked), compare_linked);
  for (size_t i = 0, end; i < ctx->linked_len; i = end)
    {
      const struct linked_name *first = &ctx->linked[i];

      for (end = i + 1; end < ctx->linked_len; end++)
        if (ctx->linked[end].dev != first->dev || ctx->linked[end].ino != first->ino)
          break;
      /* Of all such files, report the one the walk met first.  */
      if (end - i < first->nlink && (worst == NULL || first->seq < worst->seq))
        {
          worst = first;
          worst_seen = end - i;
        }
    }
  if (worst != NULL)
    {
      sp_make_error (err, 0,
                     "`%s` is a hardlink with %llu names, only %llu of them inside the tree: "
                     "a file linked from outside is refused",
                     sp_quote_name (worst->path, q), (unsigned long long)worst->nlink,
                     (unsigned long long)worst_seen);
      /* EMLINK without its strerror: a caller that knows where the link
         comes from says what to do (git_stage.c: --no-hardlinks).  */
      if (*err != NULL)
        (*err)->status = EMLINK;
      return -1;
    }
  return 0;
}

int
sp_tree_copy (int src_dirfd, int dst_dirfd, const struct sp_copy_options *limits, uid_t uid, gid_t gid,
              sp_error_t *err)
{
  cleanup_copy_ctx struct copy_ctx ctx = { 0 };
  struct stat top;

  if (limits->max_depth > SP_COPY_DEPTH_CEILING)
    return sp_make_error (err, 0, "tree copy: a depth limit of %u is above the ceiling of %d",
                          limits->max_depth, SP_COPY_DEPTH_CEILING);
  if (fstat (src_dirfd, &top) < 0)
    return sp_make_error (err, errno, "stat the top of the tree");
  if (!S_ISDIR (top.st_mode))
    return sp_make_error (err, 0, "the top of the tree is not a directory");
  ctx.limits = limits;
  ctx.uid = uid;
  ctx.gid = gid;
  ctx.dev = top.st_dev;
  ctx.buf = malloc (COPY_CHUNK);
  if (ctx.buf == NULL)
    return sp_make_error (err, errno, "allocate the copy buffer");
  if (copy_dir (src_dirfd, dst_dirfd, 0, 0, &ctx, err) < 0)
    return -1;
  return check_links (&ctx, err);
}
