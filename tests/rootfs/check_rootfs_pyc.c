/* The precompiled standard library (docs/rootfs.md), from real builds of the
   pinned lock (rootfs/rootfs.lock and the .debs in $SP_DEB_CACHE, default
   /var/cache/sealed-probe/debs) through the sealed-probe-rootfs binary: two
   builds give one digest, every kept stdlib module has an unchecked-hash
   pyc, the sandbox's python reads them and writes none, an edited source
   under its pyc is not what runs (which is why the digest covers the pycs),
   a flipped pyc byte fails verify, and a module that does not compile fails
   the build.  Missing .debs fail every test, saying to run
   scripts/rootfs-fetch.  Needs root.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "rootfs/verify.h"
#include "tree/normalize.h"
#include "tree/remove.h"
#include "tree/walk.h"

#include "rootfs/build.h"
#include "rootfs/lock.h"
#include "rootfs/pyc.h"
#include "rootfs_fixture.h"
#include "sp_check.h"

#define STDLIB      "usr/lib/python3.11"
#define JSON_SOURCE STDLIB "/json/__init__.py"
#define JSON_PYC    STDLIB "/json/__pycache__/__init__.cpython-311.pyc"
#define PYC_TAG     ".cpython-311.pyc"
#define PYC_HEADER  16 /* magic, flags, then the source hash (unchecked hash) */
/* Fewer modules than this means the compile step missed most of them:
   bookworm's libpython3.11-minimal and -stdlib keep 508 after pruning.  */
#define MIN_MODULES 400

static char work[64];
static char out_a[128], out_b[128];
static char root_a[160], root_b[160];
static char digest_a[SP_DIGEST_TEXT_SIZE], digest_b[SP_DIGEST_TEXT_SIZE];
static char *build_error;

