/* The answer file's host-side read: see probe_out.h.  The sandbox owned the
   bundle's `out` and may have replaced it with anything it could create: a
   link, a FIFO, a socket, a directory, a huge file.  */
#define _GNU_SOURCE
#include "serve/probe_out.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"

/* The kind of a non-regular entry, for the message: never its content.  */
static const char *
kind_of (mode_t mode)
{
  if (S_ISLNK (mode))
    return "is a symlink";
  if (S_ISDIR (mode))
    return "is a directory";
  if (S_ISFIFO (mode))
    return "is a FIFO";
  if (S_ISSOCK (mode))
    return "is a socket";
  if (S_ISCHR (mode) || S_ISBLK (mode))
    return "is a device";
  return "is not a regular file";
}

int
sp_probe_out_read (int bundle_dirfd, const char *name, char *buf, size_t cap, size_t *len, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;
  size_t n = 0;

  *len = 0;
  /* Look before opening, so that a device node is never opened at all (an
     open alone can have effects); the fstat below closes the race.  */
  if (fstatat (bundle_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    {
      if (errno == ENOENT)
        return sp_make_error (err, 0, "probe output `%s` is missing", name);
      return sp_make_error (err, errno, "probe output `%s`: stat", name);
    }
  if (!S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "probe output `%s` %s", name, kind_of (st.st_mode));

  /* O_NONBLOCK: a FIFO swapped in after the look neither blocks the open
     nor the read.  */
  fd = TEMP_FAILURE_RETRY (
      openat (bundle_dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd < 0)
    {
      if (errno == ELOOP)
        return sp_make_error (err, 0, "probe output `%s` is a symlink", name);
      if (errno == ENOENT)
        return sp_make_error (err, 0, "probe output `%s` is missing", name);
      if (errno == ENXIO)
        return sp_make_error (err, 0, "probe output `%s` is a socket", name);
      return sp_make_error (err, errno, "probe output `%s`: open", name);
    }
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "probe output `%s`: fstat", name);
  if (!S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "probe output `%s` %s", name, kind_of (st.st_mode));

  while (n < cap)
    {
      ssize_t got = TEMP_FAILURE_RETRY (read (fd, buf + n, cap - n));

      if (got < 0)
        return sp_make_error (err, errno, "probe output `%s`: read", name);
      if (got == 0)
        break;
      n += (size_t)got;
    }
  *len = n;
  return 0;
}
