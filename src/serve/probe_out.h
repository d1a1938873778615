/* Reading the sandbox's answer file from the host side (the bundle's `out`,
   bind-mounted at /probe/out).  Whatever the sandbox made of it, the read
   neither follows a link, nor blocks, nor reads without bound.  */
#ifndef SP_SERVE_PROBE_OUT_H
#define SP_SERVE_PROBE_OUT_H

#include <stddef.h>

#include "base/error.h"

/* Opens name under bundle_dirfd with O_NOFOLLOW | O_NONBLOCK, requires a
   regular file, and reads at most cap bytes into buf; *len is how many, and
   nothing past cap is read.  Callers pass cap = SP_RESULT_MAX_BYTES + 1, so
   that the result validator sees "too big" rather than a truncated answer.
   Errors name the kind of entry found, never its content.  */
int sp_probe_out_read (int bundle_dirfd, const char *name, char *buf, size_t cap, size_t *len,
                       sp_error_t *err);

#endif
