/* Sorted directory listings: see src/os/dir_names.h.  */
#define _GNU_SOURCE
#include "os/dir_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"

/* The first allocation; the array doubles from there.  */
#define NAMES_FIRST_CAP 32

void
sp_dir_names_release (struct sp_dir_names *names)
{
  for (size_t i = 0; i < names->len; i++)
    free (names->v[i]);
  free (names->v);
  names->v = NULL;
  names->len = names->cap = 0;
}

static int
compare_names (const void *a, const void *b)
{
  /* strcmp compares as unsigned char: byte order.  */
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static int
append_name (struct sp_dir_names *out, const char *name, sp_error_t *err)
{
  if (out->len == out->cap)
    {
      size_t cap = out->cap ? out->cap * 2 : NAMES_FIRST_CAP;
      char **v = reallocarray (out->v, cap, sizeof (*v));

      if (v == NULL)
        return sp_make_error (err, errno, "allocate names");
      out->v = v;
      out->cap = cap;
    }
  out->v[out->len] = strdup (name);
  if (out->v[out->len] == NULL)
    return sp_make_error (err, errno, "allocate names");
  out->len++;
  return 0;
}

int
sp_dir_names_read (int dirfd, struct sp_dir_names *out, sp_error_t *err)
{
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;
  int fd = (int)TEMP_FAILURE_RETRY (openat (dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));

  if (fd < 0)
    return sp_make_error (err, errno, "open");
  dir = fdopendir (fd);
  if (dir == NULL)
    {
      int saved = errno;

      close (fd);
      return sp_make_error (err, saved, "read");
    }
  for (errno = 0; (de = readdir (dir)) != NULL; errno = 0)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (append_name (out, de->d_name, err) < 0)
        return -1;
    }
  if (errno != 0)
    return sp_make_error (err, errno, "read");
  if (out->len > 1)
    qsort (out->v, out->len, sizeof (*out->v), compare_names);
  return 0;
}

ssize_t
sp_dir_child_path (char *path, size_t size, size_t path_len, const char *name)
{
  size_t name_len = strlen (name);
  size_t start = path_len ? path_len + 1 : 0;

  if (start + name_len >= size)
    return -1;
  if (path_len)
    path[path_len] = '/';
  memcpy (path + start, name, name_len + 1);
  return (ssize_t)(start + name_len);
}
