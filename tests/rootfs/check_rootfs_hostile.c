/* Hostile packages, built in the test with libarchive, are refused: nothing
   is written outside the build tree, and a failed build leaves nothing
   behind.  These fail before anything needs root.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"

#include "rootfs/lock.h"
#include "rootfs_fixture.h"
#include "sp_check.h"

#define N(a) (sizeof (a) / sizeof ((a)[0]))

/* A failed build leaves only what the test made: the debs and the lock.  */
static void
assert_nothing_left_behind (void)
{
  cleanup_free char *names = fx_list_dir (fx.dir);
  ck_assert_str_eq (names, "debs rootfs.lock");
}

static void
assert_absent (const char *path)
{
  struct stat st;
  if (lstat (path, &st) == 0)
    ck_abort_msg ("`%s` exists: something was written outside the build tree", path);
}

static void
refused (const char *needle)
{
  ck_assert_msg (!fx_build (), "the build succeeded");
  ck_assert_msg (fx_error_has (needle), "wrong error: %s", fx.error);
  assert_nothing_left_behind ();
}

START_TEST (member_with_dotdot_is_refused)
{
  const struct fx_member m[] = {
    { 'd', "./usr/", NULL, 0 },
    { 'f', "./usr/../../escaped", "x", 0 },
  };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("`..` path component");
  assert_absent ("/tmp/escaped");
}
END_TEST

START_TEST (member_with_only_dotdot_is_refused)
{
  const struct fx_member m[] = { { 'f', "../escaped", "x", 0 } };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("`..` path component");
}
END_TEST

START_TEST (member_with_absolute_path_is_refused)
{
  char path[128];
  const struct fx_member m[] = { { 'f', path, "x", 0 } };

  snprintf (path, sizeof (path), "%s/escaped", fx.dir);
  fx_add_package ("evil", m, N (m), NULL);
  refused ("absolute path");
  assert_absent (path);
}
END_TEST

START_TEST (write_through_a_symlink_to_an_absolute_directory_is_refused)
{
  char target[128], escaped[160];
  const struct fx_member m[] = {
    { 'l', "./evil", target, 0 },
    { 'f', "./evil/escaped", "x", 0 },
  };

  /* The target exists, so a naive extractor would write into it.  */
  snprintf (target, sizeof (target), "%s/debs", fx.dir);
  snprintf (escaped, sizeof (escaped), "%s/escaped", target);
  fx_add_package ("evil", m, N (m), NULL);
  refused ("`evil` is a symlink");
  assert_absent (escaped);
}
END_TEST

START_TEST (write_through_a_dotdot_symlink_is_refused)
{
  char escaped[160];
  /* The build tree is fx.dir/.out.build-XXXXXXXX/root: ../.. is fx.dir.  */
  const struct fx_member m[] = {
    { 'l', "./evil", "../..", 0 },
    { 'd', "./evil/sub/", NULL, 0 },
    { 'f', "./evil/escaped", "x", 0 },
  };

  snprintf (escaped, sizeof (escaped), "%s/escaped", fx.dir);
  fx_add_package ("evil", m, N (m), NULL);
  refused ("`evil` is a symlink");
  assert_absent (escaped);
  snprintf (escaped, sizeof (escaped), "%s/sub", fx.dir);
  assert_absent (escaped);
}
END_TEST

START_TEST (write_through_a_symlink_deeper_in_the_path_is_refused)
{
  const struct fx_member m[] = {
    { 'd', "./usr/", NULL, 0 },
    { 'l', "./usr/lib", "/etc", 0 },
    { 'f', "./usr/lib/escaped-sp-rootfs-test", "x", 0 },
  };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("`usr/lib` is a symlink");
  assert_absent ("/etc/escaped-sp-rootfs-test");
}
END_TEST

START_TEST (symlink_over_an_existing_directory_is_refused)
{
  const struct fx_member a[] = { { 'd', "./usr/", NULL, 0 }, { 'd', "./usr/lib/", NULL, 0 } };
  const struct fx_member b[] = { { 'l', "./usr/lib", "/etc", 0 } };

  fx_add_package ("pkg-a", a, N (a), NULL);
  fx_add_package ("pkg-b", b, N (b), NULL);
  refused ("already exists");
}
END_TEST

