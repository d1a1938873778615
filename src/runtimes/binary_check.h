/* Finding and trusting a backend's executable (runc, runsc, sbx): looked up
   only in SP_RUNTIME_SEARCH_PATH, never the caller's PATH, and run only
   when nobody but root could have put it there.  Private to runtimes/.  */
#ifndef SP_RUNTIMES_BINARY_CHECK_H
#define SP_RUNTIMES_BINARY_CHECK_H

#include "base/error.h"

/* The first executable regular file named name in SP_RUNTIME_SEARCH_PATH.
   Allocated; NULL with errno set when there is none.  */
char *runtime_binary_find (const char *name);

/* Resolves path and requires a regular, executable file owned by root and
   not writable by group or others, in directories (up to /) that are
   root's and not writable by group or others.  On success *real is the
   resolved path (allocated), which every later exec must use, so that the
   file checked is the file run.  Errors name the binary.  */
int runtime_binary_check (const char *path, char **real, sp_error_t *err);

#endif
