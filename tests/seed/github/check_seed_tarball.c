/* The GitHub tarball extractor (src/seed/tarball.c) against archives built
   here with libarchive: what a real tarball holds lands minus its top
   directory, and every hostile shape is refused with nothing written outside
   the destination.  */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <locale.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"

#include "seed/tarball.h"
#include "sp_check.h"

/* One archive member: f file, d directory, l symlink, h hardlink, c char
   device, p FIFO.  text is a file's data or a link's target.  */
struct member
{
  char type;
  const char *name;
  const char *text;
  mode_t mode;
  size_t size; /* a file of this many 'x' bytes when text is NULL */
};

static char root[64];
static char dst[128];
static char outside[128];
static int dstfd = -1;

static void
setup (void)
{
  snprintf (root, sizeof (root), "/tmp/sp-tarball-XXXXXX");
  ck_assert_ptr_nonnull (mkdtemp (root));
  snprintf (dst, sizeof (dst), "%s/dst", root);
  snprintf (outside, sizeof (outside), "%s/outside", root);
  ck_assert_int_eq (mkdir (dst, 0700), 0);
  ck_assert_int_eq (mkdir (outside, 0700), 0);
  dstfd = open (dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (dstfd, 0);
}

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  return remove (path);
}

static void
teardown (void)
{
  sp_closep (&dstfd);
  nftw (root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void
add_member (struct archive *a, const struct member *m)
{
  struct archive_entry *e = archive_entry_new ();
  cleanup_free char *data = NULL;
  size_t size = 0;

  archive_entry_set_pathname (e, m->name);
  archive_entry_set_mtime (e, 1700000000, 0);
  switch (m->type)
    {
    case 'f':
      size = m->text ? strlen (m->text) : m->size;
      data = malloc (size + 1);
      if (m->text)
        memcpy (data, m->text, size);
      else
        memset (data, 'x', size);
      archive_entry_set_filetype (e, AE_IFREG);
      archive_entry_set_size (e, (la_int64_t)size);
      break;
    case 'd':
      archive_entry_set_filetype (e, AE_IFDIR);
      break;
    case 'l':
      archive_entry_set_filetype (e, AE_IFLNK);
      archive_entry_set_symlink (e, m->text);
      break;
    case 'h':
      archive_entry_set_filetype (e, AE_IFREG);
      archive_entry_set_hardlink (e, m->text);
      archive_entry_set_size (e, 0);
      break;
    case 'c':
      archive_entry_set_filetype (e, AE_IFCHR);
      archive_entry_set_rdev (e, makedev (1, 3));
      break;
    case 'p':
      archive_entry_set_filetype (e, AE_IFIFO);
      break;
    default:
      ck_abort_msg ("unknown member type");
    }
  archive_entry_set_perm (e, m->mode ? m->mode : (m->type == 'd' ? 0755 : 0644));
  ck_assert_int_eq (archive_write_header (a, e), ARCHIVE_OK);
  if (size > 0)
    ck_assert_int_eq (archive_write_data (a, data, size), (la_ssize_t)size);
  archive_entry_free (e);
}

/* A gzip pax tarball of the members, in a memfd.  */
static int
build (const struct member *members, size_t n, bool gzip)
{
  struct archive *a = archive_write_new ();
  int fd = memfd_create ("test-tarball", MFD_CLOEXEC);
  locale_t utf8 = newlocale (LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
  locale_t previous;

  /* pax writes names as UTF-8, which the C locale cannot convert.  */
  ck_assert_ptr_nonnull (utf8);
  previous = uselocale (utf8);

  ck_assert_int_ge (fd, 0);
  if (gzip)
    ck_assert_int_eq (archive_write_add_filter_gzip (a), ARCHIVE_OK);
  ck_assert_int_eq (archive_write_set_format_pax_restricted (a), ARCHIVE_OK);
  ck_assert_int_eq (archive_write_open_fd (a, fd), ARCHIVE_OK);
  for (size_t i = 0; i < n; i++)
    add_member (a, &members[i]);
  ck_assert_int_eq (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);
  uselocale (previous);
  freelocale (utf8);
  return fd;
}

/* Runs the extractor; returns its result and leaves the message in msg.  */
static int
extract_with (int tarfd, uint64_t entries, uint64_t bytes, char msg[512])
{
  cleanup_error sp_error_t err = NULL;
  struct sp_tarball_limits limits = { .max_entries = entries, .max_tree_bytes = bytes };
  int ret = sp_tarball_extract (tarfd, dstfd, &limits, &err);

  snprintf (msg, 512, "%s", ret < 0 ? sp_error_message (err) : "");
  if (ret == 0)
    ck_assert_ptr_null (err);
  else
    ck_assert_ptr_nonnull (err);
  return ret;
}

#define EXTRACT(members, msg)                                                                                \
  extract_with (build (members, sizeof (members) / sizeof (members[0]), true), 1000, 1 << 20, msg)

static bool
exists_at (const char *dir, const char *name)
{
  char path[PATH_MAX];
  struct stat st;

  snprintf (path, sizeof (path), "%s/%s", dir, name);
  return lstat (path, &st) == 0;
}

static size_t
count_entries (const char *dir)
{
  cleanup_dir DIR *d = opendir (dir);
  struct dirent *de;
  size_t n = 0;

  ck_assert_ptr_nonnull (d);
  while ((de = readdir (d)) != NULL)
    if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
      n++;
  return n;
}

static void
assert_refused (int ret, const char *msg, const char *want)
{
  ck_assert_msg (ret < 0, "extraction succeeded; expected a refusal mentioning `%s`", want);
  ck_assert_msg (strstr (msg, want) != NULL, "message `%s` lacks `%s`", msg, want);
}

START_TEST (normal_tarball_extracted_minus_top_dir)
{
  const struct member m[] = {
    { 'd', "owner-repo-0123abc/", NULL, 0775, 0 },
    { 'f', "owner-repo-0123abc/README.md", "hello\n", 0664, 0 },
    { 'd', "owner-repo-0123abc/bin/", NULL, 0775, 0 },
    { 'f', "owner-repo-0123abc/bin/run", "#!/bin/sh\n", 0775, 0 },
    { 'l', "owner-repo-0123abc/link", "README.md", 0777, 0 },
    { 'l', "owner-repo-0123abc/abs-link", "/etc/passwd", 0777, 0 },
    { 'l', "owner-repo-0123abc/up-link", "../../..", 0777, 0 },
    { 'f', "owner-repo-0123abc/deep/er/file.txt", "deep", 0644, 0 },
    { 'h', "owner-repo-0123abc/hard", "owner-repo-0123abc/README.md", 0, 0 },
  };
  char msg[512], buf[64];
  struct stat st;
  ssize_t n;
  int fd;

  ck_assert_msg (EXTRACT (m, msg) == 0, "%s", msg);
  ck_assert (!exists_at (dst, "owner-repo-0123abc"));
  ck_assert_int_eq (count_entries (dst), 7);

  fd = openat (dstfd, "README.md", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  ck_assert_int_ge (fd, 0);
  n = read (fd, buf, sizeof (buf));
  close (fd);
  ck_assert_int_eq (n, 6);
  ck_assert (memcmp (buf, "hello\n", 6) == 0);

  ck_assert_int_eq (fstatat (dstfd, "README.md", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0644);
  ck_assert_int_eq (st.st_uid, geteuid ());
  ck_assert_int_eq (st.st_nlink, 2);
  ck_assert_int_eq (fstatat (dstfd, "bin/run", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0755);
  ck_assert_int_eq (fstatat (dstfd, "bin", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISDIR (st.st_mode));
  ck_assert_int_eq (st.st_mode & 07777, 0755);
  ck_assert_int_eq (fstatat (dstfd, "deep/er/file.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISREG (st.st_mode));

  n = readlinkat (dstfd, "link", buf, sizeof (buf) - 1);
  ck_assert_int_eq (n, 9);
  buf[n] = '\0';
  ck_assert_str_eq (buf, "README.md");
  n = readlinkat (dstfd, "abs-link", buf, sizeof (buf) - 1);
  ck_assert_int_gt (n, 0);
  buf[n] = '\0';
  ck_assert_str_eq (buf, "/etc/passwd");
  n = readlinkat (dstfd, "up-link", buf, sizeof (buf) - 1);
  ck_assert_int_gt (n, 0);
  buf[n] = '\0';
  ck_assert_str_eq (buf, "../../..");
}
END_TEST

START_TEST (dotdot_member_refused)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'f', "top/../outside/escaped", "x", 0, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, "`..`");
  ck_assert (!exists_at (outside, "escaped"));
  ck_assert (!exists_at (root, "escaped"));
}
END_TEST

START_TEST (absolute_member_refused)
{
  char name[256];
  char msg[512];

  snprintf (name, sizeof (name), "%s/escaped", outside);
  {
    const struct member m[] = {
      { 'f', name, "x", 0, 0 },
    };
    assert_refused (EXTRACT (m, msg), msg, "absolute");
  }
  ck_assert (!exists_at (outside, "escaped"));
  ck_assert_int_eq (count_entries (dst), 0);
}
END_TEST

START_TEST (write_through_absolute_symlink_refused)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'l', "top/evil", outside, 0, 0 },
    { 'f', "top/evil/file", "pwned", 0, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, "symlink");
  ck_assert (!exists_at (outside, "file"));
}
END_TEST

START_TEST (write_through_relative_symlink_refused)
{
  char canary[64];
  char msg[512];

  /* dst/evil -> ../../.. is "/" here: the canary would land at the root.  */
  snprintf (canary, sizeof (canary), "top/evil/sp-tarball-canary-%d", (int)getpid ());
  {
    const struct member m[] = {
      { 'd', "top/", NULL, 0, 0 },
      { 'l', "top/evil", "../../..", 0, 0 },
      { 'f', canary, "pwned", 0, 0 },
    };
    assert_refused (EXTRACT (m, msg), msg, "symlink");
  }
  ck_assert (!exists_at ("/", canary + strlen ("top/evil/")));
  ck_assert (!exists_at (root, canary + strlen ("top/evil/")));
}
END_TEST

START_TEST (overwrite_of_a_symlink_refused)
{
  char target[256];
  char msg[512];
  struct stat st;
  int fd;

  snprintf (target, sizeof (target), "%s/victim", outside);
  fd = open (target, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_ge (fd, 0);
  close (fd);
  {
    const struct member m[] = {
      { 'l', "top/evil", target, 0, 0 },
      { 'f', "top/evil", "pwned", 0, 0 },
    };
    assert_refused (EXTRACT (m, msg), msg, "already exists");
  }
  ck_assert_int_eq (stat (target, &st), 0);
  ck_assert_int_eq (st.st_size, 0);
}
END_TEST

START_TEST (hardlink_to_absolute_path_refused)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'h', "top/passwd", "/etc/passwd", 0, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, "hardlink target");
  ck_assert (!exists_at (dst, "passwd"));
}
END_TEST

START_TEST (hardlink_with_dotdot_refused)
{
  char secret[256];
  char msg[512];
  int fd;

  snprintf (secret, sizeof (secret), "%s/secret", outside);
  fd = open (secret, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_ge (fd, 0);
  close (fd);
  {
    const struct member m[] = {
      { 'd', "top/", NULL, 0, 0 },
      { 'h', "top/stolen", "top/../outside/secret", 0, 0 },
    };
    assert_refused (EXTRACT (m, msg), msg, "hardlink target");
  }
  ck_assert (!exists_at (dst, "stolen"));
}
END_TEST

START_TEST (hardlink_outside_top_dir_refused)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'h', "top/stolen", "other/file", 0, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, "outside the top-level directory");
  ck_assert (!exists_at (dst, "stolen"));
}
END_TEST

START_TEST (hardlink_to_a_symlink_refused)
{
  const struct member m[] = {
    { 'l', "top/link", "/etc/shadow", 0, 0 },
    { 'h', "top/hard", "top/link", 0, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, "not a regular file");
  ck_assert (!exists_at (dst, "hard"));
}
END_TEST

START_TEST (device_refused)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'c', "top/null", NULL, 0, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, "device");
  ck_assert (!exists_at (dst, "null"));
}
END_TEST

START_TEST (fifo_refused)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'p', "top/pipe", NULL, 0, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, "FIFO");
  ck_assert (!exists_at (dst, "pipe"));
}
END_TEST

