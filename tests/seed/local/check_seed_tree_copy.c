/* The safe tree copy (tree/copy.h): what it copies, what it never follows,
   what it refuses, and its limits.  Needs root for mknod and chown.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "tree/copy.h"

#include "seed_fixture.h"
#include "sp_check.h"

#define UID 1234
#define GID 5678

static int src = -1;
static int dst = -1;
static char dst_path[128];

static void
setup (void)
{
  fx_setup ();
  src = fx_mkdirs (fx_fd, "src");
  dst = fx_mkdirs (fx_fd, "dst");
  snprintf (dst_path, sizeof (dst_path), "%s/dst", fx_dir);
}

static void
teardown (void)
{
  sp_closep (&src);
  sp_closep (&dst);
  fx_teardown ();
}

static const struct sp_copy_options roomy = { 1 << 20, 1000, 16, false, false, NULL, NULL };

static int
copy (const struct sp_copy_options *limits, sp_error_t *err)
{
  return sp_tree_copy (src, dst, limits, UID, GID, err);
}

static void
copy_ok (void)
{
  cleanup_error sp_error_t err = NULL;

  if (copy (&roomy, &err) < 0)
    ck_abort_msg ("sp_tree_copy: %s", sp_error_message (err));
}

/* Copies with limits, expecting a failure whose message holds every one of
   the NULL-terminated fragments.  */
static void
copy_fails_with (const struct sp_copy_options *limits, const char *fragment, ...)
{
  cleanup_error sp_error_t err = NULL;
  const char *msg;
  va_list ap;

  ck_assert_int_eq (copy (limits, &err), -1);
  msg = sp_error_message (err);
  va_start (ap, fragment);
  for (const char *f = fragment; f; f = va_arg (ap, const char *))
    ck_assert_msg (strstr (msg, f) != NULL, "`%s` is not in the error: %s", f, msg);
  va_end (ap);
}

static mode_t
mode_of (int dirfd, const char *path)
{
  struct stat st;

  ck_assert_int_eq (fstatat (dirfd, path, &st, AT_SYMLINK_NOFOLLOW), 0);
  return st.st_mode;
}

static void
assert_link (int dirfd, const char *path, const char *target)
{
  char buf[PATH_MAX];
  ssize_t n;

  ck_assert_msg (S_ISLNK (mode_of (dirfd, path)), "%s is not a symlink", path);
  n = readlinkat (dirfd, path, buf, sizeof (buf) - 1);
  ck_assert_int_ge (n, 0);
  buf[n] = '\0';
  ck_assert_str_eq (buf, target);
}

START_TEST (tree_copy_copies_files_directories_and_modes)
{
  cleanup_free char *a = NULL;
  cleanup_free char *tool = NULL;
  cleanup_free char *ro = NULL;

  fx_put (src, "a", "alpha", 0644);
  fx_put (src, "bin/tool", "#!/bin/sh\n", 0750);
  fx_put (src, "ro/f", "read only", 0444);
  ck_assert_int_eq (fchmodat (src, "ro", 0555, 0), 0);
  ck_assert_int_eq (mkdirat (src, "empty", 0710), 0);
  copy_ok ();

  ck_assert_ptr_nonnull (a = fx_read (dst, "a"));
  ck_assert_str_eq (a, "alpha");
  ck_assert_ptr_nonnull (tool = fx_read (dst, "bin/tool"));
  ck_assert_str_eq (tool, "#!/bin/sh\n");
  ck_assert_ptr_nonnull (ro = fx_read (dst, "ro/f"));
  ck_assert_str_eq (ro, "read only");
  ck_assert_int_eq (mode_of (dst, "a"), S_IFREG | 0644);
  ck_assert_int_eq (mode_of (dst, "bin/tool"), S_IFREG | 0750);
  ck_assert_int_eq (mode_of (dst, "ro/f"), S_IFREG | 0444);
  ck_assert_int_eq (mode_of (dst, "ro"), S_IFDIR | 0555);
  ck_assert_int_eq (mode_of (dst, "empty"), S_IFDIR | 0710);
  ck_assert_int_eq (fx_count_entries (dst_path), 6);
}
END_TEST

START_TEST (tree_copy_keeps_a_symlink_to_etc_passwd_as_a_link)
{
  cleanup_free char *passwd = fx_read (AT_FDCWD, "/etc/passwd");

  ck_assert_ptr_nonnull (passwd);
  passwd[strcspn (passwd, "\n")] = '\0'; /* its first line: root's entry */
  ck_assert_int_gt (strlen (passwd), 5);
  ck_assert_int_eq (symlinkat ("/etc/passwd", src, "passwd"), 0);
  copy_ok ();
  assert_link (dst, "passwd", "/etc/passwd");
  ck_assert (!fx_tree_holds (dst_path, passwd, false, NULL));
}
END_TEST

