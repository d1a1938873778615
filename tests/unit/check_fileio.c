/* fileio.h: a path split into directory and name, and the atomic write that
   gives its file exactly the mode asked for, whatever the umask.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/fileio.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

static void
split_ok (const char *path, const char *dir, const char *base)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_free char *got = NULL;
  const char *name = NULL;

  ck_assert_msg (sp_path_split (path, &got, &name, &err) == 0, "`%s`: %s", path,
                 err ? sp_error_message (err) : "");
  ck_assert_str_eq (got, dir);
  ck_assert_str_eq (name, base);
}

START_TEST (split_names_directory_and_file)
{
  split_ok ("/run/sealed-probe/probe.sock", "/run/sealed-probe", "probe.sock");
  split_ok ("/ready", "/", "ready");
  split_ok ("ready", ".", "ready");
  split_ok ("out/SKILL.md", "out", "SKILL.md");
}
END_TEST

START_TEST (split_refuses_a_path_that_names_no_file)
{
  static const char *const bad[] = { "", "/", "/run/sealed-probe/", "dir/" };

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      cleanup_error sp_error_t err = NULL;
      char *dir = (char *)"untouched";
      const char *base;

      ck_assert_int_eq (sp_path_split (bad[i], &dir, &base, &err), -1);
      ck_assert_ptr_null (dir);
      ck_assert_ptr_nonnull (strstr (sp_error_message (err), "names no file"));
    }
}
END_TEST

START_TEST (atomic_write_gives_exactly_the_mode_whatever_the_umask)
{
  static const mode_t modes[] = { 0644, 0600, 0444 };
  char top[] = "/tmp/sp-fileio-XXXXXX";
  int fd = sp_tmpdir_make (top);
  mode_t old = umask (0077);

  for (size_t i = 0; i < sizeof (modes) / sizeof (modes[0]); i++)
    {
      cleanup_error sp_error_t err = NULL;
      struct stat st;

      unlinkat (fd, "f", 0);
      ck_assert_int_eq (sp_write_file_atomic_at (fd, "f", "x\n", 2, modes[i], &err), 0);
      ck_assert_int_eq (fstatat (fd, "f", &st, 0), 0);
      ck_assert_uint_eq (st.st_mode & 07777, modes[i]);
      ck_assert_int_eq (st.st_size, 2);
      ck_assert_int_eq (faccessat (fd, "f.tmp", F_OK, AT_EACCESS), -1);
    }
  umask (old);
  close (fd);
  sp_tmpdir_remove (top);
}
END_TEST

START_TEST (file_type_names_each_type_a_message_meets)
{
  static const struct
  {
    mode_t mode;
    const char *name;
  } types[] = {
    { S_IFREG | 0644, "a regular file" },  { S_IFDIR | 0755, "a directory" },
    { S_IFLNK | 0777, "a symbolic link" }, { S_IFIFO | 0600, "a FIFO" },
    { S_IFSOCK | 0660, "a socket" },       { S_IFCHR | 0666, "a character device" },
    { S_IFBLK | 0660, "a block device" },  { 0, "of an unknown file type" },
  };

  for (size_t i = 0; i < sizeof (types) / sizeof (types[0]); i++)
    ck_assert_str_eq (sp_file_type_name (types[i].mode), types[i].name);
}
END_TEST

static Suite *
fileio_suite (void)
{
  Suite *s = suite_create ("fileio");
  TCase *tc = tcase_create ("fileio");

  tcase_add_test (tc, split_names_directory_and_file);
  tcase_add_test (tc, split_refuses_a_path_that_names_no_file);
  tcase_add_test (tc, atomic_write_gives_exactly_the_mode_whatever_the_umask);
  tcase_add_test (tc, file_type_names_each_type_a_message_meets);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (fileio_suite)
