/* What the extractors share (archive_extract.h): the member types they
   refuse (devices, FIFOs, sockets and unknown types, but never a hardlink,
   whatever type it carries), and copying data under a byte budget.  */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/archive_extract.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

static const char *
refused_for (mode_t type, const char *hardlink)
{
  static char kept[64];
  struct archive_entry *e = archive_entry_new ();
  const char *why;

  ck_assert_ptr_nonnull (e);
  archive_entry_set_pathname (e, "member");
  archive_entry_set_filetype (e, type);
  if (hardlink != NULL)
    archive_entry_set_hardlink (e, hardlink);
  why = sp_archive_entry_refused_type (e);
  if (why != NULL)
    {
      ck_assert_uint_lt (strlen (why), sizeof (kept));
      strcpy (kept, why);
    }
  archive_entry_free (e);
  return why != NULL ? kept : NULL;
}

START_TEST (files_directories_and_symlinks_pass)
{
  ck_assert_ptr_null (refused_for (AE_IFREG, NULL));
  ck_assert_ptr_null (refused_for (AE_IFDIR, NULL));
  ck_assert_ptr_null (refused_for (AE_IFLNK, NULL));
}
END_TEST

START_TEST (devices_fifos_and_sockets_are_refused_by_name)
{
  ck_assert_str_eq (refused_for (AE_IFCHR, NULL), "a device node");
  ck_assert_str_eq (refused_for (AE_IFBLK, NULL), "a device node");
  ck_assert_str_eq (refused_for (AE_IFIFO, NULL), "a FIFO");
  ck_assert_str_eq (refused_for (AE_IFSOCK, NULL), "a socket");
}
END_TEST

START_TEST (a_member_without_a_known_type_is_refused)
{
  ck_assert_str_eq (refused_for (0, NULL), "an unknown file type");
}
END_TEST

START_TEST (a_hardlink_passes_whatever_type_it_carries)
{
  /* Its target is checked where it is looked up, not here.  */
  ck_assert_ptr_null (refused_for (AE_IFREG, "target"));
  ck_assert_ptr_null (refused_for (AE_IFIFO, "target"));
  ck_assert_ptr_null (refused_for (0, "target"));
}
END_TEST

/* Copies the 100-byte member "f" of an in-memory tar into a scratch directory
   under a budget of max_bytes, starting from *bytes.  Returns what
   sp_archive_copy_data returned; *err holds its error.  */
static int
copy_under (uint64_t max_bytes, uint64_t *bytes, char **msg)
{
  static char tar[16384];
  char dir[] = "/tmp/sp-archive-XXXXXX";
  char data[100], cwd[4096];
  struct archive *w = archive_write_new ();
  struct archive *in = archive_read_new ();
  struct archive *disk = archive_write_disk_new ();
  struct archive_entry *e = archive_entry_new ();
  sp_error_t err = NULL;
  size_t used = 0;
  int fd, ret;

  memset (data, 'x', sizeof (data));
  ck_assert_int_eq (archive_write_set_format_pax_restricted (w), ARCHIVE_OK);
  ck_assert_int_eq (archive_write_open_memory (w, tar, sizeof (tar), &used), ARCHIVE_OK);
  archive_entry_set_pathname (e, "f");
  archive_entry_set_filetype (e, AE_IFREG);
  archive_entry_set_perm (e, 0644);
  archive_entry_set_size (e, sizeof (data));
  ck_assert_int_eq (archive_write_header (w, e), ARCHIVE_OK);
  ck_assert_int_eq (archive_write_data (w, data, sizeof (data)), (la_ssize_t)sizeof (data));
  ck_assert_int_eq (archive_write_close (w), ARCHIVE_OK);
  archive_write_free (w);
  archive_entry_free (e); /* the entry read back below is the reader's */

  ck_assert_int_eq (archive_read_support_format_tar (in), ARCHIVE_OK);
  ck_assert_int_eq (archive_read_open_memory (in, tar, used), ARCHIVE_OK);
  ck_assert_int_eq (archive_read_next_header (in, &e), ARCHIVE_OK);
  fd = sp_tmpdir_make (dir);
  ck_assert_ptr_nonnull (getcwd (cwd, sizeof (cwd)));
  ck_assert_int_eq (fchdir (fd), 0);
  ck_assert_int_eq (archive_write_header (disk, e), ARCHIVE_OK);
  ret = sp_archive_copy_data (in, disk, bytes, max_bytes, &err);
  archive_write_free (disk);
  archive_read_free (in);
  ck_assert_int_eq (chdir (cwd), 0);
  close (fd);
  sp_tmpdir_remove (dir);
  *msg = err ? strdup (sp_error_message (err)) : NULL;
  sp_error_release (&err);
  return ret;
}

START_TEST (copy_data_counts_against_the_budget)
{
  uint64_t bytes = 0;
  char *msg;

  ck_assert_int_eq (copy_under (100, &bytes, &msg), 0);
  ck_assert_uint_eq (bytes, 100);
  ck_assert_ptr_null (msg);
}
END_TEST

START_TEST (copy_data_refuses_a_block_that_would_cross_the_budget)
{
  uint64_t bytes = 0;
  char *msg;

  ck_assert_int_lt (copy_under (99, &bytes, &msg), 0);
  ck_assert_uint_eq (bytes, 0);
  ck_assert_ptr_nonnull (strstr (msg, "more than 99 bytes"));
  free (msg);
  /* What earlier members used counts too.  */
  bytes = 50;
  ck_assert_int_lt (copy_under (120, &bytes, &msg), 0);
  ck_assert_uint_eq (bytes, 50);
  free (msg);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("archive_extract");
  TCase *tc = tcase_create ("types");

  tcase_add_test (tc, files_directories_and_symlinks_pass);
  tcase_add_test (tc, devices_fifos_and_sockets_are_refused_by_name);
  tcase_add_test (tc, a_member_without_a_known_type_is_refused);
  tcase_add_test (tc, a_hardlink_passes_whatever_type_it_carries);
  suite_add_tcase (s, tc);
  tc = tcase_create ("copy_data");
  tcase_add_test (tc, copy_data_counts_against_the_budget);
  tcase_add_test (tc, copy_data_refuses_a_block_that_would_cross_the_budget);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