static double
seconds_since (const struct timespec *t0)
{
  struct timespec t1;
  clock_gettime (CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* One CLI build of the pinned lock into out; the digest it printed in digest.  */
static char *
build_cli (const char *out, char digest[SP_DIGEST_TEXT_SIZE])
{
  char *argv[] = { getenv ("SP_ROOTFS_BIN"),
                   "build",
                   "--lock",
                   getenv ("SP_ROOTFS_LOCK"),
                   "--debs",
                   (char *)fx_deb_cache (),
                   "--out",
                   (char *)out,
                   NULL };
  cleanup_free char *sout = NULL, *serr = NULL;
  char *why = NULL;
  int status;

  /* fx_run's assertions abort only a test, and this runs in check's parent:
     keep to what cannot fail there.  */
  status = fx_run (argv, &sout, &serr);
  if (status != 0 || strlen (sout) != SP_DIGEST_TEXT_SIZE)
    {
      if (asprintf (&why, "sealed-probe-rootfs build (exit %d): %s", status, serr) < 0)
        why = NULL;
      return why;
    }
  /* "sha256:<hex>" and its newline.  */
  memcpy (digest, sout, SP_DIGEST_TEXT_SIZE - 1);
  digest[SP_DIGEST_TEXT_SIZE - 1] = '\0';
  return NULL;
}

struct tree_size
{
  unsigned long long entries, bytes, pycs;
};

static int
count_entry (int dirfd, const char *name, const char *path, const struct stat *st,
             enum sp_tree_walk_event event, void *ctx, sp_error_t *err)
{
  struct tree_size *size = ctx;
  size_t len = strlen (name);

  if (event != SP_TREE_WALK_ENTRY)
    return 0;
  size->entries++;
  if (S_ISREG (st->st_mode))
    size->bytes += (unsigned long long)st->st_size;
  if (len > 4 && strcmp (name + len - 4, ".pyc") == 0)
    size->pycs++;
  return 0;
}

/* Runs once, in check's parent, without assertions: a failure is recorded
   in build_error and every test reports it.  */
static void
build_twice (void)
{
  struct timespec t0;
  double ta, tb;

  if (getenv ("SP_ROOTFS_BIN") == NULL || getenv ("SP_ROOTFS_LOCK") == NULL)
    {
      build_error
          = strdup ("SP_ROOTFS_BIN and SP_ROOTFS_LOCK must be set (tests/rootfs/meson.build sets them)");
      return;
    }
  build_error = fx_missing_deb (getenv ("SP_ROOTFS_LOCK"));
  if (build_error)
    return;
  strcpy (work, "/tmp/sp-rootfs-pyc-XXXXXX");
  if (mkdtemp (work) == NULL)
    {
      build_error = strdup ("mkdtemp failed");
      return;
    }
  snprintf (out_a, sizeof (out_a), "%s/a", work);
  snprintf (out_b, sizeof (out_b), "%s/b", work);
  snprintf (root_a, sizeof (root_a), "%s/root", out_a);
  snprintf (root_b, sizeof (root_b), "%s/root", out_b);

  clock_gettime (CLOCK_MONOTONIC, &t0);
  build_error = build_cli (out_a, digest_a);
  ta = seconds_since (&t0);
  if (build_error)
    return;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  build_error = build_cli (out_b, digest_b);
  tb = seconds_since (&t0);
  if (build_error)
    return;

  {
    cleanup_close int fd = open (root_a, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cleanup_error sp_error_t err = NULL;
    struct tree_size size = { 0, 0, 0 };

    if (fd >= 0 && sp_tree_walk (fd, count_entry, &size, &err) == 0)
      printf ("# two builds: %.2f s and %.2f s; %llu entries, %llu bytes, %llu pycs; %s and %s\n", ta, tb,
              size.entries, size.bytes, size.pycs, digest_a, digest_b);
  }
  fflush (stdout);
}

static void
remove_builds (void)
{
  sp_error_t err = NULL;

  if (work[0] && sp_tree_remove_at (AT_FDCWD, work, &err) < 0)
    {
      fprintf (stderr, "# %s\n", sp_error_message (err));
      sp_error_release (&err);
    }
  free (build_error);
  build_error = NULL;
}

static void
require_builds (void)
{
  ck_assert_msg (build_error == NULL, "%s", build_error);
}

/* Runs python3 -I -S -B -c script chrooted into root as uid (0 or 65534),
   as the sandbox would; its stdout and stderr into buf.  Returns the wait
   status.  */
static int
run_python (const char *root, uid_t uid, const char *script, char *buf, size_t cap)
{
  int pipefd[2];
  size_t used = 0;
  int status;
  pid_t pid;

  ck_assert_int_eq (pipe2 (pipefd, O_CLOEXEC), 0);
  pid = fork ();
  ck_assert_int_ge (pid, 0);
  if (pid == 0)
    {
      char *argv[] = { "python3", "-I", "-S", "-B", "-c", (char *)script, NULL };
      char *envp[] = { "PATH=/usr/bin", "LC_ALL=C.UTF-8", NULL };

      dup2 (pipefd[1], STDOUT_FILENO);
      dup2 (pipefd[1], STDERR_FILENO);
      if (chroot (root) < 0 || chdir ("/") < 0)
        _exit (126);
      if (uid != 0 && (setgroups (0, NULL) < 0 || setgid (uid) < 0 || setuid (uid) < 0))
        _exit (126);
      execve ("/usr/bin/python3", argv, envp);
      _exit (127);
    }
  close (pipefd[1]);
  for (;;)
    {
      ssize_t n = read (pipefd[0], buf + used, cap - 1 - used);
      if (n <= 0)
        break;
      used += (size_t)n;
    }
  buf[used] = '\0';
  close (pipefd[0]);
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  return status;
}

static char *
path_in (const char *root, const char *rel)
{
  char *p;
  ck_assert_int_ge (asprintf (&p, "%s/%s", root, rel), 0);
  return p;
}

static void
read_header (const char *path, uint8_t header[PYC_HEADER])
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

  ck_assert_msg (fd >= 0, "`%s` is missing", path);
  ck_assert_int_eq (read (fd, header, PYC_HEADER), PYC_HEADER);
}

static uint32_t
flags_word (const uint8_t header[PYC_HEADER])
{
  return (uint32_t)header[4] | (uint32_t)header[5] << 8 | (uint32_t)header[6] << 16
         | (uint32_t)header[7] << 24;
}

/* Overwrites path (read-only, but root's) with len bytes of text.  */
static void
overwrite (const char *path, const char *text, size_t len)
{
  cleanup_close int fd = open (path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (sp_write_all (fd, text, len, &err), 0);
}

static char *
read_whole (const char *path, size_t *len)
{
  cleanup_error sp_error_t err = NULL;
  char *text = NULL;

  if (sp_read_path_capped (path, 1024 * 1024, &text, len, &err) < 0)
    ck_abort_msg ("read `%s`: %s", path, sp_error_message (err));
  return text;
}

/* verify's message, or NULL when it passes.  */
static char *
verify_message (const char *dir)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_rootfs_info info;

  if (sp_rootfs_verify (dir, &info, &err) == 0)
    {
      sp_rootfs_info_release (&info);
      return NULL;
    }
  return strdup (sp_error_message (err));
}

START_TEST (two_builds_from_the_same_lock_give_the_same_digest)
{
  cleanup_free char *msg_a = NULL, *msg_b = NULL;

  require_builds ();
  ck_assert_str_eq (digest_a, digest_b);
  msg_a = verify_message (out_a);
  msg_b = verify_message (out_b);
  ck_assert_msg (msg_a == NULL, "%s", msg_a);
  ck_assert_msg (msg_b == NULL, "%s", msg_b);
}
END_TEST

struct pyc_census
{
  int stdlibfd;
  uint8_t magic[4];
  unsigned modules;
  unsigned pycs;
  char problem[2 * SP_TREE_PATH_MAX + 256];
};

/* For every *.py: its __pycache__ pyc, root's, 0444, mtime 0, the tree's
   magic, flags 0b01.  Every pyc has its source.  */
static int
census_entry (int dirfd, const char *name, const char *path, const struct stat *st,
              enum sp_tree_walk_event event, void *ctx, sp_error_t *err)
{
  struct pyc_census *c = ctx;
  size_t len = strlen (name);

  if (event != SP_TREE_WALK_ENTRY || c->problem[0])
    return 0;
  if (len > 3 && strcmp (name + len - 3, ".py") == 0 && (S_ISREG (st->st_mode) || S_ISLNK (st->st_mode)))
    {
      const char *slash = strrchr (path, '/');
      char pyc[SP_TREE_PATH_MAX];
      uint8_t header[PYC_HEADER];
      struct stat pst;
      cleanup_close int fd = -1;

      c->modules++;
      snprintf (pyc, sizeof (pyc), "%.*s__pycache__/%.*s" PYC_TAG, slash ? (int)(slash - path + 1) : 0, path,
                (int)(len - 3), name);
      fd = openat (c->stdlibfd, pyc, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 || fstat (fd, &pst) < 0 || read (fd, header, PYC_HEADER) != PYC_HEADER)
        snprintf (c->problem, sizeof (c->problem), "`%s` has no readable `%s`", path, pyc);
      else if (pst.st_uid != 0 || pst.st_gid != 0 || (pst.st_mode & 07777) != SP_ROOTFS_FILE_MODE
               || pst.st_mtim.tv_sec != 0)
        snprintf (c->problem, sizeof (c->problem), "`%s` is %u:%u mode %04o mtime %ld", pyc, pst.st_uid,
                  pst.st_gid, pst.st_mode & 07777, (long)pst.st_mtim.tv_sec);
      else if (memcmp (header, c->magic, 4) != 0)
        snprintf (c->problem, sizeof (c->problem), "`%s` has another magic number than json's", pyc);
      else if (flags_word (header) != SP_PYC_FLAGS_UNCHECKED_HASH)
        snprintf (c->problem, sizeof (c->problem), "`%s` has flags %u, not unchecked-hash", pyc,
                  flags_word (header));
    }
  else if (len > 4 && strcmp (name + len - 4, ".pyc") == 0)
    {
      c->pycs++;
      if (strstr (path, "__pycache__/") == NULL)
        snprintf (c->problem, sizeof (c->problem), "`%s` is a pyc outside __pycache__", path);
    }
  return 0;
}

START_TEST (every_kept_stdlib_module_has_an_unchecked_hash_pyc)
{
  cleanup_free char *json_pyc = NULL;
  cleanup_free char *stdlib = NULL;
  cleanup_error sp_error_t err = NULL;
  uint8_t header[PYC_HEADER];
  struct pyc_census c = { .stdlibfd = -1 };

  require_builds ();
  /* json's, as the brief of the feature names it: the flags word is 0b01.  */
  json_pyc = path_in (root_a, JSON_PYC);
  read_header (json_pyc, header);
  ck_assert_uint_eq (flags_word (header), 0x1);
  memcpy (c.magic, header, 4);

  stdlib = path_in (root_a, STDLIB);
  c.stdlibfd = open (stdlib, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (c.stdlibfd, 0);
  ck_assert_int_eq (sp_tree_walk (c.stdlibfd, census_entry, &c, &err), 0);
  close (c.stdlibfd);
  ck_assert_msg (c.problem[0] == '\0', "%s", c.problem);
  ck_assert_msg (c.modules >= MIN_MODULES, "only %u modules", c.modules);
  /* One pyc per module, so none without its source.  */
  ck_assert_uint_eq (c.pycs, c.modules);
}
END_TEST

/* The probe's python3 -I -S -B (bundle.c) loads the pycs and writes none:
   as nobody it reads json's pyc with the tree's own magic number, and as
   root (who could write anywhere) it imports much of the stdlib and leaves
   the tree as verify expects.  */
START_TEST (the_sandbox_python_reads_the_pycs_and_writes_none)
{
  static const char read_script[] = "import sys, json, importlib.util\n"
                                    "print(sys.flags.dont_write_bytecode, json.__cached__,\n"
                                    "      importlib.util.MAGIC_NUMBER.hex())\n";
  static const char root_script[] = "import json, ssl, sqlite3, decimal, asyncio, email.parser, http.client, "
                                    "xml.etree.ElementTree, zipfile, "
                                    "logging.handlers, unittest, argparse, dataclasses, typing\n"
                                    "print('ok')\n";
  cleanup_free char *json_pyc = NULL;
  cleanup_free char *msg = NULL;
  char expected[256], magic[9];
  uint8_t header[PYC_HEADER];
  char buf[1024];
  int status;

  require_builds ();
  json_pyc = path_in (root_a, JSON_PYC);
  read_header (json_pyc, header);
  snprintf (magic, sizeof (magic), "%02x%02x%02x%02x", header[0], header[1], header[2], header[3]);
  snprintf (expected, sizeof (expected), "1 /%s %s\n", JSON_PYC, magic);
  status = run_python (root_a, 65534, read_script, buf, sizeof (buf));
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %d: %s", status, buf);
  ck_assert_str_eq (buf, expected);

  status = run_python (root_a, 0, root_script, buf, sizeof (buf));
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %d: %s", status, buf);
  ck_assert_str_eq (buf, "ok\n");
  msg = verify_message (out_a);
  ck_assert_msg (msg == NULL, "after the imports: %s", msg);
}
END_TEST

/* Unchecked hash: the interpreter never compares a pyc with its source.
   An edited json/__init__.py still imports as the pyc says (while running
   the same file as a script shows the edit), so only the digest, which
   covers every pyc, stands between a tampered tree and the probes.  */
START_TEST (an_edited_source_under_its_pyc_is_not_what_runs_and_verify_catches_it)
{
  static const char edit[] = "raise ImportError('the source ran, not the pyc')\n";
  cleanup_free char *source = path_in (root_b, JSON_SOURCE);
  cleanup_free char *original = NULL;
  cleanup_free char *msg = NULL;
  cleanup_free char *after = NULL;
  char buf[1024];
  size_t len;
  int status;

  require_builds ();
  original = read_whole (source, &len);
  overwrite (source, edit, strlen (edit));

  status = run_python (root_b, 65534, "import json; print(json.dumps([1]))", buf, sizeof (buf));
  /* The control: the edited file is what the chroot sees.  */
  {
    char control[1024];
    int cstatus
        = run_python (root_b, 65534, "exec(open('/" JSON_SOURCE "').read())", control, sizeof (control));
    msg = verify_message (out_b);
    overwrite (source, original, len);
    after = verify_message (out_b);
    ck_assert_msg (WIFEXITED (cstatus) && WEXITSTATUS (cstatus) == 1 && strstr (control, "the source ran"),
                   "control: status %d: %s", cstatus, control);
  }
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %d: %s", status, buf);
  ck_assert_str_eq (buf, "[1]\n");
  ck_assert_msg (msg && strstr (msg, "digest mismatch"), "verify after the edit: %s", msg ? msg : "(passed)");
  ck_assert_msg (after == NULL, "verify after the restore: %s", after);
}
END_TEST

START_TEST (verify_detects_one_flipped_byte_in_a_pyc)
{
  cleanup_free char *pyc = path_in (root_b, JSON_PYC);
  cleanup_free char *original = NULL;
  cleanup_free char *flipped = NULL;
  cleanup_free char *msg = NULL;
  cleanup_free char *after = NULL;
  size_t len;

  require_builds ();
  original = read_whole (pyc, &len);
  ck_assert_uint_gt (len, 200);
  flipped = malloc (len);
  ck_assert_ptr_nonnull (flipped);
  memcpy (flipped, original, len);
  flipped[len / 2] ^= 0x01;
  overwrite (pyc, flipped, len);
  msg = verify_message (out_b);
  overwrite (pyc, original, len);
  after = verify_message (out_b);
  ck_assert_msg (msg && strstr (msg, "digest mismatch") && strstr (msg, digest_b),
                 "verify after the flip: %s", msg ? msg : "(passed)");
  ck_assert_msg (after == NULL, "verify after the restore: %s", after);
}
END_TEST

/* The real lock plus one package with a module that does not compile: the
   build fails naming it, and leaves nothing behind.  */
START_TEST (a_stdlib_module_that_does_not_compile_fails_the_build_naming_it)
{
  static const struct fx_member broken[] = {
    { 'd', "./usr/", NULL, 0 },
    { 'd', "./usr/lib/", NULL, 0 },
    { 'd', "./usr/lib/python3.11/", NULL, 0 },
    { 'f', "./usr/lib/python3.11/sp_broken_module.py", "def (:\n", 0644 },
  };
  cleanup_error sp_error_t err = NULL;
  cleanup_free char *names = NULL;
  cleanup_free char *missing = NULL;
  struct sp_lock lock = { 0 };
  char *text;

  ck_assert_msg (getenv ("SP_ROOTFS_LOCK") != NULL,
                 "SP_ROOTFS_LOCK is not set (tests/rootfs/meson.build sets it)");
  missing = fx_missing_deb (getenv ("SP_ROOTFS_LOCK"));
  ck_assert_msg (missing == NULL, "%s", missing);
  ck_assert_int_eq (sp_lock_load (getenv ("SP_ROOTFS_LOCK"), &lock, &err), 0);
  for (size_t i = 0; i < lock.count; i++)
    {
      const struct sp_lock_entry *e = &lock.entries[i];
      char name[SP_LOCK_DEB_NAME_SIZE], from[PATH_MAX], to[PATH_MAX];
      char hex[SP_SHA256_HEX + 1];

      sp_lock_deb_filename (e, name);
      snprintf (from, sizeof (from), "%s/%s", fx_deb_cache (), name);
      snprintf (to, sizeof (to), "%s/%s", fx.debs, name);
      ck_assert_int_eq (symlink (from, to), 0);
      sp_sha256_hex (e->sha256, hex);
      ck_assert_int_ge (asprintf (&text, "%s%s %s %s %s\n", fx.lock_text, e->name, e->version, e->arch, hex),
                        0);
      free (fx.lock_text);
      fx.lock_text = text;
    }
  sp_lock_release (&lock);
  fx_add_package ("sp-broken", broken, sizeof (broken) / sizeof (broken[0]), NULL);

  fx.build_flags = 0;
  ck_assert (!fx_build ());
  ck_assert (fx_error_has ("compile the standard library: `/usr/bin/python3.11` exited with status 1: "
                           "/usr/lib/python3.11/sp_broken_module.py: SyntaxError"));
  names = fx_list_dir (fx.dir);
  ck_assert_str_eq (names, "debs rootfs.lock");
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("rootfs_pyc");
  TCase *tc = tcase_create ("two_builds");
  TCase *broken = tcase_create ("broken_module");

  tcase_add_unchecked_fixture (tc, build_twice, remove_builds);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, two_builds_from_the_same_lock_give_the_same_digest);
  tcase_add_test (tc, every_kept_stdlib_module_has_an_unchecked_hash_pyc);
  tcase_add_test (tc, the_sandbox_python_reads_the_pycs_and_writes_none);
  tcase_add_test (tc, an_edited_source_under_its_pyc_is_not_what_runs_and_verify_catches_it);
  tcase_add_test (tc, verify_detects_one_flipped_byte_in_a_pyc);
  suite_add_tcase (s, tc);

  /* Its own build, from a scratch lock: no need of the two above.  */
  tcase_add_checked_fixture (broken, fx_setup, fx_teardown);
  tcase_set_timeout (broken, 120);
  tcase_add_test (broken, a_stdlib_module_that_does_not_compile_fails_the_build_naming_it);
  suite_add_tcase (s, broken);
  return s;
}

SP_CHECK_MAIN_AS_ROOT (make_suite, "the builder chowns every entry to 0:0, and the python checks chroot")
