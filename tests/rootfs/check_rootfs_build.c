/* Builds from small synthetic packages: setuid bits are stripped, every entry
   is normalized, pruned entries never land, the skeleton is there, the digest
   is deterministic and sensitive, verify catches tampering, and the CLI
   reports as documented.  Needs root: the builder chowns to 0:0.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "rootfs/verify.h"

#include "rootfs_fixture.h"
#include "sp_check.h"
#include "tree/walk.h"

#define N(a) (sizeof (a) / sizeof ((a)[0]))

/* A package shaped like the real ones.  */
static const struct fx_member base[] = {
  { 'd', "./", NULL, 0 },
  { 'd', "./usr/", NULL, 0 },
  { 'd', "./usr/bin/", NULL, 0 },
  { 'f', "./usr/bin/python3.11", "\177ELF pretend", 0755 },
  { 'l', "./usr/bin/python3", "python3.11", 0 },
  { 'd', "./usr/lib/", NULL, 0 },
  { 'd', "./usr/lib/python3.11/", NULL, 0 },
  { 'f', "./usr/lib/python3.11/os.py", "import sys\n", 0644 },
  { 'd', "./lib64/", NULL, 0 },
  { 'l', "./lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", 0 },
};

static char *
path_in (const char *rel)
{
  char *p;
  ck_assert_int_ge (asprintf (&p, "%s/root/%s", fx.out, rel), 0);
  return p;
}

static struct stat
lstat_in (const char *rel)
{
  cleanup_free char *p = path_in (rel);
  struct stat st;

  if (lstat (p, &st) < 0)
    ck_abort_msg ("`%s` is missing", rel);
  return st;
}

static bool
exists_in (const char *rel)
{
  cleanup_free char *p = path_in (rel);
  struct stat st;
  return lstat (p, &st) == 0;
}

static void
build_ok (void)
{
  if (!fx_build ())
    ck_abort_msg ("build: %s", fx.error);
}

/* Builds base plus extra (a second package) into fx.out and returns the
   digest (malloc'd), then removes the output for the next build.  */
static char *
digest_of (const struct fx_member *extra, size_t n)
{
  char *digest;

  fx_teardown ();
  fx_setup ();
  fx_add_package ("base", base, N (base), NULL);
  if (extra)
    fx_add_package ("extra", extra, n, NULL);
  build_ok ();
  digest = strdup (fx.digest);
  return digest;
}

START_TEST (setuid_and_setgid_bits_are_stripped)
{
  const struct fx_member m[] = {
    { 'f', "./suid", "x", 04755 },
    { 'f', "./sgid", "x", 02711 },
    { 'f', "./suid-noexec", "x", 04644 },
    { 'd', "./sticky/", NULL, 01777 },
  };

  fx_add_package ("base", base, N (base), NULL);
  fx_add_package ("special", m, N (m), NULL);
  build_ok ();
  ck_assert_uint_eq (lstat_in ("suid").st_mode & 07777, 0555);
  ck_assert_uint_eq (lstat_in ("sgid").st_mode & 07777, 0555);
  ck_assert_uint_eq (lstat_in ("suid-noexec").st_mode & 07777, 0444);
  ck_assert_uint_eq (lstat_in ("sticky").st_mode & 07777, 0555);
}
END_TEST

static int
check_normalized (int dirfd, const char *name, const char *path, const struct stat *st,
                  enum sp_tree_walk_event event, void *ctx, sp_error_t *err)
{
  int *count = ctx;