START_TEST (hardlink_to_dotdot_is_refused)
{
  const struct fx_member m[] = { { 'h', "./stolen", "../x", 0 } };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("hardlink target: `..` path component");
}
END_TEST

START_TEST (hardlink_to_etc_passwd_is_refused)
{
  const struct fx_member m[] = { { 'h', "./passwd", "/etc/passwd", 0 } };
  struct stat before, after;

  ck_assert_int_eq (stat ("/etc/passwd", &before), 0);
  fx_add_package ("evil", m, N (m), NULL);
  refused ("hardlink target: absolute path");
  ck_assert_int_eq (stat ("/etc/passwd", &after), 0);
  ck_assert_uint_eq (before.st_nlink, after.st_nlink);
}
END_TEST

START_TEST (hardlink_to_a_file_not_yet_extracted_is_refused)
{
  const struct fx_member m[] = {
    { 'h', "./early", "late", 0 },
    { 'f', "./late", "x", 0 },
  };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("hardlink target `late` is not a regular file extracted before it");
}
END_TEST

START_TEST (hardlink_to_a_directory_is_refused)
{
  const struct fx_member m[] = {
    { 'd', "./usr/", NULL, 0 },
    { 'h', "./usr2", "usr", 0 },
  };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("not a regular file");
}
END_TEST

START_TEST (hardlink_through_a_symlink_is_refused)
{
  const struct fx_member m[] = {
    { 'l', "./etc-link", "/etc", 0 },
    { 'h', "./passwd", "etc-link/passwd", 0 },
  };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("`etc-link` is a symlink");
}
END_TEST

START_TEST (character_device_is_refused)
{
  const struct fx_member m[] = { { 'c', "./mem", NULL, 0 } };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("a device node");
}
END_TEST

START_TEST (block_device_is_refused)
{
  const struct fx_member m[] = { { 'b', "./sda", NULL, 0 } };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("a device node");
}
END_TEST

START_TEST (fifo_is_refused)
{
  const struct fx_member m[] = { { 'p', "./pipe", NULL, 0 } };

  fx_add_package ("evil", m, N (m), NULL);
  refused ("a FIFO");
}
END_TEST

START_TEST (deb_whose_sha256_differs_from_the_lock_is_refused_before_parsing)
{
  const struct fx_deb_options garbage = { .garbage = true, .wrong_sha = true };
  const struct fx_member m[] = { { 'f', "../escaped", "x", 0 } };
  const struct fx_deb_options hostile = { .wrong_sha = true };

  /* Not even an ar archive: had it been parsed, the error would say so.  */
  fx_add_package ("garbage", NULL, 0, &garbage);
  refused ("does not match the lock");
  ck_assert_ptr_null (strstr (fx.error, "ar archive"));

  fx_teardown ();
  fx_setup ();
  fx_add_package ("hostile", m, N (m), &hostile);
  refused ("does not match the lock");
  ck_assert_ptr_null (strstr (fx.error, ".."));
}
END_TEST

START_TEST (truncated_deb_is_refused)
{
  const struct fx_member m[] = {
    { 'd', "./usr/", NULL, 0 },
    { 'f', "./usr/data", "some data that the truncation cuts off", 0 },
  };
  const struct fx_deb_options in_control = { .truncate_to = 200 };
  const struct fx_deb_options in_data = { .truncate_by = 40 };

  fx_add_package ("short", m, N (m), &in_control);
  refused ("short_1.0_all.deb");
  ck_assert_msg (fx_error_has ("Truncated"), "error: %s", fx.error);

  fx_teardown ();
  fx_setup ();
  fx_add_package ("short", m, N (m), &in_data);
  refused ("short_1.0_all.deb");
  ck_assert_msg (fx_error_has ("runcated"), "error: %s", fx.error); /* "Truncated" or "truncated" */
}
END_TEST

START_TEST (wrong_debian_binary_is_refused)
{
  const struct fx_member m[] = { { 'f', "./x", "x", 0 } };
  const struct fx_deb_options v3 = { .debian_binary = "3.0\n" };

  fx_add_package ("future", m, N (m), &v3);
  refused ("`debian-binary` is not \"2.0\\n\"");
}
END_TEST

