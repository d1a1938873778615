/* The invocation workspace and its two snapshot modes, on real tmpfs and
   overlay mounts (root only).  A fake seed, owned by the probe uid like a
   staged one and bind-mounted onto itself read-only like staging does, is
   snapshotted for a probe identity (probe_identity.h); the probe's host id
   writes through the snapshot in a forked child; the seed must stay
   byte-identical and nothing may stay mounted.  */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "bundle/bundle.h"
#include "serve/probe_identity.h"
#include "serve/workspace.h"
#include "tree/digest.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

#define TMPFS_BYTES  (4ULL << 20)
#define TMPFS_INODES 64
#define RUN          "run-1"
#define SEED_README  "hello, seed\n"

/* The probe identity every snapshot here is made for: slot 0 of the
   default range.  */
static struct sp_probe_identity probe
    = { .idmap_userns_fd = -1, .root_lock_fd = -1, .probe_lock_fd = -1, .lock_dirfd = -1 };
#define PROBE_ID (probe.host_probe_id)

static const struct sp_workspace_limits limits = { .tmpfs_bytes = TMPFS_BYTES, .tmpfs_inodes = TMPFS_INODES };
static const struct sp_copy_options copy_limits
    = { .max_bytes = 1 << 20, .max_entries = 1000, .max_depth = 16 };

/* The whole test's scratch: base/seed (read-only bind mount), base/work.  */
static char base[64];
static char seed_path[128];
static char work_path[128];
static char run_path[256];
static int seed_fd = -1;
static int work_fd = -1;
static int run_fd = -1;
static char seed_digest[SP_DIGEST_TEXT_SIZE];

/* ---- mounts under a prefix, from /proc/self/mountinfo ---------------- */

/* Fills points (each PATH_MAX) with the mount points under prefix, in
   mount order, and returns how many.  */
static size_t
mounts_under (const char *prefix, char (*points)[PATH_MAX], size_t max)
{
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  char line[4096];
  size_t n = 0, plen = strlen (prefix);

  if (f == NULL)
    return 0;
  while (fgets (line, sizeof (line), f) != NULL)
    {
      char point[PATH_MAX];

      if (sscanf (line, "%*s %*s %*s %*s %4095s", point) != 1)
        continue;
      if (strncmp (point, prefix, plen) == 0 && (point[plen] == '/' || point[plen] == '\0'))
        {
          if (points != NULL && n < max)
            snprintf (points[n], PATH_MAX, "%s", point);
          n++;
        }
    }
  fclose (f);
  return n;
}

/* The mountinfo line whose mount point is exactly point, or false.  */
static bool
mountinfo_line (const char *point, char *out, size_t out_size)
{
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  char line[4096];
  bool found = false;

  if (f == NULL)
    return false;
  while (fgets (line, sizeof (line), f) != NULL)
    {
      char p[PATH_MAX];

      if (sscanf (line, "%*s %*s %*s %*s %4095s", p) == 1 && strcmp (p, point) == 0)
        {
          snprintf (out, out_size, "%s", line);
          found = true;
        }
    }
  fclose (f);
  return found;
}

/* Test cleanup, not the code under test: unmounts everything under prefix,
   newest first, detaching only as a last resort.  */
static void
unmount_all_under (const char *prefix)
{
  static char points[64][PATH_MAX];
  size_t n = mounts_under (prefix, points, 64);

  for (size_t i = n; i > 0; i--)
    if (umount2 (points[i - 1], 0) < 0)
      umount2 (points[i - 1], MNT_DETACH);
}

static int
rm_one (const char *path, const struct stat *st, int type, struct FTW *ftw)
{
  if (type == FTW_DP)
    chmod (path, 0700);
  return remove (path);
}