  if (event != SP_TREE_WALK_ENTRY)
    return 0;
  (*count)++;
  ck_assert_msg (st->st_uid == 0 && st->st_gid == 0, "`%s` is owned by %u:%u", path, st->st_uid, st->st_gid);
  ck_assert_msg (st->st_mtim.tv_sec == 0 && st->st_mtim.tv_nsec == 0, "`%s` has mtime %ld", path,
                 (long)st->st_mtim.tv_sec);
  if (S_ISDIR (st->st_mode))
    ck_assert_msg ((st->st_mode & 07777) == (strcmp (path, "tmp") == 0 ? 01777 : 0555),
                   "dir `%s` has mode %o", path, st->st_mode & 07777);
  else if (S_ISREG (st->st_mode))
    ck_assert_msg ((st->st_mode & 07777) == 0444 || (st->st_mode & 07777) == 0555, "`%s` has mode %o", path,
                   st->st_mode & 07777);
  else
    ck_assert_msg (S_ISLNK (st->st_mode), "`%s` has an unexpected type", path);
  return 0;
}

START_TEST (build_normalizes_owner_mode_and_mtime_of_every_entry)
{
  const struct fx_member m[] = {
    { 'd', "./odd/", NULL, 0700 },
    { 'f', "./odd/private", "x", 0600 },
    { 'f', "./odd/world-writable", "x", 0666 },
    { 'f', "./odd/user-exec-only", "x", 0700 },
    { 'd', "./odd/deep/", NULL, 0777 },
    { 'f', "./odd/deep/file", "x", 0640 },
  };
  cleanup_close int rootfd = -1;
  cleanup_error sp_error_t err = NULL;
  cleanup_free char *root = NULL;
  struct stat st;
  int count = 0;

  fx_add_package ("base", base, N (base), NULL);
  fx_add_package ("odd", m, N (m), NULL);
  build_ok ();
  root = path_in ("");
  rootfd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (rootfd, 0);
  ck_assert_int_eq (fstat (rootfd, &st), 0);
  ck_assert_uint_eq (st.st_mode & 07777, 0555);
  ck_assert_int_eq (st.st_mtim.tv_sec, 0);
  ck_assert_int_eq (sp_tree_walk (rootfd, check_normalized, &count, &err), 0);
  ck_assert_int_gt (count, 15);
  ck_assert_uint_eq (lstat_in ("odd/user-exec-only").st_mode & 07777, 0555);
  ck_assert_uint_eq (lstat_in ("odd/world-writable").st_mode & 07777, 0444);
}
END_TEST

START_TEST (pruned_entries_are_not_extracted)
{
  const struct fx_member m[] = {
    { 'd', "./usr/share/", NULL, 0 },
    { 'd', "./usr/share/doc/", NULL, 0 },
    { 'f', "./usr/share/doc/copyright", "x", 0 },
    { 'f', "./usr/bin/py3compile", "x", 0755 },
    { 'f', "./usr/bin/sh", "x", 0755 },
    { 'd', "./bin/", NULL, 0 },
    { 'f', "./bin/dash", "x", 0755 },
    { 'd', "./etc/", NULL, 0 },
    { 'f', "./etc/mime.types", "text/plain txt\n", 0 },
    { 'd', "./etc/ld.so.conf.d/", NULL, 0 },
    { 'f', "./etc/ld.so.conf.d/x.conf", "x", 0 },
    { 'd', "./usr/lib/python3.11/ensurepip/", NULL, 0 },
    { 'f', "./usr/lib/python3.11/ensurepip/__init__.py", "x", 0 },
    { 'd', "./usr/lib/python3.11/unittest/", NULL, 0 },
    { 'f', "./usr/lib/python3.11/unittest/case.py", "x", 0 },
    { 'd', "./usr/lib/python3.11/unittest/test/", NULL, 0 },
    { 'f', "./usr/lib/python3.11/unittest/test/test_case.py", "x", 0 },
  };

  fx_add_package ("base", base, N (base), NULL);
  fx_add_package ("extra", m, N (m), NULL);
  build_ok ();
  ck_assert (!exists_in ("usr/share"));
  ck_assert (!exists_in ("usr/bin/py3compile"));
  ck_assert (!exists_in ("usr/bin/sh"));
  ck_assert (!exists_in ("bin"));
  ck_assert (!exists_in ("etc/ld.so.conf.d"));
  ck_assert (!exists_in ("usr/lib/python3.11/ensurepip"));
  ck_assert (!exists_in ("usr/lib/python3.11/unittest/test"));
  ck_assert (exists_in ("usr/lib/python3.11/unittest/case.py"));
  ck_assert (exists_in ("etc/mime.types"));
  ck_assert (exists_in ("usr/bin/python3.11"));
  ck_assert (S_ISLNK (lstat_in ("usr/bin/python3").st_mode));
}
END_TEST