START_TEST (unknown_data_compression_is_refused)
{
  const struct fx_member m[] = { { 'f', "./x", "x", 0 } };
  const struct fx_deb_options lzma = { .data_name = "data.tar.lzma" };

  fx_add_package ("odd", m, N (m), &lzma);
  refused ("expected the ar member `data.tar.{xz,gz,zst}`");
}
END_TEST

START_TEST (member_after_data_tar_is_refused)
{
  const struct fx_member m[] = { { 'f', "./x", "x", 0 } };
  const struct fx_deb_options extra = { .member_after_data = true };

  fx_add_package ("extra", m, N (m), &extra);
  refused ("member after data.tar");
}
END_TEST

START_TEST (duplicate_file_across_two_packages_is_refused)
{
  const struct fx_member a[] = { { 'd', "./usr/", NULL, 0 }, { 'f', "./usr/same", "from a", 0 } };
  const struct fx_member b[] = { { 'd', "./usr/", NULL, 0 }, { 'f', "./usr/same", "from b", 0 } };

  fx_add_package ("pkg-a", a, N (a), NULL);
  fx_add_package ("pkg-b", b, N (b), NULL);
  refused ("`usr/same` already exists");
  ck_assert_ptr_nonnull (strstr (fx.error, "pkg-b_1.0_all.deb"));
}
END_TEST

START_TEST (duplicate_member_in_one_package_is_refused)
{
  const struct fx_member m[] = { { 'f', "./same", "one", 0 }, { 'f', "./same", "two", 0 } };

  fx_add_package ("twice", m, N (m), NULL);
  refused ("`same` already exists");
}
END_TEST

START_TEST (shell_outside_the_pruned_directories_is_refused)
{
  const struct fx_member m[] = {
    { 'd', "./usr/", NULL, 0 },
    { 'd', "./usr/lib/", NULL, 0 },
    { 'f', "./usr/lib/sh", "#!", 0755 },
  };

  fx_add_package ("sneaky", m, N (m), NULL);
  refused ("a shell, which the rootfs must not hold");
}
END_TEST

START_TEST (pip_wheel_is_refused)
{
  const struct fx_member m[] = { { 'f', "./pip-23.0-py3-none-any.whl", "PK", 0 } };

  fx_add_package ("wheel", m, N (m), NULL);
  refused ("a wheel");
}
END_TEST

START_TEST (missing_deb_says_to_run_rootfs_fetch)
{
  const struct fx_member m[] = { { 'f', "./x", "x", 0 } };
  char path[160];

  fx_add_package ("gone", m, N (m), NULL);
  snprintf (path, sizeof (path), "%s/gone_1.0_all.deb", fx.debs);
  ck_assert_int_eq (unlink (path), 0);
  refused ("scripts/rootfs-fetch");
}
END_TEST

START_TEST (member_deeper_than_the_walks_allow_is_refused)
{
  char deep[4 * 64 + 8] = ".";
  const struct fx_member m[] = { { 'f', deep, "x", 0 } };

  for (int i = 0; i < 64; i++)
    strcat (deep, "/d");
  fx_add_package ("deep", m, N (m), NULL);
  refused ("path deeper than 63 components");
}
END_TEST

START_TEST (member_with_a_path_over_the_tree_limit_is_refused)
{
  /* 42 components of 100 bytes: 4,241 bytes, past SP_TREE_PATH_MAX - 1
     (4,095) and not too deep.  */
  char path[4400] = ".";
  const struct fx_member m[] = { { 'f', path, "x", 0 } };

  for (int i = 0; i < 42; i++)
    {
      size_t len = strlen (path);

      path[len] = '/';
      memset (path + len + 1, 'a', 100);
      path[len + 101] = '\0';
    }
  fx_add_package ("long", m, N (m), NULL);
  refused ("path longer than 4095 bytes");
}
END_TEST

START_TEST (deb_larger_than_the_cap_is_refused_unread)
{
  char path[160];
  cleanup_close int fd = -1;

  snprintf (path, sizeof (path), "%s/huge_1.0_all.deb", fx.debs);
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (ftruncate (fd, 64 * 1024 * 1024 + 1), 0);
  free (fx.lock_text);
  fx.lock_text = strdup (SP_LOCK_HEADER
                         "\n"
                         "huge 1.0 all 0000000000000000000000000000000000000000000000000000000000000000\n");
  refused ("larger than 67108864 bytes");
}
END_TEST

