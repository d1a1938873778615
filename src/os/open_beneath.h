/* Opening and looking up a relative path below a directory fd without ever
   following a symlink, on any component.  The seed store, the git sanitizer
   and both archive extractors (the rootfs's and the GitHub tarball's) share
   it.  */
#ifndef SP_OS_OPEN_BENEATH_H
#define SP_OS_OPEN_BENEATH_H

#include <stddef.h>
#include <sys/stat.h>

/* Opens path below dirfd with open(2)'s flags (O_CLOEXEC is added) through
   openat2 (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS).
   A symlink on any component fails with ELOOP, but for a trailing one when
   flags hold O_NOFOLLOW: then O_PATH opens the link itself, and anything else
   fails as openat(2) would (ELOOP, or ENOTDIR with O_DIRECTORY).  A path that
   leaves dirfd fails with EXDEV.  Returns the fd, or -1 with errno set.
   Only where the kernel has no openat2 (ENOSYS: before Linux 5.6) does it fall
   back to sp_open_beneath_by_component.  */
int sp_open_beneath (int dirfd, const char *path, int flags);

/* The fallback on its own, for kernels without openat2, and exposed so that
   tests reach it on kernels with it.  It opens one component at a time with
   O_NOFOLLOW and gives the errno values openat2 gives, except that it refuses
   an absolute path and every `.`, `..` or empty component (so a trailing
   `/` too) with EINVAL, where openat2 accepts those that stay below dirfd.  */
int sp_open_beneath_by_component (int dirfd, const char *path, int flags);

/* What sp_lookup_beneath found.  */
enum sp_lookup_what
{
  SP_LOOKUP_ABSENT,           /* path does not exist (an ancestor may not either) */
  SP_LOOKUP_PRESENT,          /* path exists: st is its lstat */
  SP_LOOKUP_SYMLINK_ANCESTOR, /* an ancestor is a symlink */
  SP_LOOKUP_NONDIR_ANCESTOR,  /* an ancestor is neither a directory nor a symlink */
  SP_LOOKUP_STAT_FAILED,      /* lstat of a component failed, but for ENOENT */
  SP_LOOKUP_OPEN_FAILED,      /* opening an ancestor directory failed */
};

struct sp_lookup
{
  enum sp_lookup_what what;
  size_t len;     /* path's first len bytes: the path of the component `what` is about */
  struct stat st; /* that component's lstat, when it has one */
};

/* Looks path (relative, '/'-separated, cleaned by the caller) up below dirfd
   one component at a time, never following a symlink, for a writer that must
   not write through a link or a file: an existing ancestor that is not a real
   directory is reported, not passed through.  Returns 0 with out->what one of
   the first four, or -1 with errno set and out->what SP_LOOKUP_STAT_FAILED or
   SP_LOOKUP_OPEN_FAILED.  Messages are the caller's: each extractor words
   its own.  */
int sp_lookup_beneath (int dirfd, const char *path, struct sp_lookup *out);

#endif