START_TEST (build_creates_the_read_only_bundle_skeleton)
{
  static const char *const dirs[] = { "proc", "sys", "dev", "probe", "probe/repo" };
  static const char *const files[] = { "probe/probe.py", "probe/out" };
  struct stat tmp;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  for (size_t i = 0; i < N (dirs); i++)
    {
      struct stat st = lstat_in (dirs[i]);
      ck_assert_msg (S_ISDIR (st.st_mode) && (st.st_mode & 07777) == 0555, "`%s`", dirs[i]);
    }
  /* runc gives the /tmp tmpfs its mount point's mode: 1777, so that the
     probe can write there.  */
  tmp = lstat_in ("tmp");
  ck_assert_msg (S_ISDIR (tmp.st_mode) && (tmp.st_mode & 07777) == 01777, "`tmp` has mode %o",
                 tmp.st_mode & 07777);
  for (size_t i = 0; i < N (files); i++)
    {
      struct stat st = lstat_in (files[i]);
      ck_assert_msg (S_ISREG (st.st_mode) && (st.st_mode & 07777) == 0444 && st.st_size == 0, "`%s`",
                     files[i]);
    }
}
END_TEST

START_TEST (build_records_the_digest_of_the_tree)
{
  cleanup_free char *path = NULL;
  cleanup_free char *text = NULL;
  cleanup_error sp_error_t err = NULL;
  char line[SP_DIGEST_TEXT_SIZE + 1];
  size_t len;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  ck_assert_int_ge (asprintf (&path, "%s/digest", fx.out), 0);
  ck_assert_int_eq (sp_read_path_capped (path, 4096, &text, &len, &err), 0);
  ck_assert_uint_eq (strlen (fx.digest), SP_DIGEST_TEXT_SIZE - 1);
  ck_assert_int_eq (strncmp (fx.digest, "sha256:", 7), 0);
  snprintf (line, sizeof (line), "%s\n", fx.digest);
  ck_assert_str_eq (text, line);
  ck_assert_uint_eq (lstat_in ("").st_mode & 07777, 0555);
}
END_TEST

START_TEST (digest_is_the_same_for_two_builds_from_the_same_debs)
{
  char second[160];
  char first_digest[SP_DIGEST_TEXT_SIZE];

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  strcpy (first_digest, fx.digest);
  /* A second build later, so that extraction times differ.  */
  sleep (1);
  snprintf (second, sizeof (second), "%s/again", fx.dir);
  if (!fx_build_into (second))
    ck_abort_msg ("second build: %s", fx.error);
  ck_assert_str_eq (first_digest, fx.digest);
}
END_TEST

START_TEST (digest_changes_with_one_byte)
{
  const struct fx_member a[] = { { 'f', "./data", "abcdef", 0 } };
  const struct fx_member b[] = { { 'f', "./data", "abcdeg", 0 } };
  cleanup_free char *da = digest_of (a, 1);
  cleanup_free char *db = digest_of (b, 1);

  ck_assert_str_ne (da, db);
}
END_TEST

START_TEST (digest_changes_with_one_mode)
{
  const struct fx_member a[] = { { 'f', "./data", "abcdef", 0644 } };
  const struct fx_member b[] = { { 'f', "./data", "abcdef", 0744 } };
  cleanup_free char *da = digest_of (a, 1);
  cleanup_free char *db = digest_of (b, 1);

  ck_assert_str_ne (da, db);
}
END_TEST

