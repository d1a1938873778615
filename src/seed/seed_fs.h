/* Helpers that tree_copy.c and git_seed.c share: quoting an untrusted path
   for an error message, opening a relative path below a directory fd without
   ever following a symlink, and listing a directory.  Static inline, because the seed library's
   source list is fixed.  */
#ifndef SP_SEED_FS_H
#define SP_SEED_FS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sealed-probe/bounds.h>
#include <sealed-probe/cleanup.h>
#include <sealed-probe/error.h>

/* Enough for SP_COPY_QUOTE_MAX_CHARS input bytes, each escaped as \xNN, plus
   "..." and the NUL.  */
#define SP_QUOTE_BUF_SIZE (SP_COPY_QUOTE_MAX_CHARS * 4 + 4)

/* Copies path into buf as printable ASCII only: a byte outside 0x20..0x7e, a
   backquote or a backslash becomes \xNN, and a path longer than
   SP_COPY_QUOTE_MAX_CHARS bytes is cut and ends in "...".  Returns buf.  */
static inline const char *
sp_seed_quote (const char *path, char buf[SP_QUOTE_BUF_SIZE])
{
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  size_t i;

  for (i = 0; path[i] != '\0' && i < SP_COPY_QUOTE_MAX_CHARS; i++)
    {
      unsigned char c = (unsigned char)path[i];

      if (c >= 0x20 && c <= 0x7e && c != '`' && c != '\\')
        buf[o++] = (char)c;
      else
        {
          buf[o++] = '\\';
          buf[o++] = 'x';
          buf[o++] = hex[c >> 4];
          buf[o++] = hex[c & 0xf];
        }
    }
  if (path[i] != '\0')
    {
      memcpy (buf + o, "...", 3);
      o += 3;
    }
  buf[o] = '\0';
  return buf;
}

/* The fallback of sp_seed_open_beneath, for kernels without openat2 (before
   5.6): one component at a time, each opened O_NOFOLLOW, so a symlink
   anywhere on the path fails with ELOOP (or ENOTDIR).  */
static inline int
sp_seed_open_beneath_by_component (int dirfd, const char *path, int flags)
{
  cleanup_close int cur = -1;
  const char *p = path;

  for (;;)
    {
      const char *slash = strchr (p, '/');
      char comp[256];
      size_t len = slash ? (size_t)(slash - p) : strlen (p);
      int at = cur >= 0 ? cur : dirfd;
      int next;

      if (len == 0 || len >= sizeof (comp) || (len == 1 && p[0] == '.')
          || (len == 2 && p[0] == '.' && p[1] == '.'))
        {
          errno = EINVAL;
          return -1;
        }
      memcpy (comp, p, len);
      comp[len] = '\0';
      if (slash == NULL)
        return TEMP_FAILURE_RETRY (openat (at, comp, flags | O_NOFOLLOW | O_CLOEXEC));
      next = TEMP_FAILURE_RETRY (openat (at, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (next < 0)
        return -1;
      sp_closep (&cur);
      cur = next;
      p = slash + 1;
    }
}

/* Opens path (relative, no "." or ".." components) below dirfd for reading
   or O_PATH, never following a symlink on any component: openat2 with
   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it.  Returns the
   fd, or -1 with errno set: ELOOP (or ENOTDIR) when a component is a
   symlink.  */
static inline int
sp_seed_open_beneath (int dirfd, const char *path, int flags)
{
  static bool no_openat2;
  struct open_how how = { 0 };
  long fd;

  if (!no_openat2)
    {
      how.flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC);
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
      fd = TEMP_FAILURE_RETRY (syscall (SYS_openat2, dirfd, path, &how, sizeof (how)));
      if (fd >= 0 || errno != ENOSYS)
        return (int)fd;
      no_openat2 = true;
    }
  return sp_seed_open_beneath_by_component (dirfd, path, flags);
}

/* The names in one directory, but "." and "..", in byte order, so that a
   walk and its failures are the same on every run.  */
struct sp_seed_names
{
  char **v;
  size_t len;
  size_t cap;
};

static inline void
sp_seed_names_release (struct sp_seed_names *n)
{
  for (size_t i = 0; i < n->len; i++)
    free (n->v[i]);
  free (n->v);
  n->v = NULL;
  n->len = n->cap = 0;
}
#define cleanup_seed_names __attribute__ ((cleanup (sp_seed_names_release)))

static inline int
sp_seed_compare_names (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

/* Lists dirfd (which stays open) into out; path names it in errors.  */
static inline int
sp_seed_read_names (int dirfd, const char *path, struct sp_seed_names *out, sp_error_t *err)
{
  cleanup_dir DIR *dir = NULL;
  char q[SP_QUOTE_BUF_SIZE];
  struct dirent *de;
  int fd = openat (dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", sp_seed_quote (*path ? path : ".", q));
  dir = fdopendir (fd);
  if (dir == NULL)
    {
      int saved = errno;
      close (fd);
      return sp_make_error (err, saved, "list `%s`", sp_seed_quote (*path ? path : ".", q));
    }
  for (errno = 0; (de = readdir (dir)) != NULL; errno = 0)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (out->len == out->cap)
        {
          size_t cap = out->cap ? out->cap * 2 : 32;
          char **v = realloc (out->v, cap * sizeof (*v));
          if (v == NULL)
            return sp_make_error (err, errno, "allocate names");
          out->v = v;
          out->cap = cap;
        }
      out->v[out->len] = strdup (de->d_name);
      if (out->v[out->len] == NULL)
        return sp_make_error (err, errno, "allocate names");
      out->len++;
    }
  if (errno != 0)
    return sp_make_error (err, errno, "list `%s`", sp_seed_quote (*path ? path : ".", q));
  if (out->len > 1)
    qsort (out->v, out->len, sizeof (*out->v), sp_seed_compare_names);
  return 0;
}

#endif
