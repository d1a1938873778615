/* rootfs.lock: every field is validated, and an error names the line and the
   field.  Pure: no files, no root.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"

#include "rootfs/lock.h"
#include "sp_check.h"

#define HEADER SP_LOCK_HEADER "\n"
#define SHA_A  "69f41cfa3f4ba17284e538f843069d7529c53c207d2ae17a5b02785944870e33"
#define GOOD   "libc6 2.36-9+deb12u14 amd64 " SHA_A "\n"

static char *
parse_fails (const char *text)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_lock lock = { 0 };

  ck_assert_int_eq (sp_lock_parse (text, strlen (text), &lock, &err), -1);
  ck_assert_ptr_null (lock.entries);
  return strdup (sp_error_message (err));
}

START_TEST (lock_with_valid_lines_parses_every_field)
{
  const char *text = HEADER "# a comment\n"
                            "\n" GOOD "zlib1g 1:1.2.13.dfsg-1 amd64 " SHA_A "\n"
                            "media-types 10.0.0 all " SHA_A "\n";
  cleanup_error sp_error_t err = NULL;
  struct sp_lock lock = { 0 };

  if (sp_lock_parse (text, strlen (text), &lock, &err) < 0)
    ck_abort_msg ("%s", sp_error_message (err));
  ck_assert_uint_eq (lock.count, 3);
  ck_assert_str_eq (lock.entries[0].name, "libc6");
  ck_assert_str_eq (lock.entries[0].version, "2.36-9+deb12u14");
  ck_assert_str_eq (lock.entries[0].arch, "amd64");
  ck_assert_uint_eq (lock.entries[0].sha256[0], 0x69);
  ck_assert_uint_eq (lock.entries[0].sha256[31], 0x33);
  ck_assert_uint_eq (lock.entries[0].line, 4);
  ck_assert_str_eq (lock.entries[1].version, "1:1.2.13.dfsg-1");
  ck_assert_str_eq (lock.entries[2].arch, "all");
  sp_lock_release (&lock);
}
END_TEST

START_TEST (lock_deb_filename_escapes_the_epoch_colon_as_apt_does)
{
  struct sp_lock_entry e = { .name = "zlib1g", .version = "1:1.2.13.dfsg-1", .arch = "amd64" };
  char name[SP_LOCK_DEB_NAME_SIZE];

  sp_lock_deb_filename (&e, name);
  ck_assert_str_eq (name, "zlib1g_1%3a1.2.13.dfsg-1_amd64.deb");
}
END_TEST

/* One bad lock each, and what its error must say.  */
static const struct
{
  const char *text;
  const char *line;
  const char *field;
} bad_locks[] = {
  /* NAME */
  { HEADER "Libc6 2.36-9 amd64 " SHA_A "\n", "line 2", "field NAME" },
  { HEADER "l 2.36-9 amd64 " SHA_A "\n", "line 2", "field NAME" },
  { HEADER "-libc 2.36-9 amd64 " SHA_A "\n", "line 2", "field NAME" },
  { HEADER "lib_c 2.36-9 amd64 " SHA_A "\n", "line 2", "field NAME" },
  { HEADER "lib/c 2.36-9 amd64 " SHA_A "\n", "line 2", "field NAME" },
  { HEADER GOOD "# again\n" GOOD, "line 4", "field NAME" }, /* pinned twice */
  /* VERSION */
  { HEADER "libc6 v2.36 amd64 " SHA_A "\n", "line 2", "field VERSION" },
  { HEADER "libc6 :2.36 amd64 " SHA_A "\n", "line 2", "field VERSION" },
  { HEADER "libc6 1:2:36 amd64 " SHA_A "\n", "line 2", "field VERSION" },
  { HEADER "libc6 2.36- amd64 " SHA_A "\n", "line 2", "field VERSION" },
  { HEADER "libc6 2.36/9 amd64 " SHA_A "\n", "line 2", "field VERSION" },
  { HEADER "libc6 2.36_9 amd64 " SHA_A "\n", "line 2", "field VERSION" },
  /* ARCH */
  { HEADER "libc6 2.36-9 AMD64 " SHA_A "\n", "line 2", "field ARCH" },
  { HEADER "libc6 2.36-9 amd_64 " SHA_A "\n", "line 2", "field ARCH" },
  { HEADER "libc6 2.36-9 averyveryverylongarch " SHA_A "\n", "line 2", "field ARCH" },
  /* SHA256 */
  { HEADER "libc6 2.36-9 amd64 69f41cfa\n", "line 2", "field SHA256" },
  { HEADER "libc6 2.36-9 amd64 " SHA_A "0\n", "line 2", "field SHA256" },
  { HEADER "libc6 2.36-9 amd64 69F41CFA3F4BA17284E538F843069D7529C53C207D2AE17A5B02785944870E33\n", "line 2",
    "field SHA256" },
  { HEADER "libc6 2.36-9 amd64 g9f41cfa3f4ba17284e538f843069d7529c53c207d2ae17a5b02785944870e33\n", "line 2",
    "field SHA256" },
  /* The shape of a line.  */
  { HEADER "libc6 2.36-9 amd64\n", "line 2", "NAME VERSION ARCH SHA256" },
  { HEADER "libc6 2.36-9 amd64 " SHA_A " extra\n", "line 2", "NAME VERSION ARCH SHA256" },
  { HEADER "libc6  2.36-9 amd64 " SHA_A "\n", "line 2", "NAME VERSION ARCH SHA256" },
  { HEADER "libc6 2.36-9 amd64 " SHA_A " \n", "line 2", "NAME VERSION ARCH SHA256" },
  { HEADER " libc6 2.36-9 amd64 " SHA_A "\n", "line 2", "NAME VERSION ARCH SHA256" },
  { HEADER "libc6\t2.36-9\tamd64\t" SHA_A "\n", "line 2", "NAME VERSION ARCH SHA256" },
  { HEADER "libc6 2.36-9 amd64 " SHA_A "\r\n", "line 2", "carriage return" },
  /* The file as a whole.  */
  { "libc6 2.36-9 amd64 " SHA_A "\n", "line 1", SP_LOCK_HEADER },
  { "# sealed-probe-rootfs-lock 2\n" GOOD, "line 1", SP_LOCK_HEADER },
  { HEADER "libc6 2.36-9 amd64 " SHA_A, "", "newline" },
  { HEADER "# nothing pinned\n", "", "pins no package" },
  { "", "", "empty" },
};

