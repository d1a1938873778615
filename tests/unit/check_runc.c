/* The OCI command-line backends (runtime.h, src/runtimes/oci_cli.c) against the
   real runc, or the real runsc when SP_BACKEND=gvisor, as root: verify, a
   run's exit, signal and timeout facts, the state and cgroup left after it
   (none), and orphan cleanup of another run.  The bundle is a minimal one:
   the host's /usr bound read-only under an empty rootfs (Debian's merged
   /usr).  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "runtimes/runtime.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

#define RUN_ID  "checkrunc"
#define CG_MEM  "/sys/fs/cgroup/memory/sealed-probe"
#define CG_PIDS "/sys/fs/cgroup/pids/sealed-probe"

/* The backend under test: tests/meson.build runs this file once per
   backend.  */
struct backend
{
  enum sp_runtime kind;
  const char *binary_name; /* and its state directory's name */
  const char *old_version; /* a --version line older than it supports */
  const char *old_reason;
};
static const struct backend backends[] = {
  { SP_RUNTIME_RUNC, "runc", "runc version 1.0.3", "1.0.3 is older than" },
  { SP_RUNTIME_GVISOR, "runsc", "runsc version 0.0~20211129.0", "20211129 is older than" },
};
static const struct backend *b = &backends[0];

static char top[64];
static int top_fd = -1;
static char state[128];
static char bundle[128];