START_TEST (member_outside_top_dir_refused)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'f', "top/a", "a", 0, 0 },
    { 'f', "other/b", "b", 0, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, "outside the top-level directory");
  ck_assert (!exists_at (dst, "b"));
  ck_assert (!exists_at (dst, "other"));
}
END_TEST

START_TEST (top_level_file_refused)
{
  const struct member m[] = {
    { 'f', "README", "no top directory", 0, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, "top-level member is not a directory");
  ck_assert_int_eq (count_entries (dst), 0);
}
END_TEST

START_TEST (dot_git_member_refused)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'f', "top/.git/hooks/post-checkout", "#!/bin/sh\n", 0755, 0 },
  };
  char msg[512];

  assert_refused (EXTRACT (m, msg), msg, ".git");
  ck_assert (!exists_at (dst, ".git"));
}
END_TEST

START_TEST (oversized_member_refused_before_writing)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'f', "top/big", NULL, 0, 5000 },
  };
  char msg[512];

  assert_refused (extract_with (build (m, 2, true), 1000, 4096, msg), msg, "5000 bytes");
  ck_assert (!exists_at (dst, "big"));
}
END_TEST

START_TEST (member_beyond_remaining_budget_refused)
{
  const struct member m[] = {
    { 'f', "top/one", NULL, 0, 3000 },
    { 'f', "top/two", NULL, 0, 3000 },
  };
  char msg[512];

  assert_refused (extract_with (build (m, 2, true), 1000, 4096, msg), msg, "1096 left");
  ck_assert (exists_at (dst, "one"));
  ck_assert (!exists_at (dst, "two"));
}
END_TEST

