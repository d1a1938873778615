/* The archive member types an extractor refuses (archive_entry_check.h):
   devices, FIFOs, sockets and unknown types, but never a hardlink, whatever
   type it carries.  */
#include <archive_entry.h>
#include <string.h>

#include <sealed-probe/archive_entry_check.h>

#include "sp_check.h"

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

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("archive_entry_check");
  TCase *tc = tcase_create ("types");

  tcase_add_test (tc, files_directories_and_symlinks_pass);
  tcase_add_test (tc, devices_fifos_and_sockets_are_refused_by_name);
  tcase_add_test (tc, a_member_without_a_known_type_is_refused);
  tcase_add_test (tc, a_hardlink_passes_whatever_type_it_carries);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
