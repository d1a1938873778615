/* The tree walk: see src/tree/walk.h.  */
#define _GNU_SOURCE
#include "tree/walk.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "os/dir_names.h"

static int
walk_dir (int dirfd, char *path, size_t path_len, int depth, sp_tree_walk_fn fn, void *ctx, sp_error_t *err)
{
  cleanup_dir_names struct sp_dir_names names = { 0 };
  char q[SP_QUOTE_BUF_SIZE];

  if (depth > SP_TREE_MAX_DEPTH)
    return sp_make_error (err, 0, "`%s` is more than %d directories deep", sp_quote_name (path, q),
                          SP_TREE_MAX_DEPTH);
  if (sp_dir_names_read (dirfd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", sp_quote_name (*path ? path : ".", q));

  for (size_t i = 0; i < names.len; i++)
    {
      const char *name = names.v[i];
      ssize_t child_len = sp_dir_child_path (path, SP_TREE_PATH_MAX, path_len, name);
      struct stat st;

      if (child_len < 0)
        return sp_make_error (err, 0, "a path below `%s` is longer than %d bytes",
                              sp_quote_name (*path ? path : ".", q), SP_TREE_PATH_MAX - 1);

      if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_make_error (err, errno, "stat `%s`", sp_quote_name (path, q));
      if (fn (dirfd, name, path, &st, SP_TREE_WALK_ENTRY, ctx, err) < 0)
        return -1;
      if (S_ISDIR (st.st_mode))
        {
          cleanup_close int child = -1;
          struct stat opened;

          child = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (child < 0)
            return sp_make_error (err, errno, "open `%s`", sp_quote_name (path, q));
          if (fstat (child, &opened) < 0)
            return sp_make_error (err, errno, "stat `%s`", sp_quote_name (path, q));
          if (opened.st_dev != st.st_dev || opened.st_ino != st.st_ino)
            return sp_make_error (err, 0, "`%s` changed during the walk", sp_quote_name (path, q));
          if (walk_dir (child, path, (size_t)child_len, depth + 1, fn, ctx, err) < 0)
            return -1;
          if (fstat (child, &opened) < 0)
            return sp_make_error (err, errno, "stat `%s`", sp_quote_name (path, q));
          if (fn (dirfd, name, path, &opened, SP_TREE_WALK_DIR_DONE, ctx, err) < 0)
            return -1;
        }
      path[path_len] = '\0';
    }
  return 0;
}

int
sp_tree_walk (int rootfd, sp_tree_walk_fn fn, void *ctx, sp_error_t *err)
{
  char path[SP_TREE_PATH_MAX];

  path[0] = '\0';
  return walk_dir (rootfd, path, 0, 1, fn, ctx, err);
}
