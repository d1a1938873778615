/* A credential from systemd's credential directory: see secret_cred.h.  */
#define _GNU_SOURCE
#include "stage/secret_cred.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/quote.h"

/* The read buffer: the whole of it is wiped, not just up to a NUL, since a
   refused value may hold one.  */
struct cred_buf
{
  char *data;
  size_t size;
};

static void
cred_buf_wipe (struct cred_buf *b)
{
  if (b->data)
    {
      explicit_bzero (b->data, b->size);
      free (b->data);
    }
  b->data = NULL;
}
#define cleanup_cred_buf __attribute__ ((cleanup (cred_buf_wipe)))

/* Refuses what a token file cannot hold.  The offending byte's value and
   position are never named: they are part of the secret.  */
static int
check_value (const char *name, const char *data, size_t len, size_t max, sp_error_t *err)
{
  if (len == 0)
    return sp_make_error (err, 0, "credential `%s` is empty", name);
  if (len > max)
    return sp_make_error (err, 0, "credential `%s` is longer than %zu bytes", name, max);
  for (size_t i = 0; i < len; i++)
    {
      unsigned char c = (unsigned char)data[i];

      if (c == '\0')
        return sp_make_error (err, 0, "credential `%s` holds a NUL byte", name);
      if (c < 0x20 || c == 0x7f)
        return sp_make_error (
            err, 0, "credential `%s` holds a control byte (only one trailing newline is allowed)", name);
    }
  return 0;
}

int
sp_secret_cred_read_at (int dirfd, const char *name, size_t max, char **secret, sp_error_t *err)
{
  /* The file may hold max bytes and one newline; one more byte read tells
     a longer file, and one is the NUL.  */
  const size_t cap = max + 1;
  cleanup_cred_buf struct cred_buf buf = { .data = NULL, .size = cap + 2 };
  cleanup_close int fd = -1;
  struct stat st;
  size_t used = 0;

  *secret = NULL;
  /* Non-blocking: a FIFO planted under the name must not hang staging; the
     type check below refuses it.  */
  fd = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return 0;
  if (fd < 0 && errno == ELOOP)
    return sp_make_error (err, 0, "credential `%s` is a symlink; it is never followed", name);
  if (fd < 0)
    return sp_make_error (err, errno, "credential `%s`: open", name);
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "credential `%s`: stat", name);
  if (!S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "credential `%s` is not a regular file", name);
  if (st.st_uid != geteuid ())
    return sp_make_error (err, 0, "credential `%s` is owned by uid %u, not by uid %u, which reads it", name,
                          (unsigned)st.st_uid, (unsigned)geteuid ());
  if (st.st_mode & 077)
    return sp_make_error (err, 0,
                          "credential `%s` has mode %04o: a secret must have no group or other access", name,
                          (unsigned)(st.st_mode & 07777));
  /* Its size before its bytes: max, and one newline.  */
  if (st.st_size < 0 || (unsigned long long)st.st_size > cap)
    return sp_make_error (err, 0, "credential `%s` is longer than %zu bytes", name, max);

  buf.data = calloc (1, buf.size);
  if (buf.data == NULL)
    return sp_make_error (err, ENOMEM, "credential `%s`", name);
  /* Reads until end of file or one byte past cap: a file that grew after
     the fstat is refused too.  */
  while (used <= cap)
    {
      ssize_t n = TEMP_FAILURE_RETRY (read (fd, buf.data + used, cap + 1 - used));

      if (n < 0)
        return sp_make_error (err, errno, "credential `%s`: read", name);
      if (n == 0)
        break;
      used += (size_t)n;
    }
  if (used > cap)
    return sp_make_error (err, 0, "credential `%s` is longer than %zu bytes", name, max);
  if (used > 0 && buf.data[used - 1] == '\n')
    buf.data[--used] = '\0';
  if (check_value (name, buf.data, used, max, err) < 0)
    return -1;
  *secret = get_and_reset (&buf.data);
  return 0;
}

int
sp_secret_cred_take (const char *name, size_t max, char **secret, sp_error_t *err)
{
  const char *dir = getenv (SP_CREDENTIALS_DIRECTORY_ENV);
  char quoted[SP_QUOTE_BUF_SIZE];
  cleanup_close int dirfd = -1;
  struct stat st;

  *secret = NULL;
  if (dir == NULL || dir[0] == '\0')
    return 0;
  sp_quote_name (dir, quoted);
  if (dir[0] != '/')
    return sp_make_error (err, 0, "$%s `%s` is not an absolute path", SP_CREDENTIALS_DIRECTORY_ENV, quoted);
  dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0 && (errno == ENOTDIR || errno == ELOOP))
    return sp_make_error (err, 0, "$%s `%s` is %s", SP_CREDENTIALS_DIRECTORY_ENV, quoted,
                          lstat (dir, &st) == 0 && S_ISLNK (st.st_mode) ? "a symlink; it is never followed"
                                                                        : "not a directory");
  if (dirfd < 0)
    return sp_make_error (err, errno, "$%s `%s`", SP_CREDENTIALS_DIRECTORY_ENV, quoted);
  if (fstat (dirfd, &st) < 0)
    return sp_make_error (err, errno, "$%s `%s`: stat", SP_CREDENTIALS_DIRECTORY_ENV, quoted);
  if (st.st_uid != geteuid () || (st.st_mode & 022))
    return sp_make_error (err, 0,
                          "$%s `%s` must be uid %u's and writable by nobody else (it is uid %u's, mode %04o)",
                          SP_CREDENTIALS_DIRECTORY_ENV, quoted, (unsigned)geteuid (), (unsigned)st.st_uid,
                          (unsigned)(st.st_mode & 07777));
  if (sp_secret_cred_read_at (dirfd, name, max, secret, err) < 0)
    return sp_error_wrap (err, "$%s `%s`", SP_CREDENTIALS_DIRECTORY_ENV, quoted);
  return 0;
}