static void
remove_below (const char *path)
{
  nftw (path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* ---- the seed ------------------------------------------------------------- */

static void
put_file (int dirfd, const char *name, const char *text, mode_t mode)
{
  int fd = openat (dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, text, strlen (text)), (ssize_t)strlen (text));
  ck_assert_int_eq (fchown (fd, SP_PROBE_UID, SP_PROBE_GID), 0);
  ck_assert_int_eq (fchmod (fd, mode), 0);
  close (fd);
}

static int
put_dir (int dirfd, const char *name)
{
  int fd;

  ck_assert_int_eq (mkdirat (dirfd, name, 0755), 0);
  fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (fchown (fd, SP_PROBE_UID, SP_PROBE_GID), 0);
  ck_assert_int_eq (fchmod (fd, 0755), 0);
  return fd;
}

/* A seed as staging leaves it: probe-owned, 0755/0644, a link that points
   out of the tree, then a read-only bind mount of itself.  */
static void
make_seed (void)
{
  int basefd, top, bin, sub, deeper;

  basefd = open (base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (basefd, 0);
  top = put_dir (basefd, "seed");
  put_file (top, "README", SEED_README, 0644);
  bin = put_dir (top, "bin");
  put_file (bin, "tool.sh", "#!/bin/sh\necho tool\n", 0755);
  sub = put_dir (top, "sub");
  deeper = put_dir (sub, "deeper");
  put_file (deeper, "file.txt", "deep\n", 0644);
  ck_assert_int_eq (symlinkat ("/etc/passwd", top, "passwd-link"), 0);
  ck_assert_int_eq (fchownat (top, "passwd-link", SP_PROBE_UID, SP_PROBE_GID, AT_SYMLINK_NOFOLLOW), 0);
  close (deeper);
  close (sub);
  close (bin);
  close (top);
  close (basefd);

  ck_assert_int_eq (mount (seed_path, seed_path, NULL, MS_BIND, NULL), 0);
  ck_assert_int_eq (mount (NULL, seed_path, NULL,
                           MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
                    0);
  seed_fd = open (seed_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ck_assert_int_ge (seed_fd, 0);
}

static void
digest_of (int dirfd, char out[SP_DIGEST_TEXT_SIZE])
{
  cleanup_error sp_error_t err = NULL;

  ck_assert_msg (sp_tree_digest (dirfd, out, &err) == 0, "%s", sp_error_message (err));
}

/* ---- fixtures --------------------------------------------------------------- */

/* Once per test case, in the parent: the seed.  */
static void
suite_setup (void)
{
  snprintf (base, sizeof (base), "/tmp/sp-workspace-XXXXXX");
  ck_assert_ptr_nonnull (mkdtemp (base));
  /* The probe uid walks down to its snapshot.  */
  ck_assert_int_eq (chmod (base, 0711), 0);
  snprintf (seed_path, sizeof (seed_path), "%s/seed", base);
  snprintf (work_path, sizeof (work_path), "%s/work", base);
  snprintf (run_path, sizeof (run_path), "%s/%s", work_path, RUN);
  make_seed ();
  digest_of (seed_fd, seed_digest);
  {
    cleanup_error sp_error_t err = NULL;
    cleanup_close int locks = open (base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    ck_assert_msg (sp_probe_identity_make (SP_PROBE_ID_BASE_DEFAULT, 0, locks, &probe, &err) == 0, "%s",
                   sp_error_message (err));
  }
}

static void
suite_teardown (void)
{
  sp_probe_identity_release (&probe);
  if (seed_fd >= 0)
    close (seed_fd);
  seed_fd = -1;
  unmount_all_under (base);
  remove_below (base);
}

/* Before and after each test (in the test's child): a fresh WORK/RUN with
   nothing mounted.  A failed test skips its teardown, so setup cleans too.  */
static void
clean_work (void)
{
  if (run_fd >= 0)
    close (run_fd);
  if (work_fd >= 0)
    close (work_fd);
  run_fd = work_fd = -1;
  unmount_all_under (work_path);
  remove_below (work_path);
}

static void
test_setup (void)
{
  clean_work ();
  ck_assert_int_eq (mkdir (work_path, 0711), 0);
  ck_assert_int_eq (mkdir (run_path, 0711), 0);
  ck_assert_int_eq (chmod (work_path, 0711), 0);
  ck_assert_int_eq (chmod (run_path, 0711), 0);
  work_fd = open (work_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  run_fd = open (run_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (work_fd, 0);
  ck_assert_int_ge (run_fd, 0);
}

static void
test_teardown (void)
{
  clean_work ();
}

/* ---- helpers ------------------------------------------------------------------ */

static void
create_ws (int dirfd, const char *dir_path, const char *name, struct sp_workspace *ws)
{
  cleanup_error sp_error_t err = NULL;
  int repo;

  ck_assert_msg (sp_workspace_create (dirfd, dir_path, name, &limits, ws, &err) == 0, "%s",
                 sp_error_message (err));
  /* What sp_bundle_write does for the snapshot's mount point.  */
  ck_assert_int_eq (mkdirat (ws->bundle_dirfd, "repo", 0700), 0);
  repo = openat (ws->bundle_dirfd, "repo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (repo, 0);
  ck_assert_int_eq (fchown (repo, PROBE_ID, PROBE_ID), 0);
  close (repo);
}

static void
snapshot_ws (struct sp_workspace *ws, enum sp_snapshot_mode mode)
{
  cleanup_error sp_error_t err = NULL;

  ck_assert_msg (sp_workspace_snapshot (ws, mode, seed_fd, &copy_limits, &probe, &err) == 0, "%s",
                 sp_error_message (err));
}

static void
destroy_ws (struct sp_workspace *ws)
{
  cleanup_error sp_error_t err = NULL;

  ck_assert_msg (sp_workspace_destroy (ws, &err) == 0, "%s", sp_error_message (err));
}

/* A workspace with a snapshot in the loop's mode (_i).  */
static void
ready_ws (struct sp_workspace *ws, const char *name, int mode)
{
  create_ws (run_fd, run_path, name, ws);
  snapshot_ws (ws, (enum sp_snapshot_mode)mode);
}

static void
repo_path (const struct sp_workspace *ws, const char *rel, char *out, size_t size)
{
  snprintf (out, size, "%s/repo%s%s", ws->bundle_path, rel[0] ? "/" : "", rel);
}

/* Runs fn(arg) in a child as the probe uid; returns its exit status.  */
static int
as_probe (int (*fn) (const void *), const void *arg)
{
  pid_t pid = fork ();
  int status;

  ck_assert_int_ge (pid, 0);
  if (pid == 0)
    {
      if (setgroups (0, NULL) < 0 || setresgid (PROBE_ID, PROBE_ID, PROBE_ID) < 0
          || setresuid (PROBE_ID, PROBE_ID, PROBE_ID) < 0)
        _exit (100);
      _exit (fn (arg));
    }
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  ck_assert (WIFEXITED (status));
  return WEXITSTATUS (status);
}

static int
write_text (const char *path, const char *text, int flags)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  ssize_t n;

  if (fd < 0)
    return -1;
  n = write (fd, text, strlen (text));
  close (fd);
  return n == (ssize_t)strlen (text) ? 0 : -1;
}

static bool
file_is (const char *path, const char *text)
{
  char buf[256];
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  ssize_t n;

  if (fd < 0)
    return false;
  n = read (fd, buf, sizeof (buf));
  close (fd);
  return n == (ssize_t)strlen (text) && memcmp (buf, text, (size_t)n) == 0;
}

/* ---- tests ------------------------------------------------------------------------ */

START_TEST (snapshot_mode_names_round_trip)
{
  enum sp_snapshot_mode mode;

  ck_assert_str_eq (sp_snapshot_mode_name (SP_SNAPSHOT_OVERLAY), "overlay");
  ck_assert_str_eq (sp_snapshot_mode_name (SP_SNAPSHOT_COPY), "copy");
  ck_assert_int_eq (sp_snapshot_mode_parse ("overlay", &mode), 0);
  ck_assert_int_eq (mode, SP_SNAPSHOT_OVERLAY);
  ck_assert_int_eq (sp_snapshot_mode_parse ("copy", &mode), 0);
  ck_assert_int_eq (mode, SP_SNAPSHOT_COPY);
  ck_assert_int_eq (sp_snapshot_mode_parse ("Copy", &mode), -1);
  ck_assert_int_eq (sp_snapshot_mode_parse ("", &mode), -1);
  ck_assert_int_eq (sp_snapshot_mode_parse (NULL, &mode), -1);
}
END_TEST

START_TEST (tmpfs_has_the_requested_limits_and_a_bundle_dir)
{
  struct sp_workspace ws;
  struct statvfs sv;
  struct stat st;
  char line[4096];

  create_ws (run_fd, run_path, "inv-1", &ws);
  ck_assert_int_eq (statvfs (ws.path, &sv), 0);
  ck_assert_uint_eq ((uint64_t)sv.f_blocks * sv.f_frsize, TMPFS_BYTES);
  ck_assert_uint_eq (sv.f_files, TMPFS_INODES);
  ck_assert (sv.f_flag & ST_NOSUID);
  ck_assert (sv.f_flag & ST_NODEV);
  ck_assert_int_eq (fstat (ws.dirfd, &st), 0);
  ck_assert_uint_eq (st.st_mode & 07777, 0711);
  ck_assert_uint_eq (st.st_uid, 0);
  ck_assert_int_eq (stat (ws.bundle_path, &st), 0);
  ck_assert (S_ISDIR (st.st_mode));
  ck_assert_uint_eq (st.st_mode & 07777, 0711);
  ck_assert (mountinfo_line (ws.path, line, sizeof (line)));
  ck_assert_msg (strstr (line, " - tmpfs ") != NULL, "%s", line);
  destroy_ws (&ws);
}
END_TEST

START_TEST (snapshot_shows_the_seed_and_keeps_links_as_links)
{
  struct sp_workspace ws;
  char path[PATH_MAX], target[64];
  struct stat st;
  ssize_t n;

  ready_ws (&ws, "inv-1", _i);
  repo_path (&ws, "README", path, sizeof (path));
  ck_assert (file_is (path, SEED_README));
  repo_path (&ws, "sub/deeper/file.txt", path, sizeof (path));
  ck_assert (file_is (path, "deep\n"));
  repo_path (&ws, "bin/tool.sh", path, sizeof (path));
  ck_assert_int_eq (stat (path, &st), 0);
  ck_assert (st.st_mode & S_IXUSR);
  ck_assert_uint_eq (st.st_uid, PROBE_ID);
  repo_path (&ws, "", path, sizeof (path));
  ck_assert_int_eq (stat (path, &st), 0);
  ck_assert_uint_eq (st.st_uid, PROBE_ID);
  ck_assert (st.st_mode & S_IWUSR);
  repo_path (&ws, "passwd-link", path, sizeof (path));
  ck_assert_int_eq (lstat (path, &st), 0);
  ck_assert (S_ISLNK (st.st_mode));
  n = readlink (path, target, sizeof (target) - 1);
  ck_assert_int_eq (n, (ssize_t)strlen ("/etc/passwd"));
  target[n] = '\0';
  ck_assert_str_eq (target, "/etc/passwd");
  destroy_ws (&ws);
}
END_TEST

static int
mutate_repo (const void *arg)
{
  const struct sp_workspace *ws = arg;
  char a[PATH_MAX], b[PATH_MAX];

  repo_path (ws, "README", a, sizeof (a));
  if (write_text (a, "changed\n", O_TRUNC) < 0)
    return 1;
  repo_path (ws, "new-file", a, sizeof (a));
  if (write_text (a, "new\n", O_EXCL) < 0)
    return 2;
  repo_path (ws, "bin/tool.sh", a, sizeof (a));
  if (unlink (a) < 0)
    return 3;
  repo_path (ws, "sub", a, sizeof (a));
  repo_path (ws, "sub-renamed", b, sizeof (b));
  if (rename (a, b) < 0)
    return 4;
  repo_path (ws, "sub-renamed/deeper/file.txt", a, sizeof (a));
  if (write_text (a, "deeper change\n", O_TRUNC) < 0)
    return 5;
  repo_path (ws, "passwd-link", a, sizeof (a));
  if (unlink (a) < 0)
    return 6;
  repo_path (ws, "newdir", a, sizeof (a));
  if (mkdir (a, 0755) < 0)
    return 7;
  repo_path (ws, "README", a, sizeof (a));
  repo_path (ws, "README.md", b, sizeof (b));
  if (rename (a, b) < 0)
    return 9;
  /* The snapshot's root itself is writable too.  */
  repo_path (ws, "", a, sizeof (a));
  if (access (a, W_OK) < 0)
    return 8;
  return 0;
}

START_TEST (probe_uid_writes_deletes_and_renames_and_the_seed_is_unchanged)
{
  struct sp_workspace ws;
  char path[PATH_MAX], after[SP_DIGEST_TEXT_SIZE];

  ready_ws (&ws, "inv-1", _i);
  ck_assert_int_eq (as_probe (mutate_repo, &ws), 0);
  repo_path (&ws, "README.md", path, sizeof (path));
  ck_assert (file_is (path, "changed\n"));
  repo_path (&ws, "sub", path, sizeof (path));
  ck_assert_int_eq (access (path, F_OK), -1);
  repo_path (&ws, "sub-renamed/deeper/file.txt", path, sizeof (path));
  ck_assert (file_is (path, "deeper change\n"));
  digest_of (seed_fd, after);
  ck_assert_str_eq (after, seed_digest);
  destroy_ws (&ws);
  digest_of (seed_fd, after);
  ck_assert_str_eq (after, seed_digest);
}
END_TEST

static int
fill_bytes (const void *arg)
{
  const struct sp_workspace *ws = arg;
  char path[PATH_MAX], chunk[65536];
  int fd;

  memset (chunk, 'z', sizeof (chunk));
  repo_path (ws, "big", path, sizeof (path));
  fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return 1;
  for (uint64_t done = 0; done < 2 * TMPFS_BYTES; done += sizeof (chunk))
    if (write (fd, chunk, sizeof (chunk)) < 0)
      return errno == ENOSPC ? 0 : 2;
  return 3; /* wrote twice the size: no limit */
}

START_TEST (filling_beyond_the_size_gives_enospc)
{
  struct sp_workspace ws;

  ready_ws (&ws, "inv-1", _i);
  ck_assert_int_eq (as_probe (fill_bytes, &ws), 0);
  destroy_ws (&ws);
}
END_TEST

static int
fill_inodes (const void *arg)
{
  const struct sp_workspace *ws = arg;
  char path[PATH_MAX];

  for (int i = 0; i < 2 * TMPFS_INODES; i++)
    {
      char rel[32];
      int fd;

      snprintf (rel, sizeof (rel), "f%d", i);
      repo_path (ws, rel, path, sizeof (path));
      fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0)
        return errno == ENOSPC ? 0 : 1;
      close (fd);
    }
  return 2; /* twice the inode limit: no limit */
}

START_TEST (creating_beyond_the_inode_limit_gives_enospc)
{
  struct sp_workspace ws;

  ready_ws (&ws, "inv-1", _i);
  ck_assert_int_eq (as_probe (fill_inodes, &ws), 0);
  destroy_ws (&ws);
}
END_TEST

START_TEST (overlay_mount_options_name_no_host_path)
{
  struct sp_workspace ws;
  char repo[PATH_MAX], line[4096];
  const char *opts;

  ready_ws (&ws, "inv-1", SP_SNAPSHOT_OVERLAY);
  repo_path (&ws, "", repo, sizeof (repo));
  ck_assert (mountinfo_line (repo, line, sizeof (line)));
  /* The fields after " - " are what the sandbox's mountinfo shows of the
     source and the options, whatever its own mount point is called.  */
  opts = strstr (line, " - ");
  ck_assert_ptr_nonnull (opts);
  fprintf (stderr, "# overlay: %s", opts + 3);
  ck_assert_msg (strncmp (opts, " - overlay ", 11) == 0, "%s", line);
  ck_assert_msg (strstr (opts, base) == NULL, "%s", line);
  ck_assert_msg (strstr (opts, "/tmp") == NULL, "%s", line);
  ck_assert_msg (strstr (opts, "lowerdir=/proc/self/fd/") != NULL, "%s", line);
  ck_assert_msg (strstr (opts, "nosuid") != NULL || strstr (line, "nosuid") != NULL, "%s", line);
  destroy_ws (&ws);
}
END_TEST

START_TEST (destroy_leaves_no_mount_and_no_directory_and_may_repeat)
{
  struct sp_workspace ws;
  struct stat st;

  ready_ws (&ws, "inv-1", _i);
  ck_assert_uint_ge (mounts_under (run_path, NULL, 0), 1);
  destroy_ws (&ws);
  ck_assert_uint_eq (mounts_under (run_path, NULL, 0), 0);
  ck_assert_int_eq (fstatat (run_fd, "inv-1", &st, AT_SYMLINK_NOFOLLOW), -1);
  ck_assert_int_eq (errno, ENOENT);
  ck_assert_int_eq (ws.dirfd, -1);
  ck_assert_int_eq (ws.bundle_dirfd, -1);
  ck_assert_ptr_null (ws.path);
  destroy_ws (&ws);
}
END_TEST

/* Under gvisor the sandbox's /tmp is a tmpfs the proxy mounts on bundle/tmp
   (sp_bundle_mount_tmp): destroy unmounts it before the workspace.  */
START_TEST (destroy_unmounts_the_sandboxs_tmp_too)
{
  struct sp_workspace ws;
  char tmp[PATH_MAX];
  struct stat st;

  ready_ws (&ws, "inv-1", _i);
  ck_assert_int_eq (mkdirat (ws.bundle_dirfd, SP_BUNDLE_TMP, 0755), 0);
  snprintf (tmp, sizeof (tmp), "%s/%s", ws.bundle_path, SP_BUNDLE_TMP);
  ck_assert_int_eq (mount ("sealed-probe-tmp", tmp, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m"), 0);
  ck_assert_uint_ge (mounts_under (run_path, NULL, 0), 2);
  destroy_ws (&ws);
  ck_assert_uint_eq (mounts_under (run_path, NULL, 0), 0);
  ck_assert_int_eq (fstatat (run_fd, "inv-1", &st, AT_SYMLINK_NOFOLLOW), -1);
}
END_TEST

/* Under docker the script is a read-only bind of itself (docker.c's
   seal_script): destroy unmounts it before the workspace, and the sweep of
   a crashed run does too.  */
static void
seal_script (struct sp_workspace *ws)
{
  char script[PATH_MAX];

  put_file (ws->bundle_dirfd, SP_BUNDLE_SCRIPT, "print(1)\n", 0444);
  snprintf (script, sizeof (script), "%s/%s", ws->bundle_path, SP_BUNDLE_SCRIPT);
  ck_assert_int_eq (mount (script, script, NULL, MS_BIND, NULL), 0);
  ck_assert_int_eq (mount (NULL, script, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOEXEC, NULL), 0);
}

START_TEST (destroy_unmounts_a_sealed_script_too)
{
  struct sp_workspace ws;
  struct stat st;

  ready_ws (&ws, "inv-1", _i);
  seal_script (&ws);
  ck_assert_uint_ge (mounts_under (run_path, NULL, 0), 2);
  destroy_ws (&ws);
  ck_assert_uint_eq (mounts_under (run_path, NULL, 0), 0);
  ck_assert_int_eq (fstatat (run_fd, "inv-1", &st, AT_SYMLINK_NOFOLLOW), -1);
}
END_TEST

START_TEST (remove_runs_unmounts_a_sealed_script_a_crash_left)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_workspace old;
  char old_path[256];
  int old_fd;
  struct stat st;

  snprintf (old_path, sizeof (old_path), "%s/crashed-run", work_path);
  ck_assert_int_eq (mkdir (old_path, 0711), 0);
  old_fd = open (old_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (old_fd, 0);
  create_ws (old_fd, old_path, "inv-1", &old);
  seal_script (&old);
  close (old.dirfd);
  close (old.bundle_dirfd);
  close (old_fd);
  ck_assert_uint_ge (mounts_under (old_path, NULL, 0), 2);
  ck_assert_msg (sp_workspace_remove_runs (work_fd, NULL, NULL, &err) == 0, "%s", sp_error_message (err));
  ck_assert_uint_eq (mounts_under (old_path, NULL, 0), 0);
  ck_assert_int_eq (fstatat (work_fd, "crashed-run", &st, AT_SYMLINK_NOFOLLOW), -1);
  free (old.name);
  free (old.path);
  free (old.bundle_path);
}
END_TEST

START_TEST (destroy_reports_a_busy_mount_and_can_finish_later)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_workspace ws;
  char path[PATH_MAX];
  int busy;

  ready_ws (&ws, "inv-1", _i);
  /* An open file in the snapshot keeps the mounts busy.  */
  repo_path (&ws, "README", path, sizeof (path));
  busy = open (path, O_RDONLY | O_CLOEXEC);
  ck_assert_int_ge (busy, 0);
  ck_assert_int_eq (sp_workspace_destroy (&ws, &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), "unmount") != NULL, "%s", sp_error_message (err));
  ck_assert_msg (strstr (sp_error_message (err), "busy") != NULL, "%s", sp_error_message (err));
  /* No silent detach: the mount is still there.  */
  ck_assert_uint_ge (mounts_under (run_path, NULL, 0), 1);
  close (busy);
  destroy_ws (&ws);
  ck_assert_uint_eq (mounts_under (run_path, NULL, 0), 0);
}
END_TEST

START_TEST (failed_create_leaves_nothing_and_destroys_cleanly)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_workspace ws;
  struct stat st;
  int fd;

  /* Names that are not ids never reach a path.  */
  ck_assert_int_eq (sp_workspace_create (run_fd, run_path, "../escape", &limits, &ws, &err), -1);
  sp_error_release (&err);
  destroy_ws (&ws);
  ck_assert_int_eq (sp_workspace_create (run_fd, run_path, "", &limits, &ws, &err), -1);
  sp_error_release (&err);
  destroy_ws (&ws);
  /* A path that does not name the run directory.  */
  ck_assert_int_eq (sp_workspace_create (run_fd, work_path, "inv-1", &limits, &ws, &err), -1);
  sp_error_release (&err);
  destroy_ws (&ws);
  ck_assert_int_eq (fstatat (run_fd, "inv-1", &st, AT_SYMLINK_NOFOLLOW), -1);
  /* An entry already there is refused and left alone.  */
  ck_assert_int_eq (mkdirat (run_fd, "inv-2", 0700), 0);
  fd = openat (run_fd, "inv-2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  put_file (fd, "keep", "mine", 0600);
  close (fd);
  ck_assert_int_eq (sp_workspace_create (run_fd, run_path, "inv-2", &limits, &ws, &err), -1);
  sp_error_release (&err);
  destroy_ws (&ws);
  ck_assert_int_eq (fstatat (run_fd, "inv-2/keep", &st, AT_SYMLINK_NOFOLLOW), 0);
  /* A mount that fails after the mkdir: an option tmpfs rejects.  */
  {
    const struct sp_workspace_limits bad = { .tmpfs_bytes = TMPFS_BYTES, .tmpfs_inodes = UINT64_MAX };

    ck_assert_int_eq (sp_workspace_create (run_fd, run_path, "inv-3", &bad, &ws, &err), -1);
    ck_assert_msg (strstr (sp_error_message (err), "mount") != NULL, "%s", sp_error_message (err));
    sp_error_release (&err);
    destroy_ws (&ws);
    ck_assert_int_eq (fstatat (run_fd, "inv-3", &st, AT_SYMLINK_NOFOLLOW), -1);
    ck_assert_int_eq (errno, ENOENT);
  }
  ck_assert_uint_eq (mounts_under (run_path, NULL, 0), 0);
}
END_TEST

/* A seed beside the good one with one entry that copy mode must refuse.  */
enum bad_kind
{
  BAD_FIFO,
  BAD_SOCKET,
  BAD_DEVICE,
  BAD_HARDLINK,
  BAD_KINDS
};

START_TEST (copy_mode_refuses_special_entries_and_stays_destroyable)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_workspace ws;
  char bad_path[256];
  int bad_fd, ret;

  snprintf (bad_path, sizeof (bad_path), "%s/bad-seed", work_path);
  ck_assert_int_eq (mkdir (bad_path, 0755), 0);
  bad_fd = open (bad_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (bad_fd, 0);
  put_file (bad_fd, "ok.txt", "fine\n", 0644);
  switch (_i)
    {
    case BAD_FIFO:
      ck_assert_int_eq (mkfifoat (bad_fd, "entry", 0644), 0);
      break;
    case BAD_SOCKET:
      {
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        int s = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge (s, 0);
        snprintf (addr.sun_path, sizeof (addr.sun_path), "%.90s/entry", bad_path);
        ck_assert_int_eq (bind (s, (struct sockaddr *)&addr, sizeof (addr)), 0);
        close (s);
        break;
      }
    case BAD_DEVICE:
      ck_assert_int_eq (mknodat (bad_fd, "entry", S_IFCHR | 0644, makedev (1, 5)), 0);
      break;
    default:
      /* Its other name lies outside the seed.  */
      put_file (bad_fd, "entry", "shared\n", 0644);
      ck_assert_int_eq (linkat (bad_fd, "entry", work_fd, "outside", 0), 0);
      break;
    }
  create_ws (run_fd, run_path, "inv-1", &ws);
  ret = sp_workspace_snapshot (&ws, SP_SNAPSHOT_COPY, bad_fd, &copy_limits, &probe, &err);
  ck_assert_int_eq (ret, -1);
  ck_assert_msg (strstr (sp_error_message (err), "entry") != NULL, "%s", sp_error_message (err));
  close (bad_fd);
  destroy_ws (&ws);
  ck_assert_uint_eq (mounts_under (run_path, NULL, 0), 0);
}
END_TEST

struct writer
{
  const struct sp_workspace *ws;
  const char *text;
  int go; /* read end: the start signal */
};

static int
write_own_bytes (const void *arg)
{
  const struct writer *w = arg;
  char path[PATH_MAX], c;

  repo_path (w->ws, "README", path, sizeof (path));
  if (read (w->go, &c, 1) != 1)
    return 1;
  for (int i = 0; i < 200; i++)
    {
      if (write_text (path, w->text, O_TRUNC) < 0)
        return 2;
      if (!file_is (path, w->text))
        return 3;
    }
  return 0;
}

START_TEST (two_overlays_of_one_seed_do_not_see_each_others_writes)
{
  struct sp_workspace a, b;
  struct writer wa, wb;
  char path[PATH_MAX], after[SP_DIGEST_TEXT_SIZE];
  int go[2];
  pid_t pa, pb;
  int sa, sb;

  ready_ws (&a, "inv-a", SP_SNAPSHOT_OVERLAY);
  ready_ws (&b, "inv-b", SP_SNAPSHOT_OVERLAY);
  ck_assert_int_eq (pipe2 (go, O_CLOEXEC), 0);
  wa = (struct writer){ .ws = &a, .text = "written by a\n", .go = go[0] };
  wb = (struct writer){ .ws = &b, .text = "b, b, b\n", .go = go[0] };
  /* Both children start together on one signal; as_probe waits, so fork
     them by hand here.  */
  pa = fork ();
  if (pa == 0)
    {
      if (setresgid (PROBE_ID, PROBE_ID, PROBE_ID) < 0 || setresuid (PROBE_ID, PROBE_ID, PROBE_ID) < 0)
        _exit (100);
      _exit (write_own_bytes (&wa));
    }
  pb = fork ();
  if (pb == 0)
    {
      if (setresgid (PROBE_ID, PROBE_ID, PROBE_ID) < 0 || setresuid (PROBE_ID, PROBE_ID, PROBE_ID) < 0)
        _exit (100);
      _exit (write_own_bytes (&wb));
    }
  ck_assert_int_gt (pa, 0);
  ck_assert_int_gt (pb, 0);
  ck_assert_int_eq (write (go[1], "GG", 2), 2);
  ck_assert_int_eq (waitpid (pa, &sa, 0), pa);
  ck_assert_int_eq (waitpid (pb, &sb, 0), pb);
  close (go[0]);
  close (go[1]);
  ck_assert (WIFEXITED (sa) && WEXITSTATUS (sa) == 0);
  ck_assert (WIFEXITED (sb) && WEXITSTATUS (sb) == 0);
  repo_path (&a, "README", path, sizeof (path));
  ck_assert (file_is (path, "written by a\n"));
  repo_path (&b, "README", path, sizeof (path));
  ck_assert (file_is (path, "b, b, b\n"));
  digest_of (seed_fd, after);
  ck_assert_str_eq (after, seed_digest);
  destroy_ws (&a);
  destroy_ws (&b);
}
END_TEST

/* The entry of removed for run, or NULL.  */
static const struct sp_workspace_run_removed *
removed_run (const struct sp_workspace_removed *removed, const char *run)
{
  for (size_t i = 0; i < removed->n; i++)
    if (strcmp (removed->runs[i].run, run) == 0)
      return &removed->runs[i];
  return NULL;
}

START_TEST (remove_runs_removes_other_runs_with_their_mounts_and_keeps_keep_run)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_workspace_removed struct sp_workspace_removed removed = { 0 };
  const struct sp_workspace_run_removed *old;
  struct sp_workspace old1, old2, keep;
  unsigned old_mounts;
  char old_path[256], keep_path[256], repo[PATH_MAX];
  int old_fd, keep_fd;
  struct stat st;

  snprintf (old_path, sizeof (old_path), "%s/old-run", work_path);
  snprintf (keep_path, sizeof (keep_path), "%s/keep-run", work_path);
  ck_assert_int_eq (mkdir (old_path, 0711), 0);
  ck_assert_int_eq (mkdir (keep_path, 0711), 0);
  old_fd = open (old_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  keep_fd = open (keep_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (old_fd, 0);
  ck_assert_int_ge (keep_fd, 0);
  create_ws (old_fd, old_path, "inv-1", &old1);
  snapshot_ws (&old1, SP_SNAPSHOT_OVERLAY);
  create_ws (old_fd, old_path, "inv-2", &old2);
  snapshot_ws (&old2, SP_SNAPSHOT_COPY);
  create_ws (keep_fd, keep_path, "inv-1", &keep);
  snapshot_ws (&keep, SP_SNAPSHOT_OVERLAY);
  /* A crashed proxy: its workspaces' fds are gone, the mounts stay.  */
  close (old1.dirfd);
  close (old1.bundle_dirfd);
  close (old2.dirfd);
  close (old2.bundle_dirfd);
  close (old_fd);
  /* Not a run id: not the proxy's, left alone.  */
  ck_assert_int_eq (mkdir (run_path, 0700) == 0 || errno == EEXIST, 1);
  {
    char other[256];

    snprintf (other, sizeof (other), "%s/Not_Ours", work_path);
    ck_assert_int_eq (mkdir (other, 0700), 0);
  }
  old_mounts = mounts_under (old_path, NULL, 0);
  ck_assert_uint_ge (old_mounts, 3);

  ck_assert_msg (sp_workspace_remove_runs (work_fd, "keep-run", &removed, &err) == 0, "%s",
                 sp_error_message (err));
  /* What went is returned, run by run, for serve to say.  */
  old = removed_run (&removed, "old-run");
  ck_assert_ptr_nonnull (old);
  ck_assert_uint_eq (old->entries, 2);
  ck_assert_uint_eq (old->mounts, old_mounts);
  ck_assert_ptr_nonnull (removed_run (&removed, RUN));
  ck_assert_ptr_null (removed_run (&removed, "keep-run"));
  ck_assert_ptr_null (removed_run (&removed, "Not_Ours"));
  ck_assert_uint_eq (removed.n, 2);
  ck_assert_uint_eq (mounts_under (old_path, NULL, 0), 0);
  ck_assert_int_eq (fstatat (work_fd, "old-run", &st, AT_SYMLINK_NOFOLLOW), -1);
  ck_assert_int_eq (fstatat (work_fd, RUN, &st, AT_SYMLINK_NOFOLLOW), -1);
  ck_assert_int_eq (fstatat (work_fd, "Not_Ours", &st, AT_SYMLINK_NOFOLLOW), 0);
  /* The kept run is untouched and still mounted.  */
  ck_assert_uint_eq (mounts_under (keep_path, NULL, 0), 2);
  repo_path (&keep, "README", repo, sizeof (repo));
  ck_assert (file_is (repo, SEED_README));
  destroy_ws (&keep);
  close (keep_fd);
  /* NULL keeps nothing.  */
  ck_assert_msg (sp_workspace_remove_runs (work_fd, NULL, NULL, &err) == 0, "%s", sp_error_message (err));
  ck_assert_int_eq (fstatat (work_fd, "keep-run", &st, AT_SYMLINK_NOFOLLOW), -1);
  free (old1.name);
  free (old1.path);
  free (old1.bundle_path);
  free (old2.name);
  free (old2.path);
  free (old2.bundle_path);
}
END_TEST

/* A lock file a killed proxy left (nobody holds it) goes; one a live proxy
   holds, and anything that is no id, stays; what went is returned, sorted.  */
START_TEST (probe_id_sweep_removes_only_the_lock_files_nobody_holds)
{
  static const char *const stay[] = { "notanid", "12abc", "4294967296", "" };
  cleanup_error sp_error_t err = NULL;
  cleanup_free uint32_t *ids = NULL;
  cleanup_close int dir = -1, held = -1;
  char path[256];
  struct stat st;
  size_t n = 99;

  snprintf (path, sizeof (path), "%s/ids", base);
  ck_assert_int_eq (mkdir (path, 0700), 0);
  dir = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (dir, 0);
  for (int i = 0; stay[i][0] != '\0'; i++)
    close (openat (dir, stay[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  close (openat (dir, "2100000105", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  close (openat (dir, "2100000100", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  held = openat (dir, "2100000101", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_ge (held, 0);
  ck_assert_int_eq (flock (held, LOCK_EX), 0);

  ck_assert_msg (sp_probe_identity_sweep (dir, &ids, &n, &err) == 0, "%s", sp_error_message (err));
  ck_assert_uint_eq (n, 2);
  ck_assert_uint_eq (ids[0], 2100000100);
  ck_assert_uint_eq (ids[1], 2100000105);
  ck_assert_int_eq (fstatat (dir, "2100000100", &st, 0), -1);
  ck_assert_int_eq (fstatat (dir, "2100000105", &st, 0), -1);
  ck_assert_int_eq (fstatat (dir, "2100000101", &st, 0), 0);
  for (int i = 0; stay[i][0] != '\0'; i++)
    ck_assert_msg (fstatat (dir, stay[i], &st, 0) == 0, "%s", stay[i]);
  /* Nothing left to sweep: nothing said.  */
  free (ids);
  ids = NULL;
  ck_assert_msg (sp_probe_identity_sweep (dir, &ids, &n, &err) == 0, "%s", sp_error_message (err));
  ck_assert_uint_eq (n, 0);
  ck_assert_ptr_null (ids);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("workspace");
  TCase *tc = tcase_create ("workspace");

  tcase_add_unchecked_fixture (tc, suite_setup, suite_teardown);
  tcase_add_checked_fixture (tc, test_setup, test_teardown);
  tcase_set_timeout (tc, 20);
  tcase_add_test (tc, snapshot_mode_names_round_trip);
  tcase_add_test (tc, tmpfs_has_the_requested_limits_and_a_bundle_dir);
  /* _i is the snapshot mode: overlay (0) and copy (1).  */
  tcase_add_loop_test (tc, snapshot_shows_the_seed_and_keeps_links_as_links, 0, 2);
  tcase_add_loop_test (tc, probe_uid_writes_deletes_and_renames_and_the_seed_is_unchanged, 0, 2);
  tcase_add_loop_test (tc, filling_beyond_the_size_gives_enospc, 0, 2);
  tcase_add_loop_test (tc, creating_beyond_the_inode_limit_gives_enospc, 0, 2);
  tcase_add_test (tc, overlay_mount_options_name_no_host_path);
  tcase_add_loop_test (tc, destroy_leaves_no_mount_and_no_directory_and_may_repeat, 0, 2);
  tcase_add_loop_test (tc, destroy_unmounts_the_sandboxs_tmp_too, 0, 2);
  tcase_add_loop_test (tc, destroy_unmounts_a_sealed_script_too, 0, 2);
  tcase_add_loop_test (tc, destroy_reports_a_busy_mount_and_can_finish_later, 0, 2);
  tcase_add_test (tc, failed_create_leaves_nothing_and_destroys_cleanly);
  tcase_add_loop_test (tc, copy_mode_refuses_special_entries_and_stays_destroyable, 0, BAD_KINDS);
  tcase_add_test (tc, two_overlays_of_one_seed_do_not_see_each_others_writes);
  tcase_add_test (tc, remove_runs_removes_other_runs_with_their_mounts_and_keeps_keep_run);
  tcase_add_test (tc, remove_runs_unmounts_a_sealed_script_a_crash_left);
  tcase_add_test (tc, probe_id_sweep_removes_only_the_lock_files_nobody_holds);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN_AS_ROOT (make_suite, "tmpfs and overlay mounts, and the probe uid")
