/* Cleanup attributes, after crun's: every early return is leak-free.  */
#ifndef SP_BASE_CLEANUP_H
#define SP_BASE_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void
sp_freep (void *p)
{
  void **pp = (void **)p;
  free (*pp);
  *pp = NULL;
}

static inline void
sp_closep (int *fd)
{
  if (*fd >= 0)
    {
      int saved = errno;
      close (*fd);
      errno = saved;
    }
  *fd = -1;
}

static inline void
sp_fclosep (FILE **f)
{
  if (*f)
    fclose (*f);
  *f = NULL;
}

static inline void
sp_closedirp (DIR **d)
{
  if (*d)
    closedir (*d);
  *d = NULL;
}

#define cleanup_free  __attribute__ ((cleanup (sp_freep)))
#define cleanup_close __attribute__ ((cleanup (sp_closep)))
#define cleanup_file  __attribute__ ((cleanup (sp_fclosep)))
#define cleanup_dir   __attribute__ ((cleanup (sp_closedirp)))

/* Hands ownership on: returns the value and leaves the variable empty.  */
static inline int
get_and_reset_fd (int *fd)
{
  int ret = *fd;
  *fd = -1;
  return ret;
}

static inline void *
get_and_reset_ptr (void *p)
{
  void **pp = (void **)p;
  void *ret = *pp;
  *pp = NULL;
  return ret;
}
#define get_and_reset(pp) get_and_reset_ptr (pp)

#ifndef TEMP_FAILURE_RETRY
#define TEMP_FAILURE_RETRY(expression)                                                                       \
  (__extension__({                                                                                           \
    long int __result;                                                                                       \
    do                                                                                                       \
      __result = (long int)(expression);                                                                     \
    while (__result == -1L && errno == EINTR);                                                               \
    __result;                                                                                                \
  }))
#endif

#endif