START_TEST (existing_output_is_refused_and_kept)
{
  const struct fx_member m[] = { { 'f', "./x", "x", 0 } };
  char marker[160];
  cleanup_free char *names = NULL;

  fx_add_package ("ok", m, N (m), NULL);
  ck_assert_int_eq (mkdir (fx.out, 0755), 0);
  snprintf (marker, sizeof (marker), "%s/keep", fx.out);
  fx_write_file (marker, "mine");
  ck_assert (!fx_build ());
  ck_assert_msg (fx_error_has ("already exists"), "%s", fx.error);
  names = fx_list_dir (fx.out);
  ck_assert_str_eq (names, "keep");
}
END_TEST

START_TEST (failed_build_late_in_the_lock_leaves_no_temporary_directory)
{
  /* Two good packages are extracted before the third fails.  */
  const struct fx_member a[] = { { 'd', "./usr/", NULL, 0 }, { 'f', "./usr/a", "a", 0 } };
  const struct fx_member b[] = { { 'd', "./usr/", NULL, 0 }, { 'd', "./usr/b/", NULL, 0555 } };
  const struct fx_member c[] = { { 'p', "./usr/fifo", NULL, 0 } };

  fx_add_package ("pkg-a", a, N (a), NULL);
  fx_add_package ("pkg-b", b, N (b), NULL);
  fx_add_package ("pkg-c", c, N (c), NULL);
  refused ("FIFO");
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("rootfs_hostile");
  TCase *tc = tcase_create ("hostile");

  tcase_add_checked_fixture (tc, fx_setup, fx_teardown);
  tcase_add_test (tc, member_with_dotdot_is_refused);
  tcase_add_test (tc, member_with_only_dotdot_is_refused);
  tcase_add_test (tc, member_with_absolute_path_is_refused);
  tcase_add_test (tc, write_through_a_symlink_to_an_absolute_directory_is_refused);
  tcase_add_test (tc, write_through_a_dotdot_symlink_is_refused);
  tcase_add_test (tc, write_through_a_symlink_deeper_in_the_path_is_refused);
  tcase_add_test (tc, symlink_over_an_existing_directory_is_refused);
  tcase_add_test (tc, hardlink_to_dotdot_is_refused);
  tcase_add_test (tc, hardlink_to_etc_passwd_is_refused);
  tcase_add_test (tc, hardlink_to_a_file_not_yet_extracted_is_refused);
  tcase_add_test (tc, hardlink_to_a_directory_is_refused);
  tcase_add_test (tc, hardlink_through_a_symlink_is_refused);
  tcase_add_test (tc, character_device_is_refused);
  tcase_add_test (tc, block_device_is_refused);
  tcase_add_test (tc, fifo_is_refused);
  tcase_add_test (tc, deb_whose_sha256_differs_from_the_lock_is_refused_before_parsing);
  tcase_add_test (tc, truncated_deb_is_refused);
  tcase_add_test (tc, wrong_debian_binary_is_refused);
  tcase_add_test (tc, unknown_data_compression_is_refused);
  tcase_add_test (tc, member_after_data_tar_is_refused);
  tcase_add_test (tc, duplicate_file_across_two_packages_is_refused);
  tcase_add_test (tc, duplicate_member_in_one_package_is_refused);
  tcase_add_test (tc, shell_outside_the_pruned_directories_is_refused);
  tcase_add_test (tc, pip_wheel_is_refused);
  tcase_add_test (tc, missing_deb_says_to_run_rootfs_fetch);
  tcase_add_test (tc, member_deeper_than_the_walks_allow_is_refused);
  tcase_add_test (tc, member_with_a_path_over_the_tree_limit_is_refused);
  tcase_add_test (tc, deb_larger_than_the_cap_is_refused_unread);
  tcase_add_test (tc, existing_output_is_refused_and_kept);
  tcase_add_test (tc, failed_build_late_in_the_lock_leaves_no_temporary_directory);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
