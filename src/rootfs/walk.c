/* The tree walk: see walk.h.  */
#define _GNU_SOURCE
#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sealed-probe/cleanup.h>

#include <sealed-probe/bounds.h>

struct names
{
  char **v;
  size_t len;
  size_t cap;
};

static void
names_release (struct names *n)
{
  for (size_t i = 0; i < n->len; i++)
    free (n->v[i]);
  free (n->v);
  n->v = NULL;
  n->len = n->cap = 0;
}
#define cleanup_names __attribute__ ((cleanup (names_release)))

static int
compare_names (const void *a, const void *b)
{
  /* strcmp compares as unsigned char: byte order.  */
  return strcmp (*(char *const *)a, *(char *const *)b);
}

/* Every name in dirfd but "." and "..", sorted.  dirfd stays open.  */
static int
read_names (int dirfd, const char *path, struct names *out, sp_error_t *err)
{
  cleanup_dir DIR *dir = NULL;
  int fd = openat (dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct dirent *de;

  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", *path ? path : ".");
  dir = fdopendir (fd);
  if (dir == NULL)
    {
      int saved = errno;
      close (fd);
      return sp_make_error (err, saved, "list `%s`", *path ? path : ".");
    }
  for (errno = 0; (de = readdir (dir)) != NULL; errno = 0)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (out->len == out->cap)
        {
          size_t cap = out->cap ? out->cap * 2 : 32;
          char **v = realloc (out->v, cap * sizeof (*v));
          if (v == NULL)
            return sp_make_error (err, errno, "allocate names");
          out->v = v;
          out->cap = cap;
        }
      out->v[out->len] = strdup (de->d_name);
      if (out->v[out->len] == NULL)
        return sp_make_error (err, errno, "allocate names");
      out->len++;
    }
  if (errno != 0)
    return sp_make_error (err, errno, "list `%s`", *path ? path : ".");
  if (out->len > 1)
    qsort (out->v, out->len, sizeof (*out->v), compare_names);
  return 0;
}

static int
walk_dir (int dirfd, char *path, size_t path_len, int depth, sp_walk_fn fn, void *ctx, sp_error_t *err)
{
  cleanup_names struct names names = { 0 };

  if (depth > SP_TREE_MAX_DEPTH)
    return sp_make_error (err, 0, "`%s` is more than %d directories deep", path, SP_TREE_MAX_DEPTH);
  if (read_names (dirfd, path, &names, err) < 0)
    return -1;

  for (size_t i = 0; i < names.len; i++)
    {
      const char *name = names.v[i];
      size_t name_len = strlen (name);
      size_t child_len = path_len ? path_len + 1 + name_len : name_len;
      struct stat st;

      if (child_len >= SP_ROOTFS_PATH_MAX)
        return sp_make_error (err, 0, "a path below `%s` is longer than %d bytes", path,
                              SP_ROOTFS_PATH_MAX - 1);
      if (path_len)
        path[path_len] = '/';
      memcpy (path + (path_len ? path_len + 1 : 0), name, name_len + 1);

      if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_make_error (err, errno, "stat `%s`", path);
      if (fn (dirfd, name, path, &st, SP_WALK_ENTRY, ctx, err) < 0)
        return -1;
      if (S_ISDIR (st.st_mode))
        {
          cleanup_close int child = -1;
          struct stat opened;

          child = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (child < 0)
            return sp_make_error (err, errno, "open `%s`", path);
          if (fstat (child, &opened) < 0)
            return sp_make_error (err, errno, "stat `%s`", path);
          if (opened.st_dev != st.st_dev || opened.st_ino != st.st_ino)
            return sp_make_error (err, 0, "`%s` changed during the walk", path);
          if (walk_dir (child, path, child_len, depth + 1, fn, ctx, err) < 0)
            return -1;
          if (fstat (child, &opened) < 0)
            return sp_make_error (err, errno, "stat `%s`", path);
          if (fn (dirfd, name, path, &opened, SP_WALK_DIR_DONE, ctx, err) < 0)
            return -1;
        }
      path[path_len] = '\0';
    }
  return 0;
}

int
sp_walk (int rootfd, sp_walk_fn fn, void *ctx, sp_error_t *err)
{
  char path[SP_ROOTFS_PATH_MAX];

  path[0] = '\0';
  return walk_dir (rootfd, path, 0, 1, fn, ctx, err);
}
