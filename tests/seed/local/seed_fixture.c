/* The local-clone tests' fixtures: see seed_fixture.h.  */
#define _GNU_SOURCE
#include "seed_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "base/cleanup.h"

char fx_dir[64];
int fx_fd = -1;

void
fx_setup (void)
{
  strcpy (fx_dir, "/tmp/sp-seed-test-XXXXXX");
  ck_assert_ptr_nonnull (mkdtemp (fx_dir));
  fx_fd = open (fx_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (fx_fd, 0);
  /* The git CLI of the fixtures reads no configuration of this machine.  */
  setenv ("GIT_CONFIG_NOSYSTEM", "1", 1);
  setenv ("GIT_CONFIG_GLOBAL", "/dev/null", 1);
}

static int
make_writable (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (flag == FTW_D || flag == FTW_DP)
    chmod (path, 0700);
  return 0;
}

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  return remove (path) < 0 ? -1 : 0;
}

void
fx_teardown (void)
{
  sp_closep (&fx_fd);
  nftw (fx_dir, make_writable, 16, FTW_PHYS);
  ck_assert_int_eq (nftw (fx_dir, remove_one, 16, FTW_PHYS | FTW_DEPTH), 0);
}

int
fx_mkdirs (int dirfd, const char *path)
{
  char buf[PATH_MAX];
  int fd;

  snprintf (buf, sizeof (buf), "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/')
      {
        *p = '\0';
        if (mkdirat (dirfd, buf, 0755) < 0)
          ck_assert_int_eq (errno, EEXIST);
        *p = '/';
      }
  if (mkdirat (dirfd, buf, 0755) < 0)
    ck_assert_int_eq (errno, EEXIST);
  fd = openat (dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  return fd;
}

static void
parents (int dirfd, const char *path)
{
  char buf[PATH_MAX];
  char *slash;

  snprintf (buf, sizeof (buf), "%s", path);
  slash = strrchr (buf, '/');
  if (slash)
    {
      *slash = '\0';
      close (fx_mkdirs (dirfd, buf));
    }
}

static void
write_at (int dirfd, const char *path, const char *content, int flags, mode_t mode)
{
  cleanup_close int fd = -1;
  size_t len = strlen (content);

  parents (dirfd, path);
  fd = openat (dirfd, path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, mode);
  ck_assert_msg (fd >= 0, "open %s: %s", path, strerror (errno));
  ck_assert_int_eq (write (fd, content, len), (ssize_t)len);
}

void
fx_put (int dirfd, const char *path, const char *content, mode_t mode)
{
  write_at (dirfd, path, content, O_TRUNC, mode);
  ck_assert_int_eq (fchmodat (dirfd, path, mode, 0), 0);
}

void
fx_append (int dirfd, const char *path, const char *content)
{
  write_at (dirfd, path, content, O_APPEND, 0644);
}

char *
fx_read (int dirfd, const char *path)
{
  cleanup_close int fd = openat (dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  char *buf;
  size_t len = 0;
  ssize_t n;

  if (fd < 0)
    return NULL;
  buf = malloc (1 << 20);
  ck_assert_ptr_nonnull (buf);
  while ((n = read (fd, buf + len, (1 << 20) - 1 - len)) > 0)
    len += (size_t)n;
  buf[len] = '\0';
  return buf;
}

static const char *search_needle;
static bool search_nocase;
static char *search_where;
static bool search_hit;

static bool
holds (const char *hay, size_t len, const char *needle, bool nocase)
{
  size_t nl = strlen (needle);

  for (size_t i = 0; i + nl <= len; i++)
    if (nocase ? strncasecmp (hay + i, needle, nl) == 0 : memcmp (hay + i, needle, nl) == 0)
      return true;
  return false;
}

static int
search_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  cleanup_close int fd = -1;
  cleanup_free char *buf = NULL;
  size_t len = 0;
  ssize_t n;

  if (flag != FTW_F || !S_ISREG (st->st_mode))
    return 0;
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  ck_assert_int_ge (fd, 0);
  buf = malloc ((size_t)st->st_size + 1);
  ck_assert_ptr_nonnull (buf);
  while (len < (size_t)st->st_size && (n = read (fd, buf + len, (size_t)st->st_size - len)) > 0)
    len += (size_t)n;
  if (holds (buf, len, search_needle, search_nocase))
    {
      search_hit = true;
      if (search_where)
        snprintf (search_where, PATH_MAX, "%s", path);
      return 1;
    }
  return 0;
}

bool
fx_tree_holds (const char *root, const char *needle, bool nocase, char *where)
{
  search_needle = needle;
  search_nocase = nocase;
  search_where = where;
  search_hit = false;
  ck_assert_int_ge (nftw (root, search_one, 16, FTW_PHYS), 0);
  return search_hit;
}

static int counted;

static int
count_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (ftw->level > 0)
    counted++;
  return 0;
}

int
fx_count_entries (const char *root)
{
  counted = 0;
  ck_assert_int_eq (nftw (root, count_one, 16, FTW_PHYS), 0);
  return counted;
}

int
fx_sh (const char *fmt, ...)
{
  char cmd[4096];
  va_list ap;
  int status;

  va_start (ap, fmt);
  vsnprintf (cmd, sizeof (cmd), fmt, ap);
  va_end (ap);
  status = system (cmd);
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

bool
fx_have_git (void)
{
  return fx_sh ("git --version >/dev/null 2>&1") == 0;
}

int
fx_git_repo (const char *name, const char *object_format)
{
  int fd;

  ck_assert_int_eq (fx_sh ("set -e; cd %s; git init -q -b main --object-format=%s %s; cd %s;"
                           " echo hello > README; git add README;"
                           " git -c user.name=t -c user.email=t@example.com commit -q -m first",
                           fx_dir, object_format, name, name),
                    0);
  fd = openat (fx_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  return fd;
}

void
fx_git_head (const char *name, char *out)
{
  char path[PATH_MAX];
  cleanup_free char *text = NULL;

  ck_assert_int_eq (fx_sh ("git -C %s/%s rev-parse HEAD > %s/head.txt", fx_dir, name, fx_dir), 0);
  snprintf (path, sizeof (path), "%s/head.txt", fx_dir);
  text = fx_read (AT_FDCWD, path);
  ck_assert_ptr_nonnull (text);
  text[strcspn (text, "\n")] = '\0';
  snprintf (out, 65, "%s", text);
  unlink (path);
}