static const char config_fmt[]
    = "{\"ociVersion\":\"1.0.2-dev\",\"process\":{\"terminal\":false,\"user\":{\"uid\":0,\"gid\":0},"
      "\"args\":[\"/bin/sh\",\"-c\",\"%s\"],\"env\":[\"PATH=/usr/bin:/bin\"],\"cwd\":\"/\","
      "\"capabilities\":{\"bounding\":[],\"effective\":[],\"permitted\":[],\"ambient\":[]},"
      "\"noNewPrivileges\":true},\"root\":{\"path\":\"rootfs\",\"readonly\":true},\"hostname\":\"p\","
      "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
      "{\"destination\":\"/"
      "dev\",\"type\":\"tmpfs\",\"source\":\"tmpfs\",\"options\":[\"nosuid\",\"mode=755\"]},"
      "{\"destination\":\"/usr\",\"type\":\"bind\",\"source\":\"/usr\",\"options\":[\"rbind\",\"ro\"]}],"
      "\"linux\":{\"cgroupsPath\":\"%s\",\"resources\":{\"memory\":{\"limit\":268435456}},"
      "\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"},{\"type\":\"ipc\"},{\"type\":\"uts\"},"
      "{\"type\":\"mount\"}]}}";

static void
write_bundle_raw (const char *json)
{
  int fd = openat (top_fd, "bundle/config.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, json, strlen (json)), (ssize_t)strlen (json));
  close (fd);
}

static void
write_bundle (const char *script, const char *cgroup_path)
{
  char json[4096];
  int fd;

  snprintf (json, sizeof (json), config_fmt, script, cgroup_path);
  fd = openat (top_fd, "bundle/config.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, json, strlen (json)), (ssize_t)strlen (json));
  close (fd);
}

static void
setup (void)
{
  strcpy (top, "/tmp/sp-check-runc-XXXXXX");
  top_fd = sp_tmpdir_make (top);
  ck_assert_int_eq (mkdirat (top_fd, "state", 0700), 0);
  ck_assert_int_eq (mkdirat (top_fd, "bundle", 0700), 0);
  ck_assert_int_eq (mkdirat (top_fd, "bundle/rootfs", 0755), 0);
  for (const char *const *d = (const char *const[]){ "usr", "proc", "dev", NULL }; *d; d++)
    {
      char p[64];
      snprintf (p, sizeof (p), "bundle/rootfs/%s", *d);
      ck_assert_int_eq (mkdirat (top_fd, p, 0755), 0);
    }
  ck_assert_int_eq (symlinkat ("usr/bin", top_fd, "bundle/rootfs/bin"), 0);
  ck_assert_int_eq (symlinkat ("usr/lib", top_fd, "bundle/rootfs/lib"), 0);
  ck_assert_int_eq (symlinkat ("usr/lib64", top_fd, "bundle/rootfs/lib64"), 0);
  snprintf (state, sizeof (state), "%s/state", top);
  snprintf (bundle, sizeof (bundle), "%s/bundle", top);
}

static void
teardown (void)
{
  close (top_fd);
  sp_tmpdir_remove (top);
}

static struct sp_runtime_backend *
open_runc (const char *run_id)
{
  struct sp_runtime_settings settings = { .binary = NULL, .state_dir = state, .run_id = run_id };
  struct sp_runtime_backend *rt = NULL;
  cleanup_error sp_error_t err = NULL;

  ck_assert_msg (sp_runtime_open (b->kind, &settings, &rt, &err) == 0, "%s", sp_error_message (err));
  ck_assert_msg (rt->ops->verify (rt, &err) == 0, "%s", sp_error_message (err));
  ck_assert_msg (rt->ops->prepare (rt, &err) == 0, "%s", sp_error_message (err));
  return rt;
}

static void
run_job (struct sp_runtime_backend *rt, const char *script, uint32_t timeout, struct sp_run_facts *facts)
{
  struct sp_runtime_job job = { .bundle_dir = bundle,
                                .container_id = "sp-" RUN_ID "-1",
                                .cgroup_path = "/sealed-probe/" RUN_ID "-1",
                                .timeout_seconds = timeout };
  cleanup_error sp_error_t err = NULL;
  char path[256];
  struct stat st;

  write_bundle (script, job.cgroup_path);
  ck_assert_msg (rt->ops->run (rt, &job, facts, &err) == 0, "%s", sp_error_message (err));
  ck_assert (facts->launched);
  /* Nothing of the container is left: neither runc's state nor its cgroup.  */
  snprintf (path, sizeof (path), "%s/%s/%s/%s", state, b->binary_name, RUN_ID, job.container_id);
  ck_assert_int_eq (lstat (path, &st), -1);
  ck_assert_int_eq (lstat (CG_MEM "/" RUN_ID "-1", &st), -1);
}

START_TEST (unavailable_backends_are_errors_not_fallbacks)
{
  struct sp_runtime_settings settings = { .state_dir = state, .run_id = RUN_ID };
  struct sp_runtime_backend *rt = NULL;
  cleanup_error sp_error_t err = NULL;
  cleanup_error sp_error_t unknown = NULL;

  /* sbx without its template: an error naming the option, never a default.  */
  ck_assert_int_eq (sp_runtime_open (SP_RUNTIME_SBX, &settings, &rt, &err), -1);
  ck_assert_ptr_null (rt);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "--sbx-template"));
  ck_assert_int_eq (sp_runtime_open ((enum sp_runtime)99, &settings, &rt, &unknown), -1);
  ck_assert_ptr_null (rt);
  ck_assert_ptr_nonnull (strstr (sp_error_message (unknown), "unknown runtime"));
}
END_TEST

START_TEST (bad_run_ids_and_relative_paths_are_refused)
{
  static const char *const bad_ids[] = { "", "UPPER", "a/b", "../x", "abcdefghijklmnopqrstuvwxyz0123456" };

  for (size_t i = 0; i < sizeof (bad_ids) / sizeof (bad_ids[0]); i++)
    {
      struct sp_runtime_settings settings = { .state_dir = state, .run_id = bad_ids[i] };
      struct sp_runtime_backend *rt = NULL;
      cleanup_error sp_error_t err = NULL;

      ck_assert_msg (sp_runtime_open (b->kind, &settings, &rt, &err) == -1, "accepted `%s`", bad_ids[i]);
    }
  struct sp_runtime_settings rel = { .binary = "runc", .state_dir = state, .run_id = RUN_ID };
  struct sp_runtime_backend *rt = NULL;
  cleanup_error sp_error_t err = NULL;
  ck_assert_int_eq (sp_runtime_open (b->kind, &rel, &rt, &err), -1);
}
END_TEST

START_TEST (verify_refuses_a_binary_writable_by_others)
{
  char copy[256];
  struct sp_runtime_settings settings = { .binary = copy, .state_dir = state, .run_id = RUN_ID };
  cleanup_runtime struct sp_runtime_backend *rt = NULL;
  cleanup_error sp_error_t err = NULL;
  int fd;

  /* A script, not runc: verify must stop before it ever runs it.  */
  snprintf (copy, sizeof (copy), "%s/runc", top);
  fd = open (copy, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, "#!/bin/sh\necho runc version 9.9.9\n", 34), 34);
  close (fd);
  ck_assert_int_eq (chmod (copy, 0777), 0);
  ck_assert_int_eq (sp_runtime_open (b->kind, &settings, &rt, &err), 0);
  ck_assert_int_eq (rt->ops->verify (rt, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "writable by group or others"));
}
END_TEST

