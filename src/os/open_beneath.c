/* Opening and looking up below a directory, never through a symlink: see
   src/os/open_beneath.h.  */
#define _GNU_SOURCE
#include "os/open_beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"

/* Set once openat2 said ENOSYS: the running kernel will not grow it.  */
static bool no_openat2;

/* Copies the component at p, up to the next '/' or the end, into comp and
   returns its length; -1 with ENAMETOOLONG, as the kernel would say, when it
   is longer than NAME_MAX.  */
static ssize_t
take_component (const char *p, char comp[NAME_MAX + 1])
{
  size_t len = strcspn (p, "/");

  if (len > NAME_MAX)
    {
      errno = ENAMETOOLONG;
      return -1;
    }
  memcpy (comp, p, len);
  comp[len] = '\0';
  return (ssize_t)len;
}

/* Replaces *cur (dirfd while *cur is -1) with an O_PATH fd on its
   subdirectory comp, never through a symlink.  */
static int
descend (int dirfd, int *cur, const char *comp)
{
  int next = (int)TEMP_FAILURE_RETRY (
      openat (*cur >= 0 ? *cur : dirfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));

  if (next < 0)
    return -1;
  sp_closep (cur);
  *cur = next;
  return 0;
}

/* After an O_NOFOLLOW openat of name failed: a symlink where a directory was
   asked for gives ENOTDIR there, and ELOOP from openat2.  Returns -1.  */
static int
fail_as_openat2 (int at, const char *name)
{
  int saved = errno;
  struct stat st;

  if (saved == ENOTDIR && fstatat (at, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode))
    saved = ELOOP;
  errno = saved;
  return -1;
}

/* The last component.  Without the caller's O_NOFOLLOW, openat2 refuses a
   trailing symlink with ELOOP, where O_NOFOLLOW | O_PATH would open it.  */
static int
open_last (int at, const char *name, int flags)
{
  cleanup_close int fd = -1;
  struct stat st;

  if (flags & O_NOFOLLOW)
    return (int)TEMP_FAILURE_RETRY (openat (at, name, flags | O_CLOEXEC));
  fd = (int)TEMP_FAILURE_RETRY (openat (at, name, flags | O_NOFOLLOW | O_CLOEXEC));
  if (fd < 0)
    return fail_as_openat2 (at, name);
  if (flags & O_PATH)
    {
      if (fstat (fd, &st) < 0)
        return -1;
      if (S_ISLNK (st.st_mode))
        {
          errno = ELOOP;
          return -1;
        }
    }
  return get_and_reset_fd (&fd);
}

int
sp_open_beneath_by_component (int dirfd, const char *path, int flags)
{
  cleanup_close int cur = -1;
  const char *p = path;

  for (;;)
    {
      char comp[NAME_MAX + 1];
      ssize_t len = take_component (p, comp);

      if (len < 0)
        return -1;
      if (len == 0 || strcmp (comp, ".") == 0 || strcmp (comp, "..") == 0)
        {
          errno = EINVAL;
          return -1;
        }
      if (p[len] == '\0')
        return open_last (cur >= 0 ? cur : dirfd, comp, flags);
      if (descend (dirfd, &cur, comp) < 0)
        return fail_as_openat2 (cur >= 0 ? cur : dirfd, comp);
      p += len + 1;
    }
}

int
sp_open_beneath (int dirfd, const char *path, int flags)
{
  struct open_how how = {
    .flags = (uint64_t)(flags | O_CLOEXEC),
    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  long fd;

  if (!__atomic_load_n (&no_openat2, __ATOMIC_RELAXED))
    {
      fd = TEMP_FAILURE_RETRY (syscall (SYS_openat2, dirfd, path, &how, sizeof (how)));
      if (fd >= 0 || errno != ENOSYS)
        return (int)fd;
      __atomic_store_n (&no_openat2, true, __ATOMIC_RELAXED);
    }
  return sp_open_beneath_by_component (dirfd, path, flags);
}

int
sp_lookup_beneath (int dirfd, const char *path, struct sp_lookup *out)
{
  cleanup_close int cur = -1;
  const char *p = path;

  for (;;)
    {
      char comp[NAME_MAX + 1];
      ssize_t len = take_component (p, comp);

      out->len = (size_t)(p - path) + strcspn (p, "/");
      if (len < 0 || fstatat (cur >= 0 ? cur : dirfd, comp, &out->st, AT_SYMLINK_NOFOLLOW) < 0)
        {
          out->what = errno == ENOENT ? SP_LOOKUP_ABSENT : SP_LOOKUP_STAT_FAILED;
          return errno == ENOENT ? 0 : -1;
        }
      if (p[len] == '\0')
        out->what = SP_LOOKUP_PRESENT;
      else if (S_ISLNK (out->st.st_mode))
        out->what = SP_LOOKUP_SYMLINK_ANCESTOR;
      else if (!S_ISDIR (out->st.st_mode))
        out->what = SP_LOOKUP_NONDIR_ANCESTOR;
      else if (descend (dirfd, &cur, comp) < 0)
        {
          out->what = SP_LOOKUP_OPEN_FAILED;
          return -1;
        }
      else
        {
          p += len + 1;
          continue;
        }
      return 0;
    }
}
