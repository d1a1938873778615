/* Starting helper programs (spawn.h): what the child inherits (fds 0-2 only,
   /dev/null, exactly the given environment), timeouts, group kills, exit
   facts, capture caps and exec failures.  */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/spawn.h"

#include "sp_check.h"

#define SH "/bin/sh"

static char *const no_env[] = { NULL };
static char out[4096 + 1];

/* Runs sh -c script with capture; returns its wait status.  */
static int
sh_capture (const char *script, char *const envp[], size_t cap, size_t *len)
{
  char *argv[] = { (char *)"sh", (char *)"-c", (char *)script, NULL };
  cleanup_error sp_error_t err = NULL;
  int status = -1;

  ck_assert_msg (sp_spawn_capture (SH, argv, envp, 10000, out, cap, len, &status, &err) == 0, "%s",
                 sp_error_message (err));
  return status;
}

START_TEST (child_sees_only_fds_0_1_2_even_when_the_parent_leaks_one)
{
  size_t len = 0;
  /* Not O_CLOEXEC on purpose: the spawner must close it anyway.  */
  int leaked = open ("/dev/null", O_RDONLY);
  int status;

  ck_assert_int_ge (leaked, 3);
  /* $$ is the shell itself (`; :` keeps it from exec'ing ls in its place):
     ls runs in a child of it and has its own fd on
     the directory, which is not listed.  */
  status = sh_capture ("ls /proc/$$/fd; :", no_env, 4096, &len);
  close (leaked);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  ck_assert_str_eq (out, "0\n1\n2\n");
}
END_TEST

START_TEST (child_gets_exactly_the_given_environment)
{
  char *env[] = { (char *)"A=1", (char *)"PATH=/usr/bin:/bin", NULL };
  char *argv[] = { (char *)"env", NULL };
  cleanup_error sp_error_t err = NULL;
  size_t len = 0;
  int status = -1;

  setenv ("SP_CANARY_SECRET", "do-not-leak", 1);
  ck_assert_int_eq (sp_spawn_capture ("/usr/bin/env", argv, env, 10000, out, 4096, &len, &status, &err), 0);
  unsetenv ("SP_CANARY_SECRET");
  ck_assert_str_eq (out, "A=1\nPATH=/usr/bin:/bin\n");
  ck_assert_uint_eq (len, strlen ("A=1\nPATH=/usr/bin:/bin\n"));
}
END_TEST

START_TEST (stdin_and_stderr_are_dev_null)
{
  size_t len = 0;
  int status
      = sh_capture ("readlink /proc/$$/fd/0; readlink /proc/$$/fd/2; cat; echo end", no_env, 4096, &len);

  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  ck_assert_str_eq (out, "/dev/null\n/dev/null\nend\n");
}
END_TEST

START_TEST (child_runs_in_its_own_process_group_with_default_signals)
{
  /* grep itself, not under a shell: dash blocks signals around its own forks.  */
  char *argv[] = { (char *)"grep", (char *)"-E", (char *)"^Sig(Blk|Ign)", (char *)"/proc/self/status", NULL };
  cleanup_error sp_error_t err = NULL;
  size_t len = 0;
  sigset_t block;
  int status, pid = 0, pgid = -1;

  /* The shell leads a group of its own: its pgid is its pid, not ours.  */
  status = sh_capture ("echo $$; cut -d' ' -f5 /proc/$$/stat", no_env, 4096, &len);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  ck_assert_int_eq (sscanf (out, "%d\n%d\n", &pid, &pgid), 2);
  ck_assert_int_eq (pid, pgid);
  ck_assert_int_ne (pgid, (int)getpgrp ());

  /* A blocked and an ignored signal in the parent must not reach the child.  */
  signal (SIGUSR1, SIG_IGN);
  sigemptyset (&block);
  sigaddset (&block, SIGUSR2);
  sigprocmask (SIG_BLOCK, &block, NULL);
  status = -1;
  ck_assert_int_eq (sp_spawn_capture ("/usr/bin/grep", argv, no_env, 10000, out, 4096, &len, &status, &err),
                    0);
  signal (SIGUSR1, SIG_DFL);
  sigprocmask (SIG_UNBLOCK, &block, NULL);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  ck_assert_str_eq (out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}
END_TEST

START_TEST (exit_status_and_signal_are_reported)
{
  char *argv_exit[] = { (char *)"sh", (char *)"-c", (char *)"exit 7", NULL };
  char *argv_sig[] = { (char *)"sh", (char *)"-c", (char *)"kill -TERM $$", NULL };
  cleanup_error sp_error_t err = NULL;
  struct sp_child child;
  int status = 0;

  ck_assert_int_eq (sp_spawn (SH, argv_exit, no_env, &child, &err), 0);
  ck_assert_int_ge (child.pidfd, 0);
  ck_assert_int_eq (sp_child_wait (&child, 10000, &status, &err), 1);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 7);
  ck_assert_int_eq (child.pidfd, -1);

  ck_assert_int_eq (sp_spawn (SH, argv_sig, no_env, &child, &err), 0);
  ck_assert_int_eq (sp_child_wait (&child, -1, &status, &err), 1);
  ck_assert (WIFSIGNALED (status) && WTERMSIG (status) == SIGTERM);
}
END_TEST