START_TEST (verify_refuses_a_version_it_cannot_parse_or_too_old)
{
  const char *const outputs[]
      = { b->old_version, "crun version 1.1.5", "runc version 1.1", "runsc version 0.0~2022121.0" };
  char fake[256], script[256];
  struct stat st;

  ck_assert_int_eq (stat (top, &st), 0);
  /* /tmp is world-writable, so the fake lives in a root-only directory that
     is still below it: verify checks parents too, so use /usr/local/lib.  */
  snprintf (fake, sizeof (fake), "/usr/local/lib/sp-check-fake-runc-%d", (int)getpid ());
  for (size_t i = 0; i < 4; i++)
    {
      struct sp_runtime_settings settings = { .binary = fake, .state_dir = state, .run_id = RUN_ID };
      cleanup_runtime struct sp_runtime_backend *rt = NULL;
      cleanup_error sp_error_t err = NULL;
      int fd = open (fake, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);

      ck_assert_int_ge (fd, 0);
      snprintf (script, sizeof (script), "#!/bin/sh\nprintf '%s\\n'\n", outputs[i]);
      ck_assert_int_eq (write (fd, script, strlen (script)), (ssize_t)strlen (script));
      close (fd);
      ck_assert_int_eq (sp_runtime_open (b->kind, &settings, &rt, &err), 0);
      ck_assert_int_eq (rt->ops->verify (rt, &err), -1);
      ck_assert_ptr_nonnull (strstr (sp_error_message (err), fake));
      if (i == 0)
        ck_assert_msg (strstr (sp_error_message (err), b->old_reason) != NULL, "%s", sp_error_message (err));
    }
  unlink (fake);
}
END_TEST

START_TEST (a_run_reports_the_exit_code_and_removes_the_container)
{
  cleanup_runtime struct sp_runtime_backend *rt = open_runc (RUN_ID);
  struct sp_run_facts facts;

  run_job (rt, "exit 3", 30, &facts);
  ck_assert_int_eq (facts.exit_code, 3);
  ck_assert_int_eq (facts.signal, 0);
  ck_assert (!facts.timed_out);
  ck_assert (!facts.oom);
  ck_assert_uint_gt (facts.wall_ns, 0);
  ck_assert_uint_gt (facts.peak_memory_bytes, 0);
  ck_assert_uint_gt (facts.cpu_ns, 0);
}
END_TEST

START_TEST (a_run_killed_by_a_signal_reports_it)
{
  cleanup_runtime struct sp_runtime_backend *rt = open_runc (RUN_ID);
  struct sp_run_facts facts;

  /* pid 1 of a pid namespace ignores the signals it sends itself, but not
     a real fault: the probe's own process takes SIGSEGV.  */
  run_job (rt, "exec python3 -c 'import ctypes; ctypes.string_at(0)'", 30, &facts);
  if (b->kind == SP_RUNTIME_GVISOR)
    {
      /* The probe's process lives in the sentry, not on the host: the
         sandbox exits 128+N for it, as runsc reports it (docs/runtimes.md).  */
      ck_assert_int_eq (facts.exit_code, 128 + SIGSEGV);
      ck_assert_int_eq (facts.signal, 0);
    }
  else
    {
      ck_assert_int_eq (facts.exit_code, -1);
      ck_assert_int_eq (facts.signal, SIGSEGV);
    }
  ck_assert_int_eq (facts.stage, SP_RUN_STAGE_PROBE);
}
END_TEST

/* The init's own wait status is read, not runc's 128+N: a probe that exits
   137 is an exit, not SIGKILL.  */
