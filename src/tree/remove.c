/* Tree removal: see include/sealed-probe/tree_remove.h.  */
#define _GNU_SOURCE
#include <sealed-probe/tree_remove.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sealed-probe/cleanup.h>

#include <sealed-probe/tree_walk.h>

static int
on_entry (int dirfd, const char *name, const char *path, const struct stat *st, enum sp_tree_walk_event event,
          void *ctx, sp_error_t *err)
{
  if (S_ISDIR (st->st_mode))
    {
      /* Down: make it listable and writable.  Up: it is empty now.  */
      if (event == SP_TREE_WALK_ENTRY)
        {
          if (fchmodat (dirfd, name, 0700, 0) < 0)
            return sp_make_error (err, errno, "chmod `%s`", path);
          return 0;
        }
      if (unlinkat (dirfd, name, AT_REMOVEDIR) < 0)
        return sp_make_error (err, errno, "remove `%s`", path);
      return 0;
    }
  if (unlinkat (dirfd, name, 0) < 0)
    return sp_make_error (err, errno, "remove `%s`", path);
  return 0;
}

int
sp_tree_remove_at (int parentfd, const char *name, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;

  if (fstatat (parentfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "stat `%s`", name);
  if (!S_ISDIR (st.st_mode))
    {
      if (unlinkat (parentfd, name, 0) < 0)
        return sp_make_error (err, errno, "remove `%s`", name);
      return 0;
    }
  if (fchmodat (parentfd, name, 0700, 0) < 0)
    return sp_make_error (err, errno, "chmod `%s`", name);
  fd = openat (parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", name);
  if (sp_tree_walk (fd, on_entry, NULL, err) < 0)
    return sp_error_wrap (err, "remove `%s`", name);
  if (unlinkat (parentfd, name, AT_REMOVEDIR) < 0)
    return sp_make_error (err, errno, "remove `%s`", name);
  return 0;
}
