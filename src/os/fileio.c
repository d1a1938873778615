/* File I/O helpers: see src/os/fileio.h.  */
#define _GNU_SOURCE
#include "os/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"

int
sp_read_fd_capped (int fd, size_t cap, char **out, size_t *len, sp_error_t *err)
{
  cleanup_free char *buf = NULL;
  size_t used = 0;
  size_t allocated = 0;

  for (;;)
    {
      ssize_t n;

      if (allocated - used < 2)
        {
          /* Grow geometrically, but never past cap + 2: one byte to detect an
             oversized input and one for the terminating NUL.  */
          size_t next = allocated ? allocated * 2 : 4096;
          char *grown;

          if (next > cap + 2)
            next = cap + 2;
          if (next <= allocated)
            return sp_make_error (err, 0, "input larger than %zu bytes", cap);
          grown = realloc (buf, next);
          if (grown == NULL)
            return sp_make_error (err, errno, "allocate read buffer");
          buf = grown;
          allocated = next;
        }
      n = TEMP_FAILURE_RETRY (read (fd, buf + used, allocated - used - 1));
      if (n < 0)
        return sp_make_error (err, errno, "read");
      if (n == 0)
        break;
      used += (size_t)n;
      if (used > cap)
        return sp_make_error (err, 0, "input larger than %zu bytes", cap);
    }
  buf[used] = '\0';
  *len = used;
  *out = get_and_reset (&buf);
  return 0;
}

int
sp_read_path_capped (const char *path, size_t cap, char **out, size_t *len, sp_error_t *err)
{
  cleanup_close int fd = -1;
  int ret;

  if (strcmp (path, "-") == 0)
    {
      ret = sp_read_fd_capped (STDIN_FILENO, cap, out, len, err);
      if (ret < 0)
        return sp_error_wrap (err, "standard input");
      return 0;
    }

  fd = TEMP_FAILURE_RETRY (open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", path);
  ret = sp_read_fd_capped (fd, cap, out, len, err);
  if (ret < 0)
    return sp_error_wrap (err, "`%s`", path);
  return 0;
}

int
sp_write_all (int fd, const void *buf, size_t len, sp_error_t *err)
{
  const char *p = buf;

  while (len > 0)
    {
      ssize_t n = TEMP_FAILURE_RETRY (write (fd, p, len));
      if (n < 0)
        return sp_make_error (err, errno, "write");
      p += n;
      len -= (size_t)n;
    }
  return 0;
}

int
sp_write_file_atomic_at (int dirfd, const char *name, const void *buf, size_t len, mode_t mode,
                         sp_error_t *err)
{
  cleanup_free char *tmp_name = NULL;
  cleanup_close int fd = -1;
  int ret;

  if (asprintf (&tmp_name, "%s.tmp", name) < 0)
    return sp_make_error (err, errno, "allocate name");

  fd = TEMP_FAILURE_RETRY (
      openat (dirfd, tmp_name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, mode));
  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", tmp_name);
  /* open's mode passes through the umask; the caller's mode is the contract.  */
  if (fchmod (fd, mode) < 0)
    {
      ret = sp_make_error (err, errno, "chmod `%s`", tmp_name);
      goto fail;
    }
  ret = sp_write_all (fd, buf, len, err);
  if (ret < 0)
    goto fail;
  if (fsync (fd) < 0)
    {
      ret = sp_make_error (err, errno, "fsync `%s`", tmp_name);
      goto fail;
    }
  if (renameat (dirfd, tmp_name, dirfd, name) < 0)
    {
      ret = sp_make_error (err, errno, "rename `%s` to `%s`", tmp_name, name);
      goto fail;
    }
  if (fsync (dirfd) < 0)
    return sp_make_error (err, errno, "fsync the directory of `%s`", name);
  return 0;

fail:
  unlinkat (dirfd, tmp_name, 0);
  return sp_error_wrap (err, "write `%s`", name);
}

int
sp_path_split (const char *path, char **dir, const char **base, sp_error_t *err)
{
  const char *slash = strrchr (path, '/');

  *dir = NULL;
  *base = slash ? slash + 1 : path;
  if (**base == '\0')
    return sp_make_error (err, 0, "`%s` names no file", path);
  if (slash == NULL)
    *dir = strdup (".");
  else if (slash == path)
    *dir = strdup ("/");
  else
    *dir = strndup (path, (size_t)(slash - path));
  if (*dir == NULL)
    return sp_make_error (err, errno, "allocate a path");
  return 0;
}

const char *
sp_file_type_name (mode_t mode)
{
  if (S_ISREG (mode))
    return "a regular file";
  if (S_ISDIR (mode))
    return "a directory";
  if (S_ISLNK (mode))
    return "a symbolic link";
  if (S_ISFIFO (mode))
    return "a FIFO";
  if (S_ISSOCK (mode))
    return "a socket";
  if (S_ISCHR (mode))
    return "a character device";
  if (S_ISBLK (mode))
    return "a block device";
  return "of an unknown file type";
}