START_TEST (lock_bad_line_is_refused_naming_line_and_field)
{
  cleanup_free char *msg = parse_fails (bad_locks[_i].text);

  if (!strstr (msg, bad_locks[_i].line) || !strstr (msg, bad_locks[_i].field))
    ck_abort_msg ("case %d: expected \"%s\" and \"%s\" in: %s", _i, bad_locks[_i].line, bad_locks[_i].field,
                  msg);
}
END_TEST

START_TEST (lock_with_a_nul_byte_is_refused)
{
  const char text[] = HEADER "libc6\0 2.36-9 amd64 " SHA_A "\n";
  cleanup_error sp_error_t err = NULL;
  struct sp_lock lock = { 0 };

  ck_assert_int_eq (sp_lock_parse (text, sizeof (text) - 1, &lock, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "NUL"));
}
END_TEST

START_TEST (lock_with_too_many_packages_is_refused)
{
  cleanup_free char *text = strdup (HEADER);
  cleanup_free char *msg = NULL;

  for (int i = 0; i <= SP_LOCK_MAX_PACKAGES; i++)
    {
      char *next;
      ck_assert_int_ge (asprintf (&next, "%spkg%d 1.0 amd64 %s\n", text, i, SHA_A), 0);
      free (text);
      text = next;
    }
  msg = parse_fails (text);
  ck_assert_ptr_nonnull (strstr (msg, "more than"));
}
END_TEST

START_TEST (lock_load_names_the_file)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_lock lock = { 0 };

  ck_assert_int_eq (sp_lock_load ("/nonexistent/rootfs.lock", &lock, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "/nonexistent/rootfs.lock"));
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("rootfs_lock");
  TCase *tc = tcase_create ("lock");

  tcase_add_test (tc, lock_with_valid_lines_parses_every_field);
  tcase_add_test (tc, lock_deb_filename_escapes_the_epoch_colon_as_apt_does);
  tcase_add_loop_test (tc, lock_bad_line_is_refused_naming_line_and_field, 0,
                       (int)(sizeof (bad_locks) / sizeof (bad_locks[0])));
  tcase_add_test (tc, lock_with_a_nul_byte_is_refused);
  tcase_add_test (tc, lock_with_too_many_packages_is_refused);
  tcase_add_test (tc, lock_load_names_the_file);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