START_TEST (too_many_entries_refused)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 }, { 'f', "top/1", "1", 0, 0 }, { 'f', "top/2", "2", 0, 0 },
    { 'f', "top/3", "3", 0, 0 }, { 'f', "top/4", "4", 0, 0 },
  };
  char msg[512];

  assert_refused (extract_with (build (m, 5, true), 3, 1 << 20, msg), msg, "more than 3 entries");
  ck_assert (!exists_at (dst, "3"));
}
END_TEST

/* Copies the first len bytes of fd into a new memfd.  */
static int
truncated_copy (int fd, off_t len)
{
  int out = memfd_create ("truncated", MFD_CLOEXEC);
  cleanup_free char *buf = malloc ((size_t)len);

  ck_assert_int_ge (out, 0);
  ck_assert_int_eq (pread (fd, buf, (size_t)len, 0), len);
  ck_assert_int_eq (write (out, buf, (size_t)len), len);
  close (fd);
  return out;
}

static const struct member truncation_members[] = {
  { 'd', "top/", NULL, 0, 0 },
  { 'f', "top/a", NULL, 0, 200000 },
  { 'f', "top/b", "b", 0, 0 },
};

START_TEST (truncated_gzip_stream_is_error_and_writes_nothing)
{
  int full = build (truncation_members, 3, true);
  struct stat st;
  char msg[512];

  ck_assert_int_eq (fstat (full, &st), 0);
  assert_refused (extract_with (truncated_copy (full, st.st_size / 2), 1000, 1 << 20, msg), msg, "truncated");
  ck_assert_int_eq (count_entries (dst), 0);
}
END_TEST