static int
pid_alive (pid_t pid)
{
  char path[64], state = '?';
  FILE *f;

  snprintf (path, sizeof (path), "/proc/%d/stat", (int)pid);
  f = fopen (path, "re");
  if (f == NULL)
    return 0;
  if (fscanf (f, "%*d (%*[^)]) %c", &state) != 1)
    state = '?';
  fclose (f);
  return state != 'Z' && state != 'X';
}

START_TEST (a_timeout_leaves_the_child_and_kill_and_reap_kills_its_whole_group)
{
  char pidfile[] = "/tmp/sp-spawn-gc-XXXXXX";
  int fd = mkstemp (pidfile);
  char script[256];
  char *argv[] = { (char *)"sh", (char *)"-c", script, NULL };
  cleanup_error sp_error_t err = NULL;
  struct sp_child child;
  int status = 0;
  pid_t grandchild = 0;
  char buf[32] = { 0 };

  ck_assert_int_ge (fd, 0);
  /* The grandchild (sleep, in the background) writes its pid for us.  */
  snprintf (script, sizeof (script), "sleep 300 & echo $! > %s; wait", pidfile);
  ck_assert_int_eq (sp_spawn (SH, argv, no_env, &child, &err), 0);
  for (int i = 0; i < 500 && grandchild <= 0; i++)
    {
      struct timespec nap = { 0, 10 * 1000 * 1000 };
      ssize_t n = pread (fd, buf, sizeof (buf) - 1, 0);
      if (n > 0 && buf[n - 1] == '\n')
        grandchild = atoi (buf);
      else
        nanosleep (&nap, NULL);
    }
  close (fd);
  unlink (pidfile);
  ck_assert_int_gt (grandchild, 0);

  ck_assert_int_eq (sp_child_wait (&child, 200, &status, &err), 0);
  ck_assert (pid_alive (child.pid));
  ck_assert (pid_alive (grandchild));
  sp_child_kill_and_reap (&child);
  ck_assert_int_eq (child.pidfd, -1);
  /* The grandchild is reparented and reaped by init (or a subreaper): give
     it a moment.  */
  for (int i = 0; i < 200 && pid_alive (grandchild); i++)
    {
      struct timespec nap = { 0, 10 * 1000 * 1000 };
      nanosleep (&nap, NULL);
    }
  ck_assert_msg (!pid_alive (grandchild), "grandchild %d survived the group kill", (int)grandchild);
}
END_TEST

START_TEST (capture_caps_and_kills_an_over_long_writer)
{
  char *argv[] = { (char *)"sh", (char *)"-c", (char *)"while :; do echo xxxxxxxxxxxxxxxx; done", NULL };
  cleanup_error sp_error_t err = NULL;
  size_t len = 0;
  int status = 0;
  struct timespec a, b;

  clock_gettime (CLOCK_MONOTONIC, &a);
  ck_assert_int_eq (sp_spawn_capture (SH, argv, no_env, 10000, out, 100, &len, &status, &err), -1);
  clock_gettime (CLOCK_MONOTONIC, &b);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "wrote more than 100 bytes"));
  ck_assert_int_lt (b.tv_sec - a.tv_sec, 5);
}
END_TEST

START_TEST (capture_of_exactly_cap_bytes_is_accepted)
{
  size_t len = 0;
  int status = sh_capture ("printf 0123456789", no_env, 10, &len);

  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  ck_assert_uint_eq (len, 10);
  ck_assert_str_eq (out, "0123456789");
}
END_TEST