START_TEST (digest_changes_with_one_symlink_target)
{
  const struct fx_member a[] = { { 'l', "./link", "usr/bin/python3.11", 0 } };
  const struct fx_member b[] = { { 'l', "./link", "usr/bin/python3.12", 0 } };
  cleanup_free char *da = digest_of (a, 1);
  cleanup_free char *db = digest_of (b, 1);

  ck_assert_str_ne (da, db);
}
END_TEST

START_TEST (verify_accepts_a_fresh_build_and_fills_info)
{
  struct sp_rootfs_info info;
  cleanup_error sp_error_t err = NULL;
  cleanup_free char *expected_root = NULL;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  if (sp_rootfs_verify (fx.out, &info, &err) < 0)
    ck_abort_msg ("verify: %s", sp_error_message (err));
  ck_assert_int_ge (asprintf (&expected_root, "%s/root", fx.out), 0);
  ck_assert_str_eq (info.root_path, expected_root);
  ck_assert_str_eq (info.digest, fx.digest);
  sp_rootfs_info_release (&info);
}
END_TEST

static char *
verify_fails (void)
{
  struct sp_rootfs_info info;
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_eq (sp_rootfs_verify (fx.out, &info, &err), -1);
  ck_assert_ptr_null (info.root_path);
  return strdup (sp_error_message (err));
}

START_TEST (verify_fails_when_something_is_left_in_tmp)
{
  cleanup_free char *file = NULL;
  cleanup_free char *msg = NULL;
  int fd;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  file = path_in ("tmp/planted");
  fd = open (file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ck_assert_int_ge (fd, 0);
  close (fd);
  msg = verify_fails ();
  ck_assert_msg (strstr (msg, "tmp") != NULL, "%s", msg);
}
END_TEST

START_TEST (verify_fails_when_tmp_loses_its_mode)
{
  cleanup_free char *dir = NULL;
  cleanup_free char *msg = NULL;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  dir = path_in ("tmp");
  ck_assert_int_eq (chmod (dir, 0777), 0);
  msg = verify_fails ();
  ck_assert_msg (strstr (msg, "tmp") != NULL, "%s", msg);
}
END_TEST

START_TEST (verify_fails_after_one_file_is_modified_naming_both_digests)
{
  cleanup_free char *file = NULL;
  cleanup_free char *msg = NULL;
  cleanup_close int fd = -1;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  file = path_in ("usr/lib/python3.11/os.py");
  ck_assert_int_eq (chmod (file, 0644), 0);
  fd = open (file, O_WRONLY | O_APPEND | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, "#", 1), 1);
  ck_assert_int_eq (chmod (file, 0444), 0);
  msg = verify_fails ();
  ck_assert_msg (strstr (msg, "digest mismatch") && strstr (msg, fx.digest), "%s", msg);
  /* The second digest named is the tree's actual one.  */
  ck_assert_msg (strstr (strstr (msg, fx.digest) + 1, "sha256:"), "%s", msg);
}
END_TEST

START_TEST (verify_fails_after_a_write_bit_is_added)
{
  cleanup_free char *file = NULL;
  cleanup_free char *msg = NULL;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  file = path_in ("usr/lib/python3.11/os.py");
  ck_assert_int_eq (chmod (file, 0644), 0);
  msg = verify_fails ();
  ck_assert_msg (strstr (msg, "`usr/lib/python3.11/os.py` is writable"), "%s", msg);
}
END_TEST

START_TEST (verify_fails_after_a_directory_is_made_writable)
{
  cleanup_free char *dir = NULL;
  cleanup_free char *msg = NULL;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  dir = path_in ("");
  ck_assert_int_eq (chmod (dir, 0755), 0);
  msg = verify_fails ();
  ck_assert_msg (strstr (msg, "is writable"), "%s", msg);
}
END_TEST