START_TEST (gzip_stream_without_its_trailer_is_error)
{
  int full = build (truncation_members, 3, true);
  struct stat st;
  char msg[512];

  /* Everything the tar reader needs is there; only gzip's 8-byte trailer
     is cut, which a tar reader alone never notices.  */
  ck_assert_int_eq (fstat (full, &st), 0);
  assert_refused (extract_with (truncated_copy (full, st.st_size - 4), 1000, 1 << 20, msg), msg, "truncated");
  ck_assert_int_eq (count_entries (dst), 0);
}
END_TEST

START_TEST (plain_tar_refused)
{
  const struct member m[] = {
    { 'f', "top/a", "a", 0, 0 },
  };
  char msg[512];

  assert_refused (extract_with (build (m, 1, false), 1000, 1 << 20, msg), msg, "gzip");
  ck_assert_int_eq (count_entries (dst), 0);
}
END_TEST

START_TEST (setuid_setgid_sticky_stripped)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'f', "top/suid", "x", 04755, 0 },
    { 'f', "top/sgid", "x", 02750, 0 },
    { 'd', "top/sticky/", NULL, 01777, 0 },
  };
  char msg[512];
  struct stat st;

  ck_assert_msg (EXTRACT (m, msg) == 0, "%s", msg);
  ck_assert_int_eq (fstatat (dstfd, "suid", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0755);
  ck_assert_int_eq (fstatat (dstfd, "sgid", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0755);
  ck_assert_int_eq (fstatat (dstfd, "sticky", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0755);
}
END_TEST

START_TEST (non_empty_destination_refused)
{
  const struct member m[] = {
    { 'f', "top/a", "a", 0, 0 },
  };
  char msg[512];

  ck_assert_int_eq (mkdirat (dstfd, "already", 0700), 0);
  assert_refused (EXTRACT (m, msg), msg, "not empty");
  ck_assert (!exists_at (dst, "a"));
}
END_TEST

START_TEST (working_directory_restored)
{
  const struct member good[] = {
    { 'f', "top/a", "a", 0, 0 },
  };
  const struct member bad[] = {
    { 'f', "top/a", "a", 0, 0 },
    { 'p', "top/fifo", NULL, 0, 0 },
  };
  char before[PATH_MAX], after[PATH_MAX], msg[512];

  ck_assert_ptr_nonnull (getcwd (before, sizeof (before)));
  ck_assert_int_eq (EXTRACT (good, msg), 0);
  ck_assert_ptr_nonnull (getcwd (after, sizeof (after)));
  ck_assert_str_eq (before, after);
  ck_assert_int_eq (unlinkat (dstfd, "a", 0), 0);
  ck_assert_int_lt (EXTRACT (bad, msg), 0);
  ck_assert_ptr_nonnull (getcwd (after, sizeof (after)));
  ck_assert_str_eq (before, after);
}
END_TEST

START_TEST (utf8_names_extracted)
{
  const struct member m[] = {
    { 'd', "top/", NULL, 0, 0 },
    { 'f', "top/caf\xc3\xa9.txt", "utf-8", 0, 0 },
    { 'l', "top/\xe2\x86\x92", "caf\xc3\xa9.txt", 0, 0 },
  };
  char msg[512];

  ck_assert_msg (EXTRACT (m, msg) == 0, "%s", msg);
  ck_assert (exists_at (dst, "caf\xc3\xa9.txt"));
  ck_assert (exists_at (dst, "\xe2\x86\x92"));
}
END_TEST

static Suite *
tarball_suite (void)
{
  Suite *s = suite_create ("seed_tarball");
  TCase *tc = tcase_create ("extract");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, normal_tarball_extracted_minus_top_dir);
  tcase_add_test (tc, dotdot_member_refused);
  tcase_add_test (tc, absolute_member_refused);
  tcase_add_test (tc, write_through_absolute_symlink_refused);
  tcase_add_test (tc, write_through_relative_symlink_refused);
  tcase_add_test (tc, overwrite_of_a_symlink_refused);
  tcase_add_test (tc, hardlink_to_absolute_path_refused);
  tcase_add_test (tc, hardlink_with_dotdot_refused);
  tcase_add_test (tc, hardlink_outside_top_dir_refused);
  tcase_add_test (tc, hardlink_to_a_symlink_refused);
  tcase_add_test (tc, device_refused);
  tcase_add_test (tc, fifo_refused);
  tcase_add_test (tc, member_outside_top_dir_refused);
  tcase_add_test (tc, top_level_file_refused);
  tcase_add_test (tc, dot_git_member_refused);
  tcase_add_test (tc, oversized_member_refused_before_writing);
  tcase_add_test (tc, member_beyond_remaining_budget_refused);
  tcase_add_test (tc, too_many_entries_refused);
  tcase_add_test (tc, truncated_gzip_stream_is_error_and_writes_nothing);
  tcase_add_test (tc, gzip_stream_without_its_trailer_is_error);
  tcase_add_test (tc, plain_tar_refused);
  tcase_add_test (tc, setuid_setgid_sticky_stripped);
  tcase_add_test (tc, non_empty_destination_refused);
  tcase_add_test (tc, working_directory_restored);
  tcase_add_test (tc, utf8_names_extracted);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (tarball_suite)