START_TEST (a_probe_exiting_137_is_an_exit_not_a_signal)
{
  cleanup_runtime struct sp_runtime_backend *rt = open_runc (RUN_ID);
  struct sp_run_facts facts;

  run_job (rt, "sh -c 'kill -KILL $$'; exit $?", 30, &facts);
  ck_assert_int_eq (facts.exit_code, 137);
  ck_assert_int_eq (facts.signal, 0);
}
END_TEST

/* runc refusing to create the container (here: its id is taken) is the
   runtime's failure, told apart from any probe's: the run fails with the
   stage at create, whatever runc's exit status.  */
START_TEST (a_failed_create_is_the_runtimes_failure_not_the_probes)
{
  cleanup_runtime struct sp_runtime_backend *rt = open_runc (RUN_ID);
  struct sp_runtime_job job = { .bundle_dir = bundle,
                                .container_id = "sp-" RUN_ID "-1",
                                .cgroup_path = "/sealed-probe/" RUN_ID "-1",
                                .timeout_seconds = 30 };
  cleanup_error sp_error_t err = NULL;
  struct sp_run_facts facts;
  char path[256];

  write_bundle ("exit 1", job.cgroup_path);
  /* runsc refuses a bundle whose process has no args: create fails.  */
  if (b->kind == SP_RUNTIME_GVISOR)
    write_bundle_raw (
        "{\"ociVersion\":\"1.0.2-dev\",\"process\":{\"args\":[]},\"root\":{\"path\":\"rootfs\"}}");
  snprintf (path, sizeof (path), "%s/%s/%s/%s", state, b->binary_name, RUN_ID, job.container_id);
  if (b->kind == SP_RUNTIME_RUNC)
    ck_assert_int_eq (mkdir (path, 0700), 0);
  ck_assert_int_eq (rt->ops->run (rt, &job, &facts, &err), -1);
  ck_assert_int_eq (facts.stage, SP_RUN_STAGE_CREATE);
  {
    char want[32];
    snprintf (want, sizeof (want), "%s create", b->binary_name);
    ck_assert_msg (strstr (sp_error_message (err), want) != NULL, "%s", sp_error_message (err));
  }
  ck_assert (rmdir (path) == 0 || errno == ENOENT); /* runc delete may remove a state-less one */

  /* The same bundle, runc able to create it: the probe's exit 1 is the
     probe's.  */
  sp_error_release (&err);
  run_job (rt, "exit 1", 30, &facts);
  ck_assert_int_eq (facts.stage, SP_RUN_STAGE_PROBE);
  ck_assert_int_eq (facts.exit_code, 1);
}
END_TEST

START_TEST (a_timeout_kills_the_container)
{
  cleanup_runtime struct sp_runtime_backend *rt = open_runc (RUN_ID);
  struct sp_run_facts facts;

  run_job (rt, "sleep 300", 1, &facts);
  ck_assert (facts.timed_out);
  ck_assert_int_eq (facts.signal, SIGKILL);
  ck_assert_int_eq (facts.exit_code, -1);
  ck_assert_uint_lt (facts.wall_ns, 8ULL * 1000 * 1000 * 1000);
}
END_TEST