START_TEST (verify_fails_after_a_setuid_bit_is_added)
{
  cleanup_free char *file = NULL;
  cleanup_free char *msg = NULL;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  file = path_in ("usr/bin/python3.11");
  ck_assert_int_eq (chmod (file, 04555), 0);
  msg = verify_fails ();
  ck_assert_msg (strstr (msg, "setuid"), "%s", msg);
}
END_TEST

START_TEST (verify_fails_when_not_owned_by_root)
{
  cleanup_free char *file = NULL;
  cleanup_free char *msg = NULL;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  file = path_in ("usr/bin/python3");
  ck_assert_int_eq (lchown (file, 65534, 65534), 0);
  msg = verify_fails ();
  ck_assert_msg (strstr (msg, "owned by 65534:65534"), "%s", msg);
}
END_TEST

START_TEST (verify_fails_when_a_skeleton_mount_point_is_missing)
{
  cleanup_free char *probe = NULL;
  cleanup_free char *out = NULL;
  cleanup_free char *msg = NULL;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  out = path_in ("probe/out");
  ck_assert_int_eq (unlink (out), 0);
  msg = verify_fails ();
  ck_assert_msg (strstr (msg, "`probe/out`"), "%s", msg);
}
END_TEST

START_TEST (verify_fails_when_the_digest_file_is_malformed)
{
  cleanup_free char *path = NULL;
  cleanup_free char *msg = NULL;

  fx_add_package ("base", base, N (base), NULL);
  build_ok ();
  ck_assert_int_ge (asprintf (&path, "%s/digest", fx.out), 0);
  ck_assert_int_eq (unlink (path), 0);
  fx_write_file (path, "sha256:DEADBEEF\n");
  msg = verify_fails ();
  ck_assert_msg (strstr (msg, "must hold `sha256:"), "%s", msg);
}
END_TEST

static const char *
rootfs_bin (void)
{
  const char *bin = getenv ("SP_ROOTFS_BIN");
  ck_assert_msg (bin != NULL, "SP_ROOTFS_BIN is not set (tests/rootfs/meson.build sets it)");
  return bin;
}

START_TEST (cli_build_and_verify_print_the_same_digest)
{
  cleanup_free char *out = NULL, *err = NULL, *vout = NULL, *verr = NULL;
  const struct fx_member none[] = { { 'f', "./x", "x", 0 } };

  fx_add_package ("base", base, N (base), NULL);
  fx_add_package ("xx", none, 1, NULL);
  fx_write_file (fx.lock, fx.lock_text);
  {
    char *argv[] = {
      (char *)rootfs_bin (), "build", "--lock", fx.lock, "--no-pyc", "--debs", fx.debs, "--out", fx.out, NULL
    };
    ck_assert_int_eq (fx_run (argv, &out, &err), 0);
  }
  {
    char *argv[] = { (char *)rootfs_bin (), "verify", fx.out, NULL };
    ck_assert_int_eq (fx_run (argv, &vout, &verr), 0);
  }
  ck_assert_str_eq (err, "");
  ck_assert_str_eq (verr, "");
  ck_assert_uint_eq (strlen (out), SP_DIGEST_TEXT_SIZE);
  ck_assert_str_eq (out, vout);
}
END_TEST

/* Without --no-pyc the build compiles the stdlib with the tree's own
   python3.11; the synthetic one is no interpreter, so the build fails,
   saying so, and leaves nothing behind (tests/rootfs/check_rootfs_pyc.c
   builds with the real one).  */