START_TEST (tree_copy_keeps_a_symlink_to_a_sibling_directory_as_a_link)
{
  cleanup_close int sibling = fx_mkdirs (fx_fd, "sibling");

  fx_put (sibling, "secret", "SIBLING-CANARY", 0644);
  fx_put (sibling, "deeper/more", "SIBLING-CANARY", 0644);
  ck_assert_int_eq (symlinkat ("../sibling", src, "sib"), 0);
  copy_ok ();
  assert_link (dst, "sib", "../sibling");
  ck_assert_int_eq (fx_count_entries (dst_path), 1);
  ck_assert (!fx_tree_holds (dst_path, "SIBLING-CANARY", false, NULL));
}
END_TEST

START_TEST (tree_copy_never_follows_a_symlinked_top_level_directory)
{
  char target[128];
  cleanup_close int outside = fx_mkdirs (fx_fd, "outside");

  fx_put (outside, "lib/secret.py", "OUTSIDE-CANARY", 0644);
  snprintf (target, sizeof (target), "%s/outside/lib", fx_dir);
  ck_assert_int_eq (symlinkat (target, src, "lib"), 0);
  fx_put (src, "main.py", "import lib\n", 0644);
  copy_ok ();
  assert_link (dst, "lib", target);
  ck_assert_int_eq (fx_count_entries (dst_path), 2);
  ck_assert (!fx_tree_holds (dst_path, "OUTSIDE-CANARY", false, NULL));
}
END_TEST

START_TEST (tree_copy_refuses_a_fifo_without_blocking)
{
  /* No writer ever opens it: a blocking open would hang until the check
     timeout kills the test.  */
  fx_put (src, "a", "alpha", 0644);
  ck_assert_int_eq (mkfifoat (src, "pipe", 0644), 0);
  copy_fails_with (&roomy, "`pipe`", "a FIFO", NULL);
}
END_TEST

START_TEST (tree_copy_refuses_a_socket)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  cleanup_close int s = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  ck_assert_int_ge (s, 0);
  snprintf (addr.sun_path, sizeof (addr.sun_path), "%s/src/sock", fx_dir);
  ck_assert_int_eq (bind (s, (struct sockaddr *)&addr, sizeof (addr)), 0);
  copy_fails_with (&roomy, "`sock`", "a socket", NULL);
}
END_TEST

START_TEST (tree_copy_refuses_a_device_node)
{
  cleanup_close int dev = fx_mkdirs (src, "dev");

  ck_assert_int_eq (mknodat (dev, "null", S_IFCHR | 0666, makedev (1, 3)), 0);
  copy_fails_with (&roomy, "`dev/null`", "a character device", NULL);
}
END_TEST

START_TEST (tree_copy_refuses_a_hardlink_to_a_file_outside)
{
  cleanup_close int outside = fx_mkdirs (fx_fd, "outside");
  cleanup_close int docs = fx_mkdirs (src, "docs");

  fx_put (outside, "secret", "OUTSIDE-CANARY", 0644);
  ck_assert_int_eq (linkat (outside, "secret", docs, "linked", 0), 0);
  copy_fails_with (&roomy, "`docs/linked`", "hardlink with 2 names, only 1 of them inside the tree", NULL);
  /* A second name inside does not make up for the one outside.  */
  ck_assert_int_eq (linkat (outside, "secret", src, "again", 0), 0);
  sp_closep (&dst);
  dst = fx_mkdirs (fx_fd, "dst2");
  copy_fails_with (&roomy, "`again`", "hardlink with 3 names, only 2 of them inside the tree", NULL);
}
END_TEST

