/* See binary_check.h.  */
#define _GNU_SOURCE
#include "runtimes/binary_check.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "runtimes/runtime.h"

char *
runtime_binary_find (const char *name)
{
  const char *p = SP_RUNTIME_SEARCH_PATH;

  while (*p)
    {
      size_t n = strcspn (p, ":");
      char *candidate = NULL;
      struct stat st;

      if (asprintf (&candidate, "%.*s/%s", (int)n, p, name) < 0)
        return NULL;
      if (stat (candidate, &st) == 0 && S_ISREG (st.st_mode) && access (candidate, X_OK) == 0)
        return candidate;
      free (candidate);
      p += n;
      if (*p == ':')
        p++;
    }
  errno = ENOENT;
  return NULL;
}

/* Each directory from path's parent up to / must be root's and not
   writable by group or others: else someone else could swap the binary.  */
static int
check_parents (const char *real, sp_error_t *err)
{
  char dir[PATH_MAX];
  char *slash;

  snprintf (dir, sizeof (dir), "%s", real);
  while ((slash = strrchr (dir, '/')) != NULL)
    {
      struct stat st;

      if (slash == dir)
        slash[1] = '\0';
      else
        *slash = '\0';
      if (stat (dir, &st) < 0)
        return sp_make_error (err, errno, "stat `%s`", dir);
      if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return sp_make_error (
            err, 0, "runtime binary `%s`: directory `%s` is not root's or is writable by others", real, dir);
      if (slash == dir)
        break;
    }
  return 0;
}

int
runtime_binary_check (const char *path, char **real_out, sp_error_t *err)
{
  cleanup_free char *real = realpath (path, NULL);
  struct stat st;

  *real_out = NULL;
  if (real == NULL)
    return sp_make_error (err, errno, "runtime binary `%s`", path);
  if (stat (real, &st) < 0)
    return sp_make_error (err, errno, "runtime binary `%s`: stat", real);
  if (!S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "runtime binary `%s`: not a regular file", real);
  if (st.st_uid != 0)
    return sp_make_error (err, 0, "runtime binary `%s`: not owned by root", real);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return sp_make_error (err, 0, "runtime binary `%s`: writable by group or others", real);
  if (!(st.st_mode & S_IXUSR))
    return sp_make_error (err, 0, "runtime binary `%s`: not executable", real);
  if (check_parents (real, err) < 0)
    return -1;
  *real_out = get_and_reset (&real);
  return 0;
}
