/* Opening and looking up below a directory without following a symlink
   (open_beneath.h).  Every open test runs twice: through sp_open_beneath
   (openat2 where the kernel has it) and through the per-component fallback,
   which must give the same answers.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/open_beneath.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

static char top[64];
static int top_fd = -1;
static int have_openat2;

typedef int (*open_fn) (int dirfd, const char *path, int flags);
static const open_fn opener[] = { sp_open_beneath, sp_open_beneath_by_component };
static const char *const opener_name[] = { "sp_open_beneath", "sp_open_beneath_by_component" };

/* The tree:  real/  real/f  ldir -> real  lfile -> real/f  abs -> /etc
   up -> ..  */
static void
setup (void)
{
  struct open_how how = { .flags = O_PATH | O_CLOEXEC };
  long fd = syscall (SYS_openat2, AT_FDCWD, ".", &how, sizeof (how));
  int f;

  have_openat2 = fd >= 0 || errno != ENOSYS;
  if (fd >= 0)
    close ((int)fd);
  strcpy (top, "/tmp/sp-open-beneath-XXXXXX");
  top_fd = sp_tmpdir_make (top);
  ck_assert_int_eq (mkdirat (top_fd, "real", 0755), 0);
  f = openat (top_fd, "real/f", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  ck_assert_int_ge (f, 0);
  close (f);
  ck_assert_int_eq (symlinkat ("real", top_fd, "ldir"), 0);
  ck_assert_int_eq (symlinkat ("real/f", top_fd, "lfile"), 0);
  ck_assert_int_eq (symlinkat ("/etc", top_fd, "abs"), 0);
  ck_assert_int_eq (symlinkat ("..", top_fd, "up"), 0);
}

static void
teardown (void)
{
  sp_closep (&top_fd);
  sp_tmpdir_remove (top);
}

/* Opening path with flags fails with want.  */
static void
open_fails (int which, const char *path, int flags, int want)
{
  int fd = opener[which](top_fd, path, flags);
  int got = errno;

  if (fd >= 0)
    close (fd);
  ck_assert_msg (fd == -1 && got == want, "%s (`%s`): fd %d, errno %s, want %s", opener_name[which], path, fd,
                 strerrorname_np (got), strerrorname_np (want));
}

/* Opening path with flags succeeds, on an inode of the given type.  */
static void
open_gives (int which, const char *path, int flags, mode_t type)
{
  cleanup_close int fd = opener[which](top_fd, path, flags);
  struct stat st;

  ck_assert_msg (fd >= 0, "%s (`%s`): %s", opener_name[which], path, strerror (errno));
  ck_assert (fcntl (fd, F_GETFD) & FD_CLOEXEC);
  ck_assert_int_eq (fstat (fd, &st), 0);
  ck_assert_msg ((st.st_mode & S_IFMT) == type, "%s (`%s`): type %o", opener_name[which], path,
                 st.st_mode & S_IFMT);
}

START_TEST (a_plain_path_below_the_directory_opens)
{
  open_gives (_i, "real/f", O_RDONLY, S_IFREG);
  open_gives (_i, "real", O_RDONLY | O_DIRECTORY, S_IFDIR);
  open_gives (_i, "real", O_PATH | O_DIRECTORY, S_IFDIR);
}
END_TEST

START_TEST (a_symlinked_directory_on_the_path_is_refused)
{
  open_fails (_i, "ldir/f", O_RDONLY, ELOOP);
  open_fails (_i, "abs/passwd", O_RDONLY, ELOOP);
  open_fails (_i, "up/tmp", O_PATH, ELOOP);
}
END_TEST

START_TEST (a_trailing_symlink_is_refused_unless_o_path_o_nofollow_asks_for_it)
{
  open_fails (_i, "lfile", O_RDONLY, ELOOP);
  open_fails (_i, "lfile", O_PATH, ELOOP);
  open_fails (_i, "ldir", O_PATH | O_DIRECTORY, ELOOP);
  open_fails (_i, "ldir", O_RDONLY | O_DIRECTORY, ELOOP);
  open_fails (_i, "lfile", O_RDONLY | O_NOFOLLOW, ELOOP);
  open_fails (_i, "ldir", O_PATH | O_DIRECTORY | O_NOFOLLOW, ENOTDIR);
  open_gives (_i, "lfile", O_PATH | O_NOFOLLOW, S_IFLNK);
}
END_TEST

START_TEST (missing_and_non_directory_components_fail_as_openat_would)
{
  open_fails (_i, "real/missing", O_RDONLY, ENOENT);
  open_fails (_i, "missing/f", O_RDONLY, ENOENT);
  open_fails (_i, "real/f/x", O_RDONLY, ENOTDIR);
}
END_TEST

START_TEST (dotdot_and_absolute_paths_never_leave_the_directory)
{
  /* openat2 says EXDEV; the fallback refuses `..` and `/` outright.  */
  int want = _i == 0 && have_openat2 ? EXDEV : EINVAL;

  open_fails (_i, "..", O_PATH, want);
  open_fails (_i, "../x", O_RDONLY, want);
  open_fails (_i, "real/../../x", O_RDONLY, want);
  open_fails (_i, "/etc/passwd", O_RDONLY, want);
}
END_TEST

START_TEST (the_fallback_refuses_dot_dotdot_and_empty_components)
{
  open_fails (1, ".", O_PATH, EINVAL);
  open_fails (1, "", O_PATH, EINVAL);
  open_fails (1, "real/./f", O_RDONLY, EINVAL);
  open_fails (1, "real/../real/f", O_RDONLY, EINVAL);
  open_fails (1, "real//f", O_RDONLY, EINVAL);
  open_fails (1, "real/", O_RDONLY, EINVAL);
}
END_TEST

START_TEST (an_overlong_component_fails_with_enametoolong)
{
  char path[NAME_MAX + 8];

  memset (path, 'x', sizeof (path) - 1);
  path[sizeof (path) - 1] = '\0';
  open_fails (_i, path, O_RDONLY, ENAMETOOLONG);
}
END_TEST

static void
lookup_is (const char *path, enum sp_lookup_what what, size_t len)
{
  struct sp_lookup found;

  ck_assert_int_eq (sp_lookup_beneath (top_fd, path, &found), 0);
  ck_assert_msg (found.what == what, "`%s`: what %d, want %d", path, found.what, what);
  ck_assert_uint_eq (found.len, len);
}

START_TEST (lookup_tells_present_from_absent)
{
  struct sp_lookup found;

  lookup_is ("real/f", SP_LOOKUP_PRESENT, 6);
  ck_assert_int_eq (sp_lookup_beneath (top_fd, "real/f", &found), 0);
  ck_assert (S_ISREG (found.st.st_mode));
  lookup_is ("real", SP_LOOKUP_PRESENT, 4);
  lookup_is ("real/missing", SP_LOOKUP_ABSENT, 12);
  lookup_is ("missing/deeper/still", SP_LOOKUP_ABSENT, 7);
}
END_TEST

START_TEST (lookup_reports_the_trailing_symlink_itself)
{
  struct sp_lookup found;

  ck_assert_int_eq (sp_lookup_beneath (top_fd, "lfile", &found), 0);
  ck_assert_int_eq (found.what, SP_LOOKUP_PRESENT);
  ck_assert (S_ISLNK (found.st.st_mode));
}
END_TEST

START_TEST (lookup_names_the_ancestor_that_is_a_symlink_or_a_file)
{
  lookup_is ("ldir/f", SP_LOOKUP_SYMLINK_ANCESTOR, 4);
  lookup_is ("abs/passwd", SP_LOOKUP_SYMLINK_ANCESTOR, 3);
  lookup_is ("real/f/x/y", SP_LOOKUP_NONDIR_ANCESTOR, 6);
}
END_TEST

START_TEST (lookup_fails_with_errno_on_an_overlong_component)
{
  struct sp_lookup found;
  char path[5 + NAME_MAX + 2] = "real/";

  memset (path + 5, 'x', NAME_MAX + 1);
  path[sizeof (path) - 1] = '\0';
  ck_assert_int_eq (sp_lookup_beneath (top_fd, path, &found), -1);
  ck_assert_int_eq (errno, ENAMETOOLONG);
  ck_assert_int_eq (found.what, SP_LOOKUP_STAT_FAILED);
  ck_assert_uint_eq (found.len, strlen (path));
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("open_beneath");
  TCase *open = tcase_create ("open");
  TCase *lookup = tcase_create ("lookup");

  tcase_add_checked_fixture (open, setup, teardown);
  tcase_add_loop_test (open, a_plain_path_below_the_directory_opens, 0, 2);
  tcase_add_loop_test (open, a_symlinked_directory_on_the_path_is_refused, 0, 2);
  tcase_add_loop_test (open, a_trailing_symlink_is_refused_unless_o_path_o_nofollow_asks_for_it, 0, 2);
  tcase_add_loop_test (open, missing_and_non_directory_components_fail_as_openat_would, 0, 2);
  tcase_add_loop_test (open, dotdot_and_absolute_paths_never_leave_the_directory, 0, 2);
  tcase_add_test (open, the_fallback_refuses_dot_dotdot_and_empty_components);
  tcase_add_loop_test (open, an_overlong_component_fails_with_enametoolong, 0, 2);
  suite_add_tcase (s, open);

  tcase_add_checked_fixture (lookup, setup, teardown);
  tcase_add_test (lookup, lookup_tells_present_from_absent);
  tcase_add_test (lookup, lookup_reports_the_trailing_symlink_itself);
  tcase_add_test (lookup, lookup_names_the_ancestor_that_is_a_symlink_or_a_file);
  tcase_add_test (lookup, lookup_fails_with_errno_on_an_overlong_component);
  suite_add_tcase (s, lookup);
  return s;
}

SP_CHECK_MAIN (make_suite)
