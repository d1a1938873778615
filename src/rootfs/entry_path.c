/* Entry path cleaning: see entry_path.h.  */
#define _GNU_SOURCE
#include "rootfs/entry_path.h"

#include <string.h>

int
sp_entry_path_clean (const char *raw, char out[SP_TREE_PATH_MAX], sp_error_t *err)
{
  const char *p = raw;
  size_t len;

  if (raw == NULL || raw[0] == '\0')
    return sp_make_error (err, 0, "empty path");
  if (raw[0] == '/')
    return sp_make_error (err, 0, "absolute path");
  /* Debian data tarballs name members "./usr/...": one leading "./" goes.  */
  if (p[0] == '.' && (p[1] == '/' || p[1] == '\0'))
    p += p[1] ? 2 : 1;
  len = strlen (p);
  /* A directory member ends with one '/'.  */
  if (len > 0 && p[len - 1] == '/')
    len--;
  if (len >= SP_TREE_PATH_MAX)
    return sp_make_error (err, 0, "path longer than %d bytes", SP_TREE_PATH_MAX - 1);

  for (size_t start = 0, depth = 1; start < len; depth++)
    {
      const char *slash = memchr (p + start, '/', len - start);
      size_t end = slash ? (size_t)(slash - p) : len;
      size_t clen = end - start;

      /* The tree walks open one directory per level, up to SP_TREE_MAX_DEPTH.  */
      if (depth >= SP_TREE_MAX_DEPTH)
        return sp_make_error (err, 0, "path deeper than %d components", SP_TREE_MAX_DEPTH - 1);
      if (clen == 0)
        return sp_make_error (err, 0, "empty path component");
      if (clen == 1 && p[start] == '.')
        return sp_make_error (err, 0, "`.` path component");
      if (clen == 2 && p[start] == '.' && p[start + 1] == '.')
        return sp_make_error (err, 0, "`..` path component");
      start = end + 1;
      if (slash && start == len)
        return sp_make_error (err, 0, "empty path component");
    }
  memcpy (out, p, len);
  out[len] = '\0';
  return 0;
}