START_TEST (capture_times_out_and_kills_a_silent_child)
{
  char *argv[] = { (char *)"sh", (char *)"-c", (char *)"exec sleep 300", NULL };
  cleanup_error sp_error_t err = NULL;
  size_t len = 0;
  int status = 0;

  ck_assert_int_eq (sp_spawn_capture (SH, argv, no_env, 200, out, 100, &len, &status, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "did not finish within 200 ms"));
}
END_TEST

/* An orphan reparented to a subreaper is adopted, waited for with its own
   status, and killed; a process that is not a child is refused.  */
/* Whether pid is a zombie child of this process (state Z).  */
static bool
is_zombie (pid_t pid)
{
  char path[64], buf[512], *close_paren;
  ssize_t n;
  int fd;

  snprintf (path, sizeof (path), "/proc/%d/stat", (int)pid);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  n = read (fd, buf, sizeof (buf) - 1);
  close (fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  close_paren = strrchr (buf, ')');
  return close_paren != NULL && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

START_TEST (strays_are_reaped_and_known_children_are_left_to_their_owner)
{
  cleanup_error sp_error_t err = NULL;
  char *const argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)"exit 5", NULL };
  char *const envp[] = { (char *)"PATH=/usr/bin:/bin", NULL };
  struct sp_child spawned, adopted;
  int pipefd[2], status = 0;
  pid_t middle, orphans[2];

  ck_assert_int_eq (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  /* A spawned child that has exited, not yet waited for.  */
  ck_assert_int_eq (sp_spawn ("/bin/sh", argv, envp, &spawned, &err), 0);
  ck_assert_int_eq (pipe (pipefd), 0);
  middle = fork ();
  if (middle == 0)
    {
      /* Two quick grandchildren, then the middle exits: both become
         ours; one is adopted, the other is a stray.  */
      pid_t a = fork ();

      if (a == 0)
        _exit (3);
      pid_t b = fork ();
      if (b == 0)
        _exit (4);
      pid_t both[2] = { a, b };
      (void)!write (pipefd[1], both, sizeof (both));
      _exit (0);
    }
  ck_assert_int_eq (read (pipefd[0], orphans, sizeof (orphans)), (ssize_t)sizeof (orphans));
  ck_assert_int_eq (waitpid (middle, NULL, 0), middle);
  ck_assert_int_eq (sp_child_adopt (orphans[0], &adopted, &err), 0);
  for (int i = 0; i < 500 && !(is_zombie (orphans[1]) && is_zombie (spawned.pid) && is_zombie (orphans[0]));
       i++)
    usleep (10 * 1000);
  ck_assert (is_zombie (orphans[1]) && is_zombie (spawned.pid) && is_zombie (orphans[0]));

  ck_assert_uint_eq (sp_reap_strays (), 1);
  ck_assert (!is_zombie (orphans[1]) && kill (orphans[1], 0) == -1);
  /* The known ones are still there for their owners, with their statuses.  */
  ck_assert_int_eq (sp_child_wait (&spawned, 10000, &status, &err), 1);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 5);
  ck_assert_int_eq (sp_child_wait (&adopted, 10000, &status, &err), 1);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 3);
  ck_assert_uint_eq (sp_reap_strays (), 0);
  close (pipefd[0]);
  close (pipefd[1]);
}
END_TEST

START_TEST (an_orphan_of_a_subreaper_is_adopted_waited_and_killed)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_child adopted;
  int pipefd[2], status = 0;
  pid_t middle, orphans[2];

  ck_assert_int_eq (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  ck_assert_int_lt (sp_child_adopt (getppid (), &adopted, &err), 0);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "not this process's child"));
  sp_error_release (&err);
  ck_assert_int_eq (pipe (pipefd), 0);
  middle = fork ();
  if (middle == 0)
    {
      /* Two grandchildren, then the middle exits: both become ours.  */
      pid_t a = fork ();

      if (a == 0)
        {
          usleep (200 * 1000);
          _exit (7);
        }
      pid_t b = fork ();
      if (b == 0)
        for (;;)
          pause ();
      pid_t both[2] = { a, b };
      (void)!write (pipefd[1], both, sizeof (both));
      _exit (0);
    }
  ck_assert_int_eq (read (pipefd[0], orphans, sizeof (orphans)), (ssize_t)sizeof (orphans));
  ck_assert_int_eq (waitpid (middle, NULL, 0), middle);

  ck_assert_int_eq (sp_child_adopt (orphans[0], &adopted, &err), 0);
  ck_assert_int_eq (sp_child_wait (&adopted, 10000, &status, &err), 1);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 7);

  ck_assert_int_eq (sp_child_adopt (orphans[1], &adopted, &err), 0);
  ck_assert_int_eq (sp_child_wait (&adopted, 100, &status, &err), 0);
  sp_child_kill_and_reap (&adopted);
  ck_assert_int_eq (kill (orphans[1], 0), -1);
  close (pipefd[0]);
  close (pipefd[1]);
}
END_TEST

