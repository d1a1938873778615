/* The tree walks that seeds and the rootfs share (src/tree/) and the safe
   copy's size accounting: the path limit (SP_TREE_PATH_MAX) holds as
   documented, messages quote names, removal has no path limit and
   converges, and an oversized sparse file costs no disk.  Needs root
   (normalization chowns, the immutable flag).  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/sha256.h"
#include "tree/copy.h"
#include "tree/digest.h"
#include "tree/normalize.h"
#include "tree/remove.h"
#include "tree/walk.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

#define HOSTILE "evil\n\x1b[2Jsealed-probe-proxy: all good"
#define NAME200 200

static char tmp[64];
static int tmpfd = -1;

static void
setup (void)
{
  snprintf (tmp, sizeof (tmp), "/tmp/sp-tree-XXXXXX");
  tmpfd = sp_tmpdir_make (tmp);
}

static void
teardown (void)
{
  sp_error_t err = NULL;

  close (tmpfd);
  /* The removal under test cleans up after itself; nftw could not (paths
     over PATH_MAX).  */
  if (sp_tree_remove_at (AT_FDCWD, tmp, &err) < 0)
    {
      fprintf (stderr, "teardown: %s\n", sp_error_message (err));
      sp_error_release (&err);
    }
}

/* A name of NAME200 bytes: the letter c, then digits.  */
static void
long_name (char out[NAME200 + 1], char c, int i)
{
  memset (out, c, NAME200);
  snprintf (out + NAME200 - 8, 9, "%08d", i);
}

/* Makes levels nested directories named by make_name below dirfd/top and
   returns an fd on the deepest one.  Works by fds: the path may be far over
   PATH_MAX.  */