START_TEST (tree_copy_copies_two_inside_hardlinks_as_independent_files)
{
  struct stat a, b;
  cleanup_free char *after = NULL;

  fx_put (src, "a", "shared", 0644);
  ck_assert_int_eq (linkat (src, "a", src, "sub_b", 0), 0);
  copy_ok ();
  ck_assert_int_eq (fstatat (dst, "a", &a, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert_int_eq (fstatat (dst, "sub_b", &b, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert_int_eq (a.st_nlink, 1);
  ck_assert_int_eq (b.st_nlink, 1);
  ck_assert (a.st_ino != b.st_ino);
  fx_put (dst, "a", "changed", 0644);
  ck_assert_ptr_nonnull (after = fx_read (dst, "sub_b"));
  ck_assert_str_eq (after, "shared");
}
END_TEST

START_TEST (tree_copy_strips_setuid_setgid_and_sticky)
{
  fx_put (src, "suid", "x", 04755);
  fx_put (src, "sgid", "x", 02755);
  ck_assert_int_eq (mkdirat (src, "tmp", 0777), 0);
  ck_assert_int_eq (fchmodat (src, "tmp", 01777, 0), 0);
  ck_assert_int_eq (mode_of (src, "suid"), S_IFREG | 04755);
  copy_ok ();
  ck_assert_int_eq (mode_of (dst, "suid"), S_IFREG | 0755);
  ck_assert_int_eq (mode_of (dst, "sgid"), S_IFREG | 0755);
  ck_assert_int_eq (mode_of (dst, "tmp"), S_IFDIR | 0777);
}
END_TEST

START_TEST (tree_copy_owner_writable_makes_a_read_only_tree_writable)
{
  const struct sp_copy_options snapshot = { 1 << 20, 1000, 16, true, false, NULL, NULL };
  cleanup_error sp_error_t err = NULL;

  fx_put (src, "d/ro", "x", 0444);
  fx_put (src, "d/rx", "x", 0555);
  ck_assert_int_eq (fchmodat (src, "d", 0555, 0), 0);
  ck_assert_int_eq (copy (&snapshot, &err), 0);
  ck_assert_int_eq (mode_of (dst, "d"), S_IFDIR | 0755);
  ck_assert_int_eq (mode_of (dst, "d/ro"), S_IFREG | 0644);
  ck_assert_int_eq (mode_of (dst, "d/rx"), S_IFREG | 0755);
  /* Without the option the modes stay exactly as they were.  */
  sp_closep (&dst);
  dst = fx_mkdirs (fx_fd, "dst2");
  copy_ok ();
  ck_assert_int_eq (mode_of (dst, "d"), S_IFDIR | 0555);
  ck_assert_int_eq (mode_of (dst, "d/ro"), S_IFREG | 0444);
  ck_assert_int_eq (fchmodat (src, "d", 0755, 0), 0);
}
END_TEST

START_TEST (tree_copy_enforces_the_byte_limit)
{
  const struct sp_copy_options tight = { 99, 1000, 16, false, false, NULL, NULL };
  const struct sp_copy_options exact = { 100, 1000, 16, false, false, NULL, NULL };
  cleanup_error sp_error_t err = NULL;

  fx_put (src, "a", "0123456789012345678901234567890123456789", 0644);
  fx_put (src, "b/c", "012345678901234567890123456789012345678901234567890123456789", 0644);
  copy_fails_with (&tight, "more than 99 bytes", "`b/c`", NULL);
  sp_closep (&dst);
  dst = fx_mkdirs (fx_fd, "dst2");
  ck_assert_int_eq (copy (&exact, &err), 0);
}
END_TEST

START_TEST (tree_copy_enforces_the_entry_limit)
{
  const struct sp_copy_options tight = { 1 << 20, 4, 16, false, false, NULL, NULL };
  const struct sp_copy_options exact = { 1 << 20, 5, 16, false, false, NULL, NULL };
  cleanup_error sp_error_t err = NULL;

  fx_put (src, "a", "", 0644);
  fx_put (src, "b", "", 0644);
  fx_put (src, "d/c", "", 0644);
  ck_assert_int_eq (symlinkat ("a", src, "e"), 0);
  copy_fails_with (&tight, "more than 4 entries", NULL);
  sp_closep (&dst);
  dst = fx_mkdirs (fx_fd, "dst2");
  ck_assert_int_eq (copy (&exact, &err), 0);
}
END_TEST

START_TEST (tree_copy_enforces_the_depth_limit)
{
  const struct sp_copy_options tight = { 1 << 20, 1000, 2, false, false, NULL, NULL };
  const struct sp_copy_options exact = { 1 << 20, 1000, 3, false, false, NULL, NULL };
  cleanup_error sp_error_t err = NULL;

  fx_put (src, "a/b/c/file", "x", 0644);
  copy_fails_with (&tight, "`a/b/c` is more than 2 directories deep", NULL);
  sp_closep (&dst);
  dst = fx_mkdirs (fx_fd, "dst2");
  ck_assert_int_eq (copy (&exact, &err), 0);
}
END_TEST

START_TEST (tree_copy_leaves_out_skip_top_unread_and_only_at_the_top)
{
  struct sp_copy_options skipping = roomy;
  cleanup_error sp_error_t err = NULL;
  cleanup_free char *kept = NULL;

  fx_put (src, "modules/lib/canary", "SKIPPED-CANARY\n", 0644);
  fx_put (src, "keep/modules/f", "kept\n", 0644);
  /* Neither a FIFO nor an entry past the limit stops the copy: what is
     skipped is never looked at, nor counted.  */
  ck_assert_int_eq (mkfifoat (src, "modules/pipe", 0644), 0);
  skipping.skip_top = "modules";
  skipping.max_entries = 3; /* keep, keep/modules, keep/modules/f */
  if (copy (&skipping, &err) < 0)
    ck_abort_msg ("sp_tree_copy: %s", sp_error_message (err));
  ck_assert_int_eq (faccessat (dst, "modules", F_OK, AT_SYMLINK_NOFOLLOW), -1);
  kept = fx_read (dst, "keep/modules/f");
  ck_assert_ptr_nonnull (kept);
  ck_assert_str_eq (kept, "kept\n");
  /* The control: without skip_top, the same tree is refused at the FIFO.  */
  ck_assert_int_eq (fx_sh ("rm -rf %s/dst/keep", fx_dir), 0);
  copy_fails_with (&roomy, "`modules/pipe` is a FIFO", NULL);
}
END_TEST

START_TEST (tree_copy_gives_every_entry_to_uid_and_gid)
{
  const char *paths[] = { "f", "d", "d/g", "l" };
  struct stat st;

  fx_put (src, "f", "x", 0644);
  fx_put (src, "d/g", "y", 0600);
  ck_assert_int_eq (symlinkat ("f", src, "l"), 0);
  copy_ok ();
  for (size_t i = 0; i < sizeof (paths) / sizeof (paths[0]); i++)
    {
      ck_assert_int_eq (fstatat (dst, paths[i], &st, AT_SYMLINK_NOFOLLOW), 0);
      ck_assert_msg (st.st_uid == UID && st.st_gid == GID, "%s is %d:%d", paths[i], (int)st.st_uid,
                     (int)st.st_gid);
    }
}
END_TEST

START_TEST (tree_copy_quotes_an_unprintable_name_in_its_error)
{
  cleanup_error sp_error_t err = NULL;
  const char *msg;

  ck_assert_int_eq (mkfifoat (src, "bad\nname`\033[31m", 0644), 0);
  ck_assert_int_eq (copy (&roomy, &err), -1);
  msg = sp_error_message (err);
  ck_assert_msg (strstr (msg, "`bad\\x0aname\\x60\\x1b[31m`") != NULL, "%s", msg);
  for (const char *p = msg; *p; p++)
    ck_assert_msg (*p >= 0x20 && *p < 0x7f, "unprintable byte in: %s", msg);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("seed_tree_copy");
  TCase *tc = tcase_create ("tree_copy");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, tree_copy_copies_files_directories_and_modes);
  tcase_add_test (tc, tree_copy_owner_writable_makes_a_read_only_tree_writable);
  tcase_add_test (tc, tree_copy_keeps_a_symlink_to_etc_passwd_as_a_link);
  tcase_add_test (tc, tree_copy_keeps_a_symlink_to_a_sibling_directory_as_a_link);
  tcase_add_test (tc, tree_copy_never_follows_a_symlinked_top_level_directory);
  tcase_add_test (tc, tree_copy_refuses_a_fifo_without_blocking);
  tcase_add_test (tc, tree_copy_refuses_a_socket);
  tcase_add_test (tc, tree_copy_refuses_a_device_node);
  tcase_add_test (tc, tree_copy_refuses_a_hardlink_to_a_file_outside);
  tcase_add_test (tc, tree_copy_copies_two_inside_hardlinks_as_independent_files);
  tcase_add_test (tc, tree_copy_strips_setuid_setgid_and_sticky);
  tcase_add_test (tc, tree_copy_enforces_the_byte_limit);
  tcase_add_test (tc, tree_copy_enforces_the_entry_limit);
  tcase_add_test (tc, tree_copy_enforces_the_depth_limit);
  tcase_add_test (tc, tree_copy_leaves_out_skip_top_unread_and_only_at_the_top);
  tcase_add_test (tc, tree_copy_gives_every_entry_to_uid_and_gid);
  tcase_add_test (tc, tree_copy_quotes_an_unprintable_name_in_its_error);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN_AS_ROOT (make_suite, "mknod and chown to another owner")
