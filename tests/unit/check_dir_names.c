/* Sorted directory listings (dir_names.h): byte order, no `.` or `..`, the
   directory fd left as it was, messages without a path, and child paths that
   never overflow their buffer.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/dir_names.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

static char top[64];
static int top_fd = -1;

static void
setup (void)
{
  strcpy (top, "/tmp/sp-dir-names-XXXXXX");
  top_fd = sp_tmpdir_make (top);
}

static void
teardown (void)
{
  sp_closep (&top_fd);
  sp_tmpdir_remove (top);
}

static void
touch (const char *name)
{
  int fd = openat (top_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

  ck_assert_msg (fd >= 0, "create %s: %s", name, strerror (errno));
  close (fd);
}

static void
read_ok (int dirfd, struct sp_dir_names *names)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_dir_names_read (dirfd, names, &err) < 0)
    ck_abort_msg ("sp_dir_names_read: %s", sp_error_message (err));
}

START_TEST (names_are_listed_in_byte_order)
{
  /* Created out of order; byte order puts uppercase before `_` before
     lowercase, and a UTF-8 `é` (0xc3 0xa9) after `~`.  */
  const char *created[] = { "b", "\xc3\xa9", "a0", "~", "B", "a", "_" };
  const char *expected[] = { "B", "_", "a", "a0", "b", "dir", "~", "\xc3\xa9" };
  cleanup_dir_names struct sp_dir_names names = { 0 };

  for (size_t i = 0; i < sizeof (created) / sizeof (created[0]); i++)
    touch (created[i]);
  ck_assert_int_eq (mkdirat (top_fd, "dir", 0755), 0);
  read_ok (top_fd, &names);
  ck_assert_uint_eq (names.len, sizeof (expected) / sizeof (expected[0]));
  for (size_t i = 0; i < names.len; i++)
    ck_assert_str_eq (names.v[i], expected[i]);
}
END_TEST

START_TEST (dot_and_dotdot_are_left_out)
{
  cleanup_dir_names struct sp_dir_names names = { 0 };

  read_ok (top_fd, &names);
  ck_assert_uint_eq (names.len, 0);
  touch (".hidden");
  touch ("..two");
  sp_dir_names_release (&names);
  read_ok (top_fd, &names);
  ck_assert_uint_eq (names.len, 2);
  ck_assert_str_eq (names.v[0], "..two");
  ck_assert_str_eq (names.v[1], ".hidden");
}
END_TEST

START_TEST (hundreds_of_names_all_come_back_sorted)
{
  cleanup_dir_names struct sp_dir_names names = { 0 };
  char name[16];

  for (int i = 299; i >= 0; i--)
    {
      snprintf (name, sizeof (name), "n%03d", i);
      touch (name);
    }
  read_ok (top_fd, &names);
  ck_assert_uint_eq (names.len, 300);
  for (int i = 0; i < 300; i++)
    {
      snprintf (name, sizeof (name), "n%03d", i);
      ck_assert_str_eq (names.v[i], name);
    }
}
END_TEST

START_TEST (the_directory_fd_can_be_listed_again_and_may_be_o_path)
{
  cleanup_dir_names struct sp_dir_names first = { 0 };
  cleanup_dir_names struct sp_dir_names second = { 0 };
  cleanup_dir_names struct sp_dir_names by_path = { 0 };
  cleanup_close int path_fd = open (top, O_PATH | O_DIRECTORY | O_CLOEXEC);

  touch ("x");
  touch ("y");
  read_ok (top_fd, &first);
  read_ok (top_fd, &second);
  ck_assert_int_ge (path_fd, 0);
  read_ok (path_fd, &by_path);
  ck_assert_uint_eq (first.len, 2);
  ck_assert_uint_eq (second.len, 2);
  ck_assert_uint_eq (by_path.len, 2);
  ck_assert_str_eq (second.v[1], "y");
  ck_assert_str_eq (by_path.v[0], "x");
  /* Still open and usable by the caller.  */
  ck_assert_int_eq (faccessat (top_fd, "x", F_OK, AT_SYMLINK_NOFOLLOW), 0);
}
END_TEST

START_TEST (a_failure_message_names_no_path)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_close int file_fd = -1;

  touch ("plain");
  file_fd = openat (top_fd, "plain", O_RDONLY | O_CLOEXEC);
  ck_assert_int_ge (file_fd, 0);
  ck_assert_int_eq (sp_dir_names_read (file_fd, &names, &err), -1);
  ck_assert_int_eq (err->status, ENOTDIR);
  ck_assert_ptr_null (strstr (sp_error_message (err), top));
  ck_assert_ptr_null (strstr (sp_error_message (err), "plain"));
  ck_assert_uint_eq (names.len, 0);
}
END_TEST

START_TEST (child_paths_join_with_one_slash_below_the_top)
{
  char path[16] = "";
  ssize_t len;

  len = sp_dir_child_path (path, sizeof (path), 0, "usr");
  ck_assert_int_eq (len, 3);
  ck_assert_str_eq (path, "usr");
  len = sp_dir_child_path (path, sizeof (path), (size_t)len, "lib");
  ck_assert_int_eq (len, 7);
  ck_assert_str_eq (path, "usr/lib");
  /* Back to the parent, then a sibling.  */
  path[3] = '\0';
  len = sp_dir_child_path (path, sizeof (path), 3, "bin");
  ck_assert_int_eq (len, 7);
  ck_assert_str_eq (path, "usr/bin");
}
END_TEST

START_TEST (a_child_path_that_does_not_fit_leaves_the_parent_alone)
{
  char path[8] = "abc";

  /* "abc/def" is 7 bytes: it fits with its NUL in 8, "abc/defg" does not.  */
  ck_assert_int_eq (sp_dir_child_path (path, sizeof (path), 3, "defg"), -1);
  ck_assert_str_eq (path, "abc");
  ck_assert_int_eq (sp_dir_child_path (path, sizeof (path), 3, "def"), 7);
  ck_assert_str_eq (path, "abc/def");
  path[0] = '\0';
  ck_assert_int_eq (sp_dir_child_path (path, sizeof (path), 0, "12345678"), -1);
  ck_assert_str_eq (path, "");
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("dir_names");
  TCase *tc = tcase_create ("dir_names");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, names_are_listed_in_byte_order);
  tcase_add_test (tc, dot_and_dotdot_are_left_out);
  tcase_add_test (tc, hundreds_of_names_all_come_back_sorted);
  tcase_add_test (tc, the_directory_fd_can_be_listed_again_and_may_be_o_path);
  tcase_add_test (tc, a_failure_message_names_no_path);
  tcase_add_test (tc, child_paths_join_with_one_slash_below_the_top);
  tcase_add_test (tc, a_child_path_that_does_not_fit_leaves_the_parent_alone);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