/* Runs sh -c script through sp_spawn_with with its stdout and stderr on a
   pipe, into out; returns its wait status.  */
static int
sh_with (const char *script, bool drop_capabilities)
{
  char *argv[] = { (char *)"sh", (char *)"-c", (char *)script, NULL };
  char *env[] = { (char *)"PATH=/usr/bin:/bin", NULL };
  cleanup_error sp_error_t err = NULL;
  struct sp_child child;
  int pipefd[2];
  size_t used = 0;
  ssize_t n;
  int status = -1;

  ck_assert_int_eq (pipe2 (pipefd, O_CLOEXEC), 0);
  ck_assert_msg (sp_spawn_with (SH, argv, env,
                                &(struct sp_spawn_options){ .input_fd = -1,
                                                            .output_fd = pipefd[1],
                                                            .output_stderr_too = true,
                                                            .root_dirfd = -1,
                                                            .drop_capabilities = drop_capabilities },
                                &child, &err)
                     == 0,
                 "%s", sp_error_message (err));
  close (pipefd[1]);
  while (used < sizeof (out) - 1 && (n = read (pipefd[0], out + used, sizeof (out) - 1 - used)) > 0)
    used += (size_t)n;
  out[used] = '\0';
  close (pipefd[0]);
  ck_assert_int_eq (sp_child_wait (&child, 10000, &status, &err), 1);
  return status;
}

/* input_fd becomes the child's stdin: what the parent writes into a pipe is
   what it reads, and its end is the pipe's end (runtimes hand a probe its
   stdin this way, docs/runtimes.md, "Interpreters started ahead").  */
START_TEST (with_options_input_fd_is_the_childs_stdin)
{
  char *argv[] = { (char *)"sh", (char *)"-c", (char *)"cat; echo end", NULL };
  char *env[] = { (char *)"PATH=/usr/bin:/bin", NULL };
  cleanup_error sp_error_t err = NULL;
  struct sp_child child;
  int in[2], outp[2];
  char buf[64];
  size_t used = 0;
  ssize_t n;
  int status = -1;

  ck_assert_int_eq (pipe2 (in, O_CLOEXEC), 0);
  ck_assert_int_eq (pipe2 (outp, O_CLOEXEC), 0);
  ck_assert_msg (
      sp_spawn_with (SH, argv, env,
                     &(struct sp_spawn_options){ .input_fd = in[0], .output_fd = outp[1], .root_dirfd = -1 },
                     &child, &err)
          == 0,
      "%s", sp_error_message (err));
  close (in[0]);
  close (outp[1]);
  ck_assert_int_eq (write (in[1], "given\n", 6), 6);
  close (in[1]);
  while (used < sizeof (buf) - 1 && (n = read (outp[0], buf + used, sizeof (buf) - 1 - used)) > 0)
    used += (size_t)n;
  buf[used] = '\0';
  close (outp[0]);
  ck_assert_int_eq (sp_child_wait (&child, 10000, &status, &err), 1);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  ck_assert_str_eq (buf, "given\nend\n");
}
END_TEST

