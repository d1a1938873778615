/* A scratch directory under /tmp for one test, and its removal.  Include it
   after defining _GNU_SOURCE (nftw).  */
#ifndef SP_TMPDIR_H
#define SP_TMPDIR_H

#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Makes a directory from tmpl (ending in XXXXXX, rewritten in place) and
   returns an fd on it.  */
static inline int
sp_tmpdir_make (char *tmpl)
{
  int fd;

  ck_assert_ptr_nonnull (mkdtemp (tmpl));
  fd = open (tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  return fd;
}

static inline int
sp_tmpdir_remove_one (const char *path, const struct stat *st, int type, struct FTW *ftw)
{
  return remove (path);
}

/* Removes path and everything below it, never following a symlink.  */
static inline void
sp_tmpdir_remove (const char *path)
{
  ck_assert_int_eq (nftw (path, sp_tmpdir_remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

#endif