static int
make_chain (int dirfd, const char *top, int levels, void (*make_name) (char *, int), size_t *path_len)
{
  char name[NAME200 + 1];
  int fd;

  ck_assert_int_eq (mkdirat (dirfd, top, 0755), 0);
  fd = openat (dirfd, top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  *path_len = strlen (top);
  for (int i = 0; i < levels; i++)
    {
      int next;

      make_name (name, i);
      ck_assert_int_eq (mkdirat (fd, name, 0755), 0);
      next = openat (fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      ck_assert_int_ge (next, 0);
      close (fd);
      fd = next;
      *path_len += 1 + strlen (name);
    }
  return fd;
}

static void
name200 (char *out, int i)
{
  long_name (out, 'd', i);
}

static void
name1 (char *out, int i)
{
  (void)i;
  strcpy (out, "d");
}

static void
write_file_at (int dirfd, const char *name, const char *text)
{
  int fd = openat (dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, text, strlen (text)), (ssize_t)strlen (text));
  close (fd);
}

/* No control byte and no byte above 0x7e: one line, nothing for a terminal
   to act on.  */
static void
assert_one_printable_line (const char *msg)
{
  for (const char *p = msg; *p; p++)
    ck_assert_msg ((unsigned char)*p >= 0x20 && (unsigned char)*p <= 0x7e, "raw byte 0x%02x in: %s",
                   (unsigned char)*p, msg);
}

static bool
exists_at (int dirfd, const char *name)
{
  struct stat st;

  return fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

struct longest
{
  size_t max_len;
  size_t entries;
};

static int
note_longest (int dirfd, const char *name, const char *path, const struct stat *st,
              enum sp_tree_walk_event event, void *ctx, sp_error_t *err)
{
  struct longest *l = ctx;

  (void)dirfd, (void)name, (void)st, (void)err;
  if (event == SP_TREE_WALK_ENTRY)
    {
      l->entries++;
      if (strlen (path) > l->max_len)
        l->max_len = strlen (path);
    }
  return 0;
}

/* 19 directories of 200 bytes and a file: a path of 4,000 bytes below the
   top, within the documented 4,095.  */
START_TEST (walk_normalize_digest_and_remove_take_a_4000_byte_path)
{
  sp_error_t err = NULL;
  char file[NAME200 + 1];
  char digest1[SP_DIGEST_TEXT_SIZE], digest2[SP_DIGEST_TEXT_SIZE];
  struct longest l = { 0 };
  size_t len;
  int rootfd, deep;

  ck_assert_int_eq (mkdirat (tmpfd, "root", 0755), 0);
  rootfd = openat (tmpfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  deep = make_chain (rootfd, "t", 19, name200, &len);
  /* "t" + 19 × "/NAME200" = 3,820 bytes; the file's name brings it to 4,000.  */
  memset (file, 'f', 4000 - len - 1);
  file[4000 - len - 1] = '\0';
  write_file_at (deep, file, "deep\n");
  close (deep);

  ck_assert_msg (sp_tree_walk (rootfd, note_longest, &l, &err) == 0, "%s", sp_error_message (err));
  ck_assert_uint_eq (l.max_len, 4000);
  ck_assert_uint_eq (l.entries, 21);
  ck_assert_msg (sp_tree_normalize (rootfd, &sp_seed_policy, &err) == 0, "%s", sp_error_message (err));
  ck_assert_msg (sp_tree_digest (rootfd, digest1, &err) == 0, "%s", sp_error_message (err));
  ck_assert_msg (sp_tree_digest (rootfd, digest2, &err) == 0, "%s", sp_error_message (err));
  ck_assert_str_eq (digest1, digest2);
  close (rootfd);

  ck_assert_msg (sp_tree_remove_at (tmpfd, "root", &err) == 0, "%s", sp_error_message (err));
  ck_assert (!exists_at (tmpfd, "root"));
}
END_TEST

/* A meter that counts the entries and bytes it is shown, and stops the
   walk at stop_after (0: never).  */
struct meter
{
  unsigned entries, stop_after;
  uint64_t bytes;
};

static int
meter_tick (void *ctx, uint64_t bytes, sp_error_t *err)
{
  struct meter *m = ctx;

  m->entries++;
  m->bytes += bytes;
  if (m->stop_after != 0 && m->entries >= m->stop_after)
    return sp_make_error (err, 0, "interrupted by the test");
  return 0;
}

/* Normalization and the digest count each entry and its file bytes on the
   meter, the digest is the uncounted one's, and a meter that says stop
   ends the walk there with its error.  */
START_TEST (normalize_and_digest_count_each_entry_and_stop_when_told)
{
  sp_error_t err = NULL;
  char plain[SP_DIGEST_TEXT_SIZE], counted[SP_DIGEST_TEXT_SIZE];
  struct meter all = { 0 }, dig = { 0 }, stop = { .stop_after = 3 };
  int rootfd;

  ck_assert_int_eq (mkdirat (tmpfd, "root", 0755), 0);
  rootfd = openat (tmpfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_eq (mkdirat (rootfd, "d", 0755), 0);
  write_file_at (rootfd, "a", "12345");
  write_file_at (rootfd, "b", "678");
  ck_assert_int_eq (symlinkat ("a", rootfd, "l"), 0);

  ck_assert_msg (sp_tree_normalize_counted (rootfd, &sp_seed_policy, meter_tick, &all, &err) == 0, "%s",
                 sp_error_message (err));
  ck_assert_uint_eq (all.entries, 4);
  ck_assert_uint_eq (all.bytes, 8);
  ck_assert_msg (sp_tree_digest (rootfd, plain, &err) == 0, "%s", sp_error_message (err));
  ck_assert_msg (sp_tree_digest_counted (rootfd, counted, meter_tick, &dig, &err) == 0, "%s",
                 sp_error_message (err));
  ck_assert_str_eq (plain, counted);
  ck_assert_uint_eq (dig.entries, 4);
  ck_assert_uint_eq (dig.bytes, 8);

  ck_assert_int_eq (sp_tree_digest_counted (rootfd, counted, meter_tick, &stop, &err), -1);
  ck_assert_uint_eq (stop.entries, 3);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "interrupted by the test"));
  sp_error_release (&err);
  stop.entries = 0;
  ck_assert_int_eq (sp_tree_normalize_counted (rootfd, &sp_seed_policy, meter_tick, &stop, &err), -1);
  ck_assert_uint_eq (stop.entries, 3);
  sp_error_release (&err);
  close (rootfd);
  ck_assert_msg (sp_tree_remove_at (tmpfd, "root", &err) == 0, "%s", sp_error_message (err));
}
END_TEST

/* A hostile top directory, then enough 200-byte levels to pass 4,095
   bytes: every walk refuses it, with one printable line that names the
   limit and shows the hostile name escaped.  */
START_TEST (path_over_the_limit_is_refused_with_a_quoted_one_line_message)
{
  sp_error_t err = NULL;
  char digest[SP_DIGEST_TEXT_SIZE];
  struct longest l = { 0 };
  size_t len;
  int rootfd, deep;

  ck_assert_int_eq (mkdirat (tmpfd, "root", 0755), 0);
  rootfd = openat (tmpfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  deep = make_chain (rootfd, HOSTILE, 21, name200, &len);
  ck_assert_uint_gt (len, SP_TREE_PATH_MAX - 1);
  close (deep);

  ck_assert_int_eq (sp_tree_walk (rootfd, note_longest, &l, &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), "longer than 4095 bytes") != NULL, "%s",
                 sp_error_message (err));
  ck_assert_msg (strstr (sp_error_message (err), "evil\\x0a\\x1b[2Jsealed-probe-proxy") != NULL, "%s",
                 sp_error_message (err));
  assert_one_printable_line (sp_error_message (err));
  sp_error_release (&err);

  ck_assert_int_eq (sp_tree_digest (rootfd, digest, &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), "longer than 4095 bytes") != NULL, "%s",
                 sp_error_message (err));
  assert_one_printable_line (sp_error_message (err));
  sp_error_release (&err);

  ck_assert_int_eq (sp_tree_normalize (rootfd, &sp_seed_policy, &err), -1);
  assert_one_printable_line (sp_error_message (err));
  sp_error_release (&err);
  close (rootfd);
}
END_TEST

/* 100 levels of 200 bytes (a 20,100-byte path) and 5,000 levels of "d"
   (deeper than any fd limit): removal works by fds, one directory at a
   time, and needs no path.  */
START_TEST (removal_takes_paths_far_over_the_limit_and_any_depth)
{
  sp_error_t err = NULL;
  size_t len;
  int deep;

  deep = make_chain (tmpfd, "wide", 100, name200, &len);
  ck_assert_uint_gt (len, 4 * SP_TREE_PATH_MAX);
  write_file_at (deep, "file", "x");
  close (deep);
  deep = make_chain (tmpfd, "deep", 5000, name1, &len);
  write_file_at (deep, "file", "x");
  /* Read-only on the way down is no obstacle.  */
  ck_assert_int_eq (fchmod (deep, 0555), 0);
  close (deep);

  ck_assert_msg (sp_tree_remove_at (tmpfd, "wide", &err) == 0, "%s", sp_error_message (err));
  ck_assert_msg (sp_tree_remove_at (tmpfd, "deep", &err) == 0, "%s", sp_error_message (err));
  ck_assert (!exists_at (tmpfd, "wide"));
  ck_assert (!exists_at (tmpfd, "deep"));
}
END_TEST

static int
set_immutable (int dirfd, const char *name, bool on)
{
  int fd = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  int flags = 0;
  int ret;

  if (fd < 0)
    return -1;
  ret = ioctl (fd, FS_IOC_GETFLAGS, &flags);
  if (ret == 0)
    {
      flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
      ret = ioctl (fd, FS_IOC_SETFLAGS, &flags);
    }
  close (fd);
  return ret;
}

/* a/, HOSTILE/locked (immutable) and z/: the first removal removes a/ and
   z/, fails naming the locked file quoted on one line; once the flag is
   off, a second removal finishes.  */
START_TEST (removal_keeps_going_past_an_undeletable_entry_and_a_second_call_finishes)
{
  sp_error_t err = NULL;
  int rootfd, hostile;

  ck_assert_int_eq (mkdirat (tmpfd, "root", 0755), 0);
  rootfd = openat (tmpfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_eq (mkdirat (rootfd, "a", 0755), 0);
  ck_assert_int_eq (mkdirat (rootfd, "z", 0755), 0);
  ck_assert_int_eq (mkdirat (rootfd, HOSTILE, 0755), 0);
  hostile = openat (rootfd, HOSTILE, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  write_file_at (hostile, "locked", "x");
  write_file_at (hostile, "other", "x");
  if (set_immutable (hostile, "locked", true) < 0)
    {
      printf ("# SKIP the immutable flag is not available here (%s), so nothing can be made undeletable\n",
              strerror (errno));
      close (hostile);
      close (rootfd);
      return;
    }

  ck_assert_int_eq (sp_tree_remove_at (tmpfd, "root", &err), -1);
  assert_one_printable_line (sp_error_message (err));
  ck_assert_msg (
      strstr (sp_error_message (err), "remove `root/evil\\x0a\\x1b[2Jsealed-probe-proxy: all good/locked`")
          != NULL,
      "%s", sp_error_message (err));
  sp_error_release (&err);
  /* Everything else went.  */
  ck_assert (!exists_at (rootfd, "a"));
  ck_assert (!exists_at (rootfd, "z"));
  ck_assert (!exists_at (hostile, "other"));
  ck_assert (exists_at (hostile, "locked"));

  ck_assert_int_eq (set_immutable (hostile, "locked", false), 0);
  close (hostile);
  close (rootfd);
  ck_assert_msg (sp_tree_remove_at (tmpfd, "root", &err) == 0, "%s", sp_error_message (err));
  ck_assert (!exists_at (tmpfd, "root"));
}
END_TEST

/* A mount point is never entered: what is mounted keeps its content, the
   rest goes, and the mount point is reported.  */
START_TEST (removal_never_enters_a_mount_and_reports_it)
{
  sp_error_t err = NULL;
  char mnt[128];
  int rootfd, mfd;

  ck_assert_int_eq (mkdirat (tmpfd, "root", 0755), 0);
  rootfd = openat (tmpfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_eq (mkdirat (rootfd, "m", 0755), 0);
  write_file_at (rootfd, "plain", "x");
  snprintf (mnt, sizeof (mnt), "%s/root/m", tmp);
  if (mount ("sp-tree-test", mnt, "tmpfs", 0, "size=1m") < 0)
    {
      printf ("# SKIP cannot mount a tmpfs here (%s)\n", strerror (errno));
      close (rootfd);
      return;
    }
  mfd = openat (rootfd, "m", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  write_file_at (mfd, "kept", "x");

  ck_assert_int_eq (sp_tree_remove_at (tmpfd, "root", &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), "`root/m`: something is mounted on it") != NULL, "%s",
                 sp_error_message (err));
  sp_error_release (&err);
  ck_assert (!exists_at (rootfd, "plain"));
  ck_assert (exists_at (mfd, "kept"));
  close (mfd);
  ck_assert_int_eq (umount (mnt), 0);
  close (rootfd);
  ck_assert_msg (sp_tree_remove_at (tmpfd, "root", &err) == 0, "%s", sp_error_message (err));
}
END_TEST

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A 20 GB sparse file against the seed's 4 GiB: refused before a byte of it
   is written, within a second, with the disk's free space unchanged (up to
   what other processes on the machine do meanwhile: far below 4 GiB).  */
START_TEST (copy_refuses_a_sparse_20_gb_file_at_once_and_costs_no_disk)
{
  static const struct sp_copy_options limits = {
    .max_bytes = SP_SEED_MAX_BYTES,
    .max_entries = SP_SEED_MAX_ENTRIES,
    .max_depth = SP_SEED_MAX_DEPTH,
  };
  const unsigned long long slack = 256ULL << 20;
  sp_error_t err = NULL;
  struct statvfs before, after;
  unsigned long long free_before, free_after;
  double start, elapsed;
  int src, dst, fd;

  ck_assert_int_eq (mkdirat (tmpfd, "src", 0755), 0);
  ck_assert_int_eq (mkdirat (tmpfd, "dst", 0700), 0);
  src = openat (tmpfd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  dst = openat (tmpfd, "dst", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  fd = openat (src, "sparse", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (ftruncate (fd, 20LL * 1000 * 1000 * 1000), 0);
  close (fd);

  ck_assert_int_eq (fstatvfs (dst, &before), 0);
  start = now ();
  ck_assert_int_eq (sp_tree_copy (src, dst, &limits, 0, 0, &err), -1);
  elapsed = now () - start;
  ck_assert_int_eq (fstatvfs (dst, &after), 0);

  ck_assert_msg (strstr (sp_error_message (err), "more than 4294967296 bytes") != NULL, "%s",
                 sp_error_message (err));
  ck_assert_msg (strstr (sp_error_message (err), "`sparse`") != NULL, "%s", sp_error_message (err));
  ck_assert_msg (elapsed < 1.0, "took %.2f s", elapsed);
  free_before = (unsigned long long)before.f_bavail * before.f_frsize;
  free_after = (unsigned long long)after.f_bavail * after.f_frsize;
  ck_assert_msg (free_after + slack >= free_before, "free space went from %llu to %llu", free_before,
                 free_after);
  ck_assert (!exists_at (dst, "sparse"));
  sp_error_release (&err);
  close (src);
  close (dst);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_tree");
  TCase *tc = tcase_create ("tree");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, walk_normalize_digest_and_remove_take_a_4000_byte_path);
  tcase_add_test (tc, normalize_and_digest_count_each_entry_and_stop_when_told);
  tcase_add_test (tc, path_over_the_limit_is_refused_with_a_quoted_one_line_message);
  tcase_add_test (tc, removal_takes_paths_far_over_the_limit_and_any_depth);
  tcase_add_test (tc, removal_keeps_going_past_an_undeletable_entry_and_a_second_call_finishes);
  tcase_add_test (tc, removal_never_enters_a_mount_and_reports_it);
  tcase_add_test (tc, copy_refuses_a_sparse_20_gb_file_at_once_and_costs_no_disk);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN_AS_ROOT (make_suite,
                       "normalization chowns, and the removal tests set the immutable flag and mount")
