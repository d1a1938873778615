/* Normalization: see src/tree/normalize.h.  */
#define _GNU_SOURCE
#include "tree/normalize.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/quote.h"
#include "tree/walk.h"

static const struct timespec fixed_times[2] = {
  { .tv_sec = SP_ROOTFS_MTIME, .tv_nsec = 0 },
  { .tv_sec = SP_ROOTFS_MTIME, .tv_nsec = 0 },
};

const struct sp_normalize_policy sp_rootfs_policy = {
  .uid = 0,
  .gid = 0,
  .dir_mode = SP_ROOTFS_DIR_MODE,
  .file_mode = SP_ROOTFS_FILE_MODE,
  .exec_mode = SP_ROOTFS_EXEC_MODE,
};

const struct sp_normalize_policy sp_seed_policy = {
  .uid = SP_PROBE_UID,
  .gid = SP_PROBE_GID,
  .dir_mode = SP_SEED_DIR_MODE,
  .file_mode = SP_SEED_FILE_MODE,
  .exec_mode = SP_SEED_EXEC_MODE,
};

/* Only permission bits: never setuid, setgid or sticky.  */
#define PERM_MASK 0777

static int
normalize_one (int dirfd, const char *name, const char *path, const struct stat *st,
               const struct sp_normalize_policy *policy, sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];
  mode_t mode;

  /* chown first: it would clear setuid/setgid bits set before it anyway.  */
  if (fchownat (dirfd, name, policy->uid, policy->gid, AT_SYMLINK_NOFOLLOW) < 0)
    return sp_make_error (err, errno, "chown `%s` to %u:%u (this needs root)", sp_quote_name (path, q),
                          (unsigned)policy->uid, (unsigned)policy->gid);
  if (S_ISDIR (st->st_mode))
    mode = policy->dir_mode & PERM_MASK;
  else if (S_ISREG (st->st_mode))
    mode = ((st->st_mode & 0111) ? policy->exec_mode : policy->file_mode) & PERM_MASK;
  else if (S_ISLNK (st->st_mode))
    mode = 0;
  else
    return sp_make_error (err, 0, "`%s` is neither a directory, a regular file nor a symlink",
                          sp_quote_name (path, q));
  /* A symlink has no mode of its own; fchmodat would follow it.  */
  if (!S_ISLNK (st->st_mode) && fchmodat (dirfd, name, mode, 0) < 0)
    return sp_make_error (err, errno, "chmod `%s`", sp_quote_name (path, q));
  if (utimensat (dirfd, name, fixed_times, AT_SYMLINK_NOFOLLOW) < 0)
    return sp_make_error (err, errno, "set the times of `%s`", sp_quote_name (path, q));
  return 0;
}

struct normalize_walk
{
  const struct sp_normalize_policy *policy;
  sp_tree_tick_fn tick;
  void *tick_ctx;
};

static int
on_entry (int dirfd, const char *name, const char *path, const struct stat *st, enum sp_tree_walk_event event,
          void *ctx, sp_error_t *err)
{
  const struct normalize_walk *w = ctx;

  /* A directory waits until its children are done: deepest first.  */
  if (S_ISDIR (st->st_mode) != (event == SP_TREE_WALK_DIR_DONE))
    return 0;
  if (normalize_one (dirfd, name, path, st, w->policy, err) < 0)
    return -1;
  return w->tick != NULL ? w->tick (w->tick_ctx, S_ISREG (st->st_mode) ? (uint64_t)st->st_size : 0, err) : 0;
}

int
sp_tree_normalize (int rootfd, const struct sp_normalize_policy *policy, sp_error_t *err)
{
  return sp_tree_normalize_counted (rootfd, policy, NULL, NULL, err);
}

int
sp_tree_normalize_counted (int rootfd, const struct sp_normalize_policy *policy, sp_tree_tick_fn tick,
                           void *tick_ctx, sp_error_t *err)
{
  struct normalize_walk w = { .policy = policy, .tick = tick, .tick_ctx = tick_ctx };

  if (sp_tree_walk (rootfd, on_entry, &w, err) < 0)
    return -1;
  if (fchown (rootfd, policy->uid, policy->gid) < 0)
    return sp_make_error (err, errno, "chown the tree's root to %u:%u (this needs root)",
                          (unsigned)policy->uid, (unsigned)policy->gid);
  if (fchmod (rootfd, policy->dir_mode & PERM_MASK) < 0)
    return sp_make_error (err, errno, "chmod the tree's root");
  if (futimens (rootfd, fixed_times) < 0)
    return sp_make_error (err, errno, "set the times of the tree's root");
  return 0;
}

int
sp_rootfs_normalize (int rootfd, sp_error_t *err)
{
  return sp_tree_normalize (rootfd, &sp_rootfs_policy, err);
}