START_TEST (with_options_stderr_joins_stdout_and_no_capability_survives_the_exec)
{
  static const char script[]
      = "echo to-stdout; echo to-stderr >&2; "
        "grep -E '^(CapPrm|CapEff|CapInh|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status";
  int status = sh_with (script, true);

  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  ck_assert_msg (strncmp (out, "to-stdout\nto-stderr\n", strlen ("to-stdout\nto-stderr\n")) == 0, "%s", out);
  for (const char *const *line
       = (const char *const[]){ "CapInh:\t0000000000000000\n", "CapPrm:\t0000000000000000\n",
                                "CapEff:\t0000000000000000\n", "CapBnd:\t0000000000000000\n",
                                "CapAmb:\t0000000000000000\n", "NoNewPrivs:\t1\n", NULL };
       *line != NULL; line++)
    ck_assert_msg (strstr (out, *line) != NULL, "no `%s` in:\n%s", *line, out);
  /* Control: without the option a root test keeps its bounding set.  */
  if (geteuid () == 0)
    {
      status = sh_with (script, false);
      ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
      ck_assert_msg (strstr (out, "CapBnd:\t0000000000000000\n") == NULL, "%s", out);
    }
}
END_TEST

START_TEST (with_options_the_child_runs_chrooted_into_the_tree)
{
  char tree[] = "/tmp/sp-spawn-root-XXXXXX";
  char *argv[] = { (char *)"sh", (char *)"-c", (char *)"exit 0", NULL };
  cleanup_error sp_error_t err = NULL;
  struct sp_child child;
  int status = -1;
  int rootfd;

  ck_assert_ptr_nonnull (mkdtemp (tree));
  rootfd = open (tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (rootfd, 0);
  /* /bin/sh is on the host, not in the empty tree: exec fails, named.  */
  ck_assert_int_eq (
      sp_spawn_with (SH, argv, no_env,
                     &(struct sp_spawn_options){ .input_fd = -1, .output_fd = -1, .root_dirfd = rootfd },
                     &child, &err),
      -1);
  ck_assert_int_eq (err->status, ENOENT);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), SH));
  ck_assert_int_eq (child.pid, -1);
  sp_error_release (&err);
  close (rootfd);
  ck_assert_int_eq (rmdir (tree), 0);
  /* Control: the same spawn without the chroot runs.  */
  ck_assert_int_eq (
      sp_spawn_with (SH, argv, no_env,
                     &(struct sp_spawn_options){ .input_fd = -1, .output_fd = -1, .root_dirfd = -1 }, &child,
                     &err),
      0);
  ck_assert_int_eq (sp_child_wait (&child, 10000, &status, &err), 1);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}
END_TEST

START_TEST (a_missing_binary_is_an_error_naming_it)
{
  char *argv[] = { (char *)"nope", NULL };
  cleanup_error sp_error_t err = NULL;
  cleanup_error sp_error_t err2 = NULL;
  struct sp_child child;
  size_t len;
  int status;

  ck_assert_int_eq (sp_spawn ("/nonexistent/sp-nope", argv, no_env, &child, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "/nonexistent/sp-nope"));
  ck_assert_int_eq (err->status, ENOENT);
  ck_assert_int_eq (child.pid, -1);
  ck_assert_int_eq (sp_spawn_capture ("relative/sh", argv, no_env, 1000, out, 10, &len, &status, &err2), -1);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("spawn");
  TCase *tc = tcase_create ("spawn");

  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, child_sees_only_fds_0_1_2_even_when_the_parent_leaks_one);
  tcase_add_test (tc, child_gets_exactly_the_given_environment);
  tcase_add_test (tc, stdin_and_stderr_are_dev_null);
  tcase_add_test (tc, child_runs_in_its_own_process_group_with_default_signals);
  tcase_add_test (tc, exit_status_and_signal_are_reported);
  tcase_add_test (tc, a_timeout_leaves_the_child_and_kill_and_reap_kills_its_whole_group);
  tcase_add_test (tc, capture_caps_and_kills_an_over_long_writer);
  tcase_add_test (tc, capture_of_exactly_cap_bytes_is_accepted);
  tcase_add_test (tc, capture_times_out_and_kills_a_silent_child);
  tcase_add_test (tc, an_orphan_of_a_subreaper_is_adopted_waited_and_killed);
  tcase_add_test (tc, strays_are_reaped_and_known_children_are_left_to_their_owner);
  tcase_add_test (tc, a_missing_binary_is_an_error_naming_it);
  tcase_add_test (tc, with_options_input_fd_is_the_childs_stdin);
  tcase_add_test (tc, with_options_stderr_joins_stdout_and_no_capability_survives_the_exec);
  tcase_add_test (tc, with_options_the_child_runs_chrooted_into_the_tree);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