START_TEST (cli_build_compiles_the_stdlib_by_default_and_fails_without_an_interpreter)
{
  cleanup_free char *out = NULL, *err = NULL, *names = NULL;
  char *argv[]
      = { (char *)rootfs_bin (), "build", "--lock", fx.lock, "--debs", fx.debs, "--out", fx.out, NULL };

  fx_add_package ("base", base, N (base), NULL);
  fx_write_file (fx.lock, fx.lock_text);
  ck_assert_int_eq (fx_run (argv, &out, &err), 1);
  ck_assert_str_eq (out, "");
  ck_assert_msg (
      strstr (err, "sealed-probe-rootfs: build: compile the standard library: run `/usr/bin/python3.11`"),
      "%s", err);
  names = fx_list_dir (fx.dir);
  ck_assert_str_eq (names, "debs rootfs.lock");
}
END_TEST

START_TEST (cli_failure_prints_verb_and_reason_and_exits_1)
{
  cleanup_free char *out = NULL, *err = NULL;
  char *argv[] = { (char *)rootfs_bin (), "verify", fx.out, NULL };

  ck_assert_int_eq (fx_run (argv, &out, &err), 1);
  ck_assert_str_eq (out, "");
  ck_assert_msg (strncmp (err, "sealed-probe-rootfs: verify: ", 29) == 0, "%s", err);
}
END_TEST

START_TEST (cli_bad_usage_exits_2)
{
  char *const cases[][5] = {
    { (char *)rootfs_bin (), NULL },
    { (char *)rootfs_bin (), "frobnicate", NULL },
    { (char *)rootfs_bin (), "build", "--lock", "x", NULL },
    { (char *)rootfs_bin (), "verify", NULL },
    { (char *)rootfs_bin (), "verify", "a", "b", NULL },
  };

  for (size_t i = 0; i < N (cases); i++)
    {
      cleanup_free char *out = NULL, *err = NULL;
      ck_assert_int_eq (fx_run (cases[i], &out, &err), 2);
      ck_assert_ptr_nonnull (strstr (err, "usage:"));
    }
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("rootfs_build");
  TCase *tc = tcase_create ("build");

  tcase_add_checked_fixture (tc, fx_setup, fx_teardown);
  tcase_add_test (tc, setuid_and_setgid_bits_are_stripped);
  tcase_add_test (tc, build_normalizes_owner_mode_and_mtime_of_every_entry);
  tcase_add_test (tc, pruned_entries_are_not_extracted);
  tcase_add_test (tc, build_creates_the_read_only_bundle_skeleton);
  tcase_add_test (tc, verify_fails_when_something_is_left_in_tmp);
  tcase_add_test (tc, verify_fails_when_tmp_loses_its_mode);
  tcase_add_test (tc, build_records_the_digest_of_the_tree);
  tcase_add_test (tc, digest_is_the_same_for_two_builds_from_the_same_debs);
  tcase_add_test (tc, digest_changes_with_one_byte);
  tcase_add_test (tc, digest_changes_with_one_mode);
  tcase_add_test (tc, digest_changes_with_one_symlink_target);
  tcase_add_test (tc, verify_accepts_a_fresh_build_and_fills_info);
  tcase_add_test (tc, verify_fails_after_one_file_is_modified_naming_both_digests);
  tcase_add_test (tc, verify_fails_after_a_write_bit_is_added);
  tcase_add_test (tc, verify_fails_after_a_directory_is_made_writable);
  tcase_add_test (tc, verify_fails_after_a_setuid_bit_is_added);
  tcase_add_test (tc, verify_fails_when_not_owned_by_root);
  tcase_add_test (tc, verify_fails_when_a_skeleton_mount_point_is_missing);
  tcase_add_test (tc, verify_fails_when_the_digest_file_is_malformed);
  tcase_add_test (tc, cli_build_and_verify_print_the_same_digest);
  tcase_add_test (tc, cli_build_compiles_the_stdlib_by_default_and_fails_without_an_interpreter);
  tcase_add_test (tc, cli_failure_prints_verb_and_reason_and_exits_1);
  tcase_add_test (tc, cli_bad_usage_exits_2);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN_AS_ROOT (make_suite, "the builder chowns every entry to 0:0")