START_TEST (cleanup_orphans_removes_another_runs_leftovers_and_spares_this_one)
{
  cleanup_runtime struct sp_runtime_backend *rt = open_runc (RUN_ID);
  cleanup_error sp_error_t err = NULL;
  cleanup_orphans_removed struct sp_orphans_removed removed = { 0 };
  cleanup_orphans_removed struct sp_orphans_removed removed_now = { 0 };
  char path[256], pidbuf[32];
  struct stat st;
  pid_t orphan, mine;
  int status, fd;

  /* Another run's --root (empty) and a cgroup of it with a live process; and
     a cgroup of this run, which must survive.  */
  snprintf (path, sizeof (path), "%s/%s/oldrun", state, b->binary_name);
  ck_assert_int_eq (mkdir (path, 0700), 0);
  ck_assert (mkdir (CG_PIDS, 0755) == 0 || errno == EEXIST);
  ck_assert_int_eq (mkdir (CG_PIDS "/oldrun-7", 0755), 0);
  ck_assert_int_eq (mkdir (CG_PIDS "/" RUN_ID "-2", 0755), 0);
  orphan = fork ();
  if (orphan == 0)
    {
      pause ();
      _exit (0);
    }
  mine = fork ();
  if (mine == 0)
    {
      pause ();
      _exit (0);
    }
  snprintf (pidbuf, sizeof (pidbuf), "%d", (int)orphan);
  fd = open (CG_PIDS "/oldrun-7/cgroup.procs", O_WRONLY | O_CLOEXEC);
  ck_assert_int_eq (write (fd, pidbuf, strlen (pidbuf)), (ssize_t)strlen (pidbuf));
  close (fd);
  snprintf (pidbuf, sizeof (pidbuf), "%d", (int)mine);
  fd = open (CG_PIDS "/" RUN_ID "-2/cgroup.procs", O_WRONLY | O_CLOEXEC);
  ck_assert_int_eq (write (fd, pidbuf, strlen (pidbuf)), (ssize_t)strlen (pidbuf));
  close (fd);

  ck_assert_msg (rt->ops->cleanup_orphans (rt, false, &removed, &err) == 0, "%s", sp_error_message (err));
  /* What went is returned, by run: never this run's.  */
  ck_assert_uint_eq (removed.n, 1);
  ck_assert_str_eq (removed.runs[0].run, "oldrun");
  ck_assert_uint_eq (removed.runs[0].containers, 0);
  ck_assert_uint_eq (removed.runs[0].cgroups, 1);
  ck_assert (removed.runs[0].state_dir);
  ck_assert_int_eq (waitpid (orphan, &status, 0), orphan);
  ck_assert (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  ck_assert_int_eq (lstat (CG_PIDS "/oldrun-7", &st), -1);
  ck_assert_int_eq (lstat (path, &st), -1);
  ck_assert_int_eq (lstat (CG_PIDS "/" RUN_ID "-2", &st), 0);
  ck_assert_int_eq (waitpid (mine, &status, WNOHANG), 0);

  /* With include_current, this run's cgroup goes too; the shared parent
     stays, since another proxy's runc may be creating a cgroup in it.  */
  ck_assert_msg (rt->ops->cleanup_orphans (rt, true, &removed_now, &err) == 0, "%s", sp_error_message (err));
  ck_assert_uint_eq (removed_now.n, 1);
  ck_assert_str_eq (removed_now.runs[0].run, RUN_ID);
  ck_assert_uint_eq (removed_now.runs[0].cgroups, 1);
  ck_assert_int_eq (waitpid (mine, &status, 0), mine);
  ck_assert_int_eq (lstat (CG_PIDS "/" RUN_ID "-2", &st), -1);
  ck_assert_int_eq (lstat (CG_PIDS, &st), 0);
  snprintf (path, sizeof (path), "%s/%s/%s", state, b->binary_name, RUN_ID);
  ck_assert_int_eq (lstat (path, &st), -1);
}
END_TEST

static Suite *
make_suite (void)
{
  const char *name = getenv ("SP_BACKEND");
  Suite *s;
  TCase *tc;

  if (name != NULL && strcmp (name, "gvisor") == 0)
    b = &backends[1];
  s = suite_create (b->binary_name);
  tc = tcase_create (b->binary_name);

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, unavailable_backends_are_errors_not_fallbacks);
  tcase_add_test (tc, bad_run_ids_and_relative_paths_are_refused);
  tcase_add_test (tc, verify_refuses_a_binary_writable_by_others);
  tcase_add_test (tc, verify_refuses_a_version_it_cannot_parse_or_too_old);
  tcase_add_test (tc, a_run_reports_the_exit_code_and_removes_the_container);
  tcase_add_test (tc, a_run_killed_by_a_signal_reports_it);
  tcase_add_test (tc, a_probe_exiting_137_is_an_exit_not_a_signal);
  tcase_add_test (tc, a_failed_create_is_the_runtimes_failure_not_the_probes);
  tcase_add_test (tc, a_timeout_kills_the_container);
  tcase_add_test (tc, cleanup_orphans_removes_another_runs_leftovers_and_spares_this_one);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN_AS_ROOT (make_suite, "runs real runc or runsc containers and creates cgroups")
