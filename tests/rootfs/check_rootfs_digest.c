/* The tree digest: it follows the documented encoding (docs/rootfs.md),
   depends only on names, types, modes, owners, sizes, bytes and link targets,
   never follows a symlink, and refuses what a rootfs never holds.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "tree/digest.h"

#include "sp_check.h"
#include "tree/remove.h"

static char dir[64];
static int dirfd_ = -1;

static void
setup (void)
{
  strcpy (dir, "/tmp/sp-digest-test-XXXXXX");
  ck_assert_ptr_nonnull (mkdtemp (dir));
}

static void
teardown (void)
{
  cleanup_error sp_error_t err = NULL;

  sp_closep (&dirfd_);
  ck_assert_int_eq (sp_tree_remove_at (AT_FDCWD, dir, &err), 0);
}

/* Creates a subdirectory of the scratch directory and returns its fd.  */
static int
make_tree (const char *name)
{
  char path[128];
  int fd;

  snprintf (path, sizeof (path), "%s/%s", dir, name);
  ck_assert_int_eq (mkdir (path, 0755), 0);
  fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  return fd;
}

static void
put_file (int fd, const char *name, const char *content, mode_t mode)
{
  cleanup_close int f = openat (fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

  ck_assert_int_ge (f, 0);
  ck_assert_int_eq (write (f, content, strlen (content)), (ssize_t)strlen (content));
  ck_assert_int_eq (fchmodat (fd, name, mode, 0), 0);
}

static void
digest_ok (int fd, char out[SP_DIGEST_TEXT_SIZE])
{
  cleanup_error sp_error_t err = NULL;

  if (sp_tree_digest (fd, out, &err) < 0)
    ck_abort_msg ("sp_tree_digest: %s", sp_error_message (err));
}

/* A small tree: bin/ (0755), bin/tool (0755, "#!x\n"), data (0644, "hello"),
   link -> bin/tool.  */
static int
sample_tree (const char *name, int order)
{
  int fd = make_tree (name);

  if (order == 0)
    {
      ck_assert_int_eq (mkdirat (fd, "bin", 0755), 0);
      put_file (fd, "bin/tool", "#!x\n", 0755);
      put_file (fd, "data", "hello", 0644);
      ck_assert_int_eq (symlinkat ("bin/tool", fd, "link"), 0);
    }
  else
    {
      ck_assert_int_eq (symlinkat ("bin/tool", fd, "link"), 0);
      put_file (fd, "data", "hello", 0644);
      ck_assert_int_eq (mkdirat (fd, "bin", 0755), 0);
      put_file (fd, "bin/tool", "#!x\n", 0755);
    }
  ck_assert_int_eq (fchmodat (fd, "bin", 0755, 0), 0);
  return fd;
}

/* The documented encoding, assembled by hand.  */
static void
enc_u32 (struct sp_sha256 *c, uint32_t v)
{
  uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
  sp_sha256_update (c, b, 4);
}

static void
enc_entry (struct sp_sha256 *c, int fd, char type, const char *path, const char *payload)
{
  struct stat st;
  uint64_t size = type == 'd' ? 0 : strlen (payload);

  ck_assert_int_eq (fstatat (fd, path, &st, AT_SYMLINK_NOFOLLOW), 0);
  sp_sha256_update (c, &type, 1);
  enc_u32 (c, (uint32_t)strlen (path));
  sp_sha256_update (c, path, strlen (path));
  enc_u32 (c, st.st_mode & 07777);
  enc_u32 (c, st.st_uid);
  enc_u32 (c, st.st_gid);
  enc_u32 (c, (uint32_t)(size >> 32));
  enc_u32 (c, (uint32_t)size);
  if (type == 'f')
    {
      uint8_t d[SP_SHA256_BYTES];
      sp_sha256 (payload, strlen (payload), d);
      sp_sha256_update (c, d, sizeof (d));
    }
  else if (type == 'l')
    sp_sha256_update (c, payload, strlen (payload));
}

START_TEST (tree_digest_follows_the_documented_encoding)
{
  const char magic[] = "sealed-probe tree digest 1\n";
  char got[SP_DIGEST_TEXT_SIZE];
  char expected[SP_DIGEST_TEXT_SIZE];
  uint8_t d[SP_SHA256_BYTES];
  struct sp_sha256 c;

  dirfd_ = sample_tree ("t", 0);
  digest_ok (dirfd_, got);

  /* Depth first, siblings in byte order: bin, bin/tool, data, link.  */
  sp_sha256_init (&c);
  sp_sha256_update (&c, magic, strlen (magic));
  enc_entry (&c, dirfd_, 'd', "bin", "");
  enc_entry (&c, dirfd_, 'f', "bin/tool", "#!x\n");
  enc_entry (&c, dirfd_, 'f', "data", "hello");
  enc_entry (&c, dirfd_, 'l', "link", "bin/tool");
  sp_sha256_final (&c, d);
  sp_sha256_digest_text (d, expected);
  ck_assert_str_eq (got, expected);
}
END_TEST

START_TEST (tree_digest_orders_siblings_by_bytes_not_by_creation)
{
  cleanup_close int a = sample_tree ("a", 0);
  cleanup_close int b = sample_tree ("b", 1);
  char da[SP_DIGEST_TEXT_SIZE], db[SP_DIGEST_TEXT_SIZE];

  digest_ok (a, da);
  digest_ok (b, db);
  ck_assert_str_eq (da, db);
}
END_TEST

START_TEST (tree_digest_changes_with_one_byte)
{
  cleanup_close int a = sample_tree ("a", 0);
  cleanup_close int b = make_tree ("b");
  char da[SP_DIGEST_TEXT_SIZE], db[SP_DIGEST_TEXT_SIZE];

  ck_assert_int_eq (mkdirat (b, "bin", 0755), 0);
  put_file (b, "bin/tool", "#!x\n", 0755);
  put_file (b, "data", "hellp", 0644);
  ck_assert_int_eq (symlinkat ("bin/tool", b, "link"), 0);
  digest_ok (a, da);
  digest_ok (b, db);
  ck_assert_str_ne (da, db);
}
END_TEST

START_TEST (tree_digest_changes_with_one_mode)
{
  cleanup_close int a = sample_tree ("a", 0);
  char before[SP_DIGEST_TEXT_SIZE], after[SP_DIGEST_TEXT_SIZE];

  digest_ok (a, before);
  ck_assert_int_eq (fchmodat (a, "data", 0640, 0), 0);
  digest_ok (a, after);
  ck_assert_str_ne (before, after);
}
END_TEST

START_TEST (tree_digest_changes_with_one_symlink_target)
{
  cleanup_close int a = sample_tree ("a", 0);
  char before[SP_DIGEST_TEXT_SIZE], after[SP_DIGEST_TEXT_SIZE];

  digest_ok (a, before);
  ck_assert_int_eq (unlinkat (a, "link", 0), 0);
  ck_assert_int_eq (symlinkat ("bin/tooL", a, "link"), 0);
  digest_ok (a, after);
  ck_assert_str_ne (before, after);
}
END_TEST

START_TEST (tree_digest_changes_with_a_rename)
{
  cleanup_close int a = sample_tree ("a", 0);
  char before[SP_DIGEST_TEXT_SIZE], after[SP_DIGEST_TEXT_SIZE];

  digest_ok (a, before);
  ck_assert_int_eq (renameat (a, "data", a, "date"), 0);
  digest_ok (a, after);
  ck_assert_str_ne (before, after);
}
END_TEST

START_TEST (tree_digest_tells_an_empty_file_from_an_empty_directory)
{
  cleanup_close int a = make_tree ("a");
  cleanup_close int b = make_tree ("b");
  char da[SP_DIGEST_TEXT_SIZE], db[SP_DIGEST_TEXT_SIZE];

  put_file (a, "x", "", 0555);
  ck_assert_int_eq (mkdirat (b, "x", 0555), 0);
  digest_ok (a, da);
  digest_ok (b, db);
  ck_assert_str_ne (da, db);
}
END_TEST

START_TEST (tree_digest_never_follows_a_symlink)
{
  cleanup_close int outside = make_tree ("outside");
  cleanup_close int a = make_tree ("a");
  char path[128];
  char before[SP_DIGEST_TEXT_SIZE], after[SP_DIGEST_TEXT_SIZE];

  snprintf (path, sizeof (path), "%s/outside", dir);
  ck_assert_int_eq (symlinkat (path, a, "escape"), 0);
  digest_ok (a, before);
  put_file (outside, "secret", "changed", 0644);
  digest_ok (a, after);
  ck_assert_str_eq (before, after);
}
END_TEST

START_TEST (tree_digest_refuses_a_fifo)
{
  cleanup_close int a = make_tree ("a");
  cleanup_error sp_error_t err = NULL;
  char out[SP_DIGEST_TEXT_SIZE];

  ck_assert_int_eq (mkfifoat (a, "pipe", 0644), 0);
  ck_assert_int_eq (sp_tree_digest (a, out, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "`pipe`"));
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("rootfs_digest");
  TCase *tc = tcase_create ("digest");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, tree_digest_follows_the_documented_encoding);
  tcase_add_test (tc, tree_digest_orders_siblings_by_bytes_not_by_creation);
  tcase_add_test (tc, tree_digest_changes_with_one_byte);
  tcase_add_test (tc, tree_digest_changes_with_one_mode);
  tcase_add_test (tc, tree_digest_changes_with_one_symlink_target);
  tcase_add_test (tc, tree_digest_changes_with_a_rename);
  tcase_add_test (tc, tree_digest_tells_an_empty_file_from_an_empty_directory);
  tcase_add_test (tc, tree_digest_never_follows_a_symlink);
  tcase_add_test (tc, tree_digest_refuses_a_fifo);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
