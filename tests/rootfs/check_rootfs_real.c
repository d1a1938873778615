/* A real build from the pinned lock (rootfs/rootfs.lock) and the .debs that
   scripts/rootfs-fetch put in $SP_DEB_CACHE (default
   /var/cache/sealed-probe/debs), through the sealed-probe-rootfs binary.
   Missing .debs fail every test, saying to run scripts/rootfs-fetch: this
   never skips silently.  Needs root.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/fileio.h"

#include "rootfs/lock.h"
#include "rootfs_fixture.h"
#include "sp_check.h"
#include "tree/remove.h"
#include "tree/walk.h"

extern char **environ;

static char work[64];
static char out[128];
static char root[160];
static char *build_error;
static char recorded[SP_DIGEST_TEXT_SIZE + 1];

static char *
read_small (const char *path)
{
  cleanup_error sp_error_t err = NULL;
  char *text = NULL;
  size_t len;

  if (sp_read_path_capped (path, 64 * 1024, &text, &len, &err) < 0)
    return NULL;
  return text;
}

/* Runs once, in check's parent process, without assertions: a failure is
   recorded in build_error and every test reports it.  */
static void
build_once (void)
{
  const char *bin = getenv ("SP_ROOTFS_BIN");
  const char *lock = getenv ("SP_ROOTFS_LOCK");
  char stdout_path[160], stderr_path[160], digest_path[160];
  posix_spawn_file_actions_t actions;
  struct timespec t0, t1;
  int status = -1;
  pid_t pid;

  if (bin == NULL || lock == NULL)
    {
      build_error
          = strdup ("SP_ROOTFS_BIN and SP_ROOTFS_LOCK must be set (tests/rootfs/meson.build sets them)");
      return;
    }
  build_error = fx_missing_deb (lock);
  if (build_error)
    return;

  strcpy (work, "/tmp/sp-rootfs-real-XXXXXX");
  if (mkdtemp (work) == NULL)
    {
      build_error = strdup ("mkdtemp failed");
      return;
    }
  snprintf (out, sizeof (out), "%s/rootfs", work);
  snprintf (root, sizeof (root), "%s/root", out);
  snprintf (stdout_path, sizeof (stdout_path), "%s/build.stdout", work);
  snprintf (stderr_path, sizeof (stderr_path), "%s/build.stderr", work);
  snprintf (digest_path, sizeof (digest_path), "%s/digest", out);

  {
    char *argv[] = { (char *)bin, "build", "--lock", (char *)lock, "--debs", (char *)fx_deb_cache (),
                     "--out",     out,     NULL };
    posix_spawn_file_actions_init (&actions);
    posix_spawn_file_actions_addopen (&actions, STDOUT_FILENO, stdout_path, O_WRONLY | O_CREAT | O_TRUNC,
                                      0644);
    posix_spawn_file_actions_addopen (&actions, STDERR_FILENO, stderr_path, O_WRONLY | O_CREAT | O_TRUNC,
                                      0644);
    clock_gettime (CLOCK_MONOTONIC, &t0);
    if (posix_spawn (&pid, bin, &actions, NULL, argv, environ) == 0)
      waitpid (pid, &status, 0);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    posix_spawn_file_actions_destroy (&actions);
  }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      cleanup_free char *msg = read_small (stderr_path);
      if (asprintf (&build_error, "sealed-probe-rootfs build failed: %s", msg ? msg : "(no stderr)") < 0)
        build_error = NULL;
      return;
    }
  {
    cleanup_free char *text = read_small (digest_path);
    cleanup_free char *printed = read_small (stdout_path);
    if (text == NULL || strlen (text) != SP_DIGEST_TEXT_SIZE || printed == NULL
        || strcmp (text, printed) != 0)
      {
        build_error = strdup ("the build's DIR/digest is missing or differs from what it printed");
        return;
      }
    strcpy (recorded, text);
  }
  printf ("# real build from the pinned lock: %.2f s\n",
          (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  fflush (stdout);
}

static void
remove_once (void)
{
  sp_error_t err = NULL;

  if (work[0] && sp_tree_remove_at (AT_FDCWD, work, &err) < 0)
    {
      fprintf (stderr, "# %s\n", sp_error_message (err));
      sp_error_release (&err);
    }
  free (build_error);
}

static void
require_build (void)
{
  ck_assert_msg (build_error == NULL, "%s", build_error);
}

/* Every path in the tree whose last component matches one of patterns.  */
struct finder
{
  const char *const *patterns;
  char found[4096];
};

static int
find_names (int dirfd, const char *name, const char *path, const struct stat *st,
            enum sp_tree_walk_event event, void *ctx, sp_error_t *err)
{
  struct finder *f = ctx;

  if (event != SP_TREE_WALK_ENTRY)
    return 0;
  for (const char *const *p = f->patterns; *p; p++)
    if (fnmatch (*p, name, 0) == 0 && strlen (f->found) + strlen (path) + 2 < sizeof (f->found))
      {
        strcat (f->found, " ");
        strcat (f->found, path);
      }
  return 0;
}

static const char *
find_in_root (const char *const *patterns, struct finder *f)
{
  cleanup_close int fd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_ge (fd, 0);
  f->patterns = patterns;
  f->found[0] = '\0';
  if (sp_tree_walk (fd, find_names, f, &err) < 0)
    ck_abort_msg ("walk: %s", sp_error_message (err));
  return f->found;
}

START_TEST (real_build_succeeds_from_the_fetched_pinned_debs)
{
  require_build ();
  ck_assert_int_eq (strncmp (recorded, "sha256:", 7), 0);
}
END_TEST

START_TEST (real_rootfs_has_python3_11)
{
  char path[256];
  char target[64];
  struct stat st;
  ssize_t n;

  require_build ();
  snprintf (path, sizeof (path), "%s/usr/bin/python3.11", root);
  ck_assert_int_eq (lstat (path, &st), 0);
  ck_assert (S_ISREG (st.st_mode));
  ck_assert_uint_eq (st.st_mode & 07777, 0555);
  snprintf (path, sizeof (path), "%s/usr/bin/python3", root);
  n = readlink (path, target, sizeof (target) - 1);
  ck_assert_int_gt (n, 0);
  target[n] = '\0';
  ck_assert_str_eq (target, "python3.11");
  snprintf (path, sizeof (path), "%s/usr/lib/python3.11/os.py", root);
  ck_assert_int_eq (lstat (path, &st), 0);
}
END_TEST

START_TEST (real_rootfs_has_no_shell_anywhere)
{
  static const char *const shells[]
      = { "sh", "bash", "dash", "rbash", "ash", "zsh", "ksh*", "busybox", NULL };
  struct finder f;

  require_build ();
  ck_assert_msg (find_in_root (shells, &f)[0] == '\0', "shells in the rootfs:%s", f.found);
}
END_TEST

START_TEST (real_rootfs_has_no_pip_or_ensurepip)
{
  static const char *const pip[] = { "pip", "pip3*", "ensurepip", "*.whl", "pip-*", NULL };
  struct finder f;

  require_build ();
  ck_assert_msg (find_in_root (pip, &f)[0] == '\0', "pip in the rootfs:%s", f.found);
}
END_TEST

START_TEST (real_rootfs_has_no_compiler_perl_dpkg_or_tar)
{
  static const char *const tools[]
      = { "gcc*", "cc", "c++", "g++*", "clang*", "perl*", "dpkg*", "apt*", "tar", NULL };
  struct finder f;

  require_build ();
  ck_assert_msg (find_in_root (tools, &f)[0] == '\0', "found:%s", f.found);
}
END_TEST

static int
find_special (int dirfd, const char *name, const char *path, const struct stat *st,
              enum sp_tree_walk_event event, void *ctx, sp_error_t *err)
{
  struct finder *f = ctx;

  /* tmp is the one exception, exactly 1777 (skeleton.h): checked below.  */
  if (event == SP_TREE_WALK_ENTRY && !S_ISLNK (st->st_mode) && strcmp (path, "tmp") != 0
      && (st->st_mode & (S_ISUID | S_ISGID | 0222))
      && strlen (f->found) + strlen (path) + 2 < sizeof (f->found))
    {
      strcat (f->found, " ");
      strcat (f->found, path);
    }
  return 0;
}

START_TEST (real_rootfs_has_no_setuid_setgid_or_writable_entry)
{
  cleanup_close int fd = -1;
  cleanup_error sp_error_t err = NULL;
  struct finder f = { 0 };

  require_build ();
  fd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (sp_tree_walk (fd, find_special, &f, &err), 0);
  ck_assert_msg (f.found[0] == '\0', "setuid, setgid or writable:%s", f.found);
}
END_TEST

START_TEST (real_rootfs_has_no_docs)
{
  static const char *const gone[] = { "usr/share/doc", "usr/share/man", "usr/share",
                                      "usr/lib/python3.11/test", "usr/lib/python3.11/venv" };
  char path[256];
  struct stat st;

  require_build ();
  for (size_t i = 0; i < sizeof (gone) / sizeof (gone[0]); i++)
    {
      snprintf (path, sizeof (path), "%s/%s", root, gone[i]);
      ck_assert_msg (lstat (path, &st) < 0, "`%s` is in the rootfs", gone[i]);
    }
}
END_TEST

START_TEST (real_verify_prints_the_digest_build_recorded)
{
  cleanup_free char *vout = NULL, *verr = NULL;
  char *argv[] = { getenv ("SP_ROOTFS_BIN"), "verify", out, NULL };

  require_build ();
  ck_assert_int_eq (fx_run (argv, &vout, &verr), 0);
  ck_assert_str_eq (verr, "");
  ck_assert_str_eq (vout, recorded);
}
END_TEST

/* The rootfs runs the stdlib as the sandbox will: chrooted, as nobody, with
   python3 -I -S -B.  */
START_TEST (real_rootfs_runs_python_with_its_stdlib)
{
  static const char script[]
      = "import ssl, sqlite3, json, decimal, ctypes, lzma, bz2, zlib, hashlib, uuid, dbm, curses, readline, "
        "mimetypes, xml.etree.ElementTree, asyncio, multiprocessing, zoneinfo, tomllib, threading\n"
        "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "assert mimetypes.guess_type('a.json')[0] == 'application/json'\n"
        "print('ok', sqlite3.sqlite_version, hashlib.sha256(b'').hexdigest()[:8])\n";
  int pipefd[2];
  char buf[256] = { 0 };
  size_t used = 0;
  int status;
  pid_t pid;

  require_build ();
  ck_assert_int_eq (pipe2 (pipefd, O_CLOEXEC), 0);
  pid = fork ();
  ck_assert_int_ge (pid, 0);
  if (pid == 0)
    {
      char *argv[] = { "python3", "-I", "-S", "-B", "-c", (char *)script, NULL };
      char *envp[] = { "PATH=/usr/bin", "LC_ALL=C.UTF-8", NULL };
      dup2 (pipefd[1], STDOUT_FILENO);
      dup2 (pipefd[1], STDERR_FILENO);
      if (chroot (root) < 0 || chdir ("/") < 0 || setgroups (0, NULL) < 0 || setgid (65534) < 0
          || setuid (65534) < 0)
        _exit (126);
      execve ("/usr/bin/python3", argv, envp);
      _exit (127);
    }
  close (pipefd[1]);
  for (;;)
    {
      ssize_t n = read (pipefd[0], buf + used, sizeof (buf) - 1 - used);
      if (n <= 0)
        break;
      used += (size_t)n;
    }
  close (pipefd[0]);
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "python3 in the rootfs: status %d: %s",
                 status, buf);
  ck_assert_msg (strncmp (buf, "ok 3.", 5) == 0, "python3 printed: %s", buf);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("rootfs_real");
  TCase *tc = tcase_create ("real");

  tcase_add_unchecked_fixture (tc, build_once, remove_once);
  tcase_add_test (tc, real_build_succeeds_from_the_fetched_pinned_debs);
  tcase_add_test (tc, real_rootfs_has_python3_11);
  tcase_add_test (tc, real_rootfs_has_no_shell_anywhere);
  tcase_add_test (tc, real_rootfs_has_no_pip_or_ensurepip);
  tcase_add_test (tc, real_rootfs_has_no_compiler_perl_dpkg_or_tar);
  tcase_add_test (tc, real_rootfs_has_no_setuid_setgid_or_writable_entry);
  tcase_add_test (tc, real_rootfs_has_no_docs);
  tcase_add_test (tc, real_verify_prints_the_digest_build_recorded);
  tcase_add_test (tc, real_rootfs_runs_python_with_its_stdlib);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN_AS_ROOT (make_suite, "the builder chowns every entry to 0:0, and the python check chroots")
