/* The state directory's one owner (state_lock.h): a second taker is refused
   at once, naming the first; the question "who holds it" takes nothing and
   writes nothing; the lock goes when its holder dies, kill -9 included, and
   with a release; a lock file that is not a plain file of the owner's is
   refused.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/state_lock.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

static char top[64];
static int top_fd = -1;

static void
setup (void)
{
  strcpy (top, "/tmp/sp-state-lock-XXXXXX");
  top_fd = sp_tmpdir_make (top);
}

static void
teardown (void)
{
  sp_closep (&top_fd);
  sp_tmpdir_remove (top);
}

/* A child that takes the lock as verb, says so on a pipe, and waits to be
   killed.  */
static pid_t
holder_child (const char *verb)
{
  int ready[2];
  pid_t pid;
  char c;

  ck_assert_int_eq (pipe2 (ready, O_CLOEXEC), 0);
  pid = fork ();
  ck_assert_int_ge (pid, 0);
  if (pid == 0)
    {
      sp_error_t err = NULL;
      int fd = -1;

      if (sp_state_lock_take (top_fd, top, verb, &fd, &err) < 0)
        _exit (3);
      (void)!write (ready[1], "x", 1);
      for (;;)
        pause ();
    }
  close (ready[1]);
  ck_assert_int_eq (read (ready[0], &c, 1), 1);
  close (ready[0]);
  return pid;
}

static void
kill_and_reap (pid_t pid)
{
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
}

START_TEST (a_second_taker_is_refused_at_once_naming_the_holder)
{
  cleanup_error sp_error_t err = NULL;
  pid_t pid = holder_child ("serve");
  int fd = -1;
  char want[64];

  ck_assert_int_eq (sp_state_lock_take (top_fd, top, "unstage", &fd, &err), -1);
  ck_assert_int_eq (fd, -1);
  snprintf (want, sizeof (want), "is in use by `serve` (pid %ld)", (long)pid);
  ck_assert_msg (strstr (sp_error_message (err), want) != NULL, "%s", sp_error_message (err));
  ck_assert_msg (strstr (sp_error_message (err), top) != NULL, "%s", sp_error_message (err));
  kill_and_reap (pid);
}
END_TEST

START_TEST (the_holder_is_named_to_a_reader_without_taking_anything)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_state_owner owner;
  pid_t pid = holder_child ("stage");
  struct stat before, after;

  ck_assert_int_eq (fstatat (top_fd, SP_STATE_LOCK_FILE, &before, 0), 0);
  ck_assert_int_eq (sp_state_lock_holder (top_fd, &owner, &err), 1);
  ck_assert (owner.known);
  ck_assert_str_eq (owner.verb, "stage");
  ck_assert_int_eq (owner.pid, pid);
  ck_assert_int_eq (fstatat (top_fd, SP_STATE_LOCK_FILE, &after, 0), 0);
  ck_assert_int_eq (before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
  ck_assert_int_eq (before.st_size, after.st_size);
  kill_and_reap (pid);
}
END_TEST

START_TEST (a_holder_killed_with_sigkill_leaves_the_directory_free)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_state_owner owner;
  pid_t pid = holder_child ("serve");
  int fd = -1;

  kill_and_reap (pid);
  ck_assert_int_eq (sp_state_lock_holder (top_fd, &owner, &err), 0);
  ck_assert_int_eq (sp_state_lock_take (top_fd, top, "serve", &fd, &err), 0);
  ck_assert_int_ge (fd, 0);
  sp_state_lock_release (top_fd, &fd);
  ck_assert_int_eq (fd, -1);
}
END_TEST

START_TEST (a_release_frees_it_and_leaves_no_file)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_state_owner owner;
  struct stat st;
  int fd = -1, again = -1;

  ck_assert_int_eq (sp_state_lock_take (top_fd, top, "check", &fd, &err), 0);
  ck_assert_int_eq (fstatat (top_fd, SP_STATE_LOCK_FILE, &st, 0), 0);
  ck_assert_int_eq (st.st_mode & 0777, 0600);
  sp_state_lock_release (top_fd, &fd);
  ck_assert_int_eq (fstatat (top_fd, SP_STATE_LOCK_FILE, &st, 0), -1);
  ck_assert_int_eq (errno, ENOENT);
  ck_assert_int_eq (sp_state_lock_holder (top_fd, &owner, &err), 0);
  ck_assert_int_eq (sp_state_lock_take (top_fd, top, "serve", &again, &err), 0);
  sp_state_lock_release (top_fd, &again);
}
END_TEST

/* The releasing holder unlinks its file while it still holds it: a taker
   that opened the old file just before locks a file nobody names, and must
   not count it as the lock.  */
START_TEST (a_taker_of_a_released_holders_file_tries_the_new_one)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_close int stale = -1;
  struct flock whole = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
  int first = -1, second = -1, third = -1;

  ck_assert_int_eq (sp_state_lock_take (top_fd, top, "serve", &first, &err), 0);
  stale = openat (top_fd, SP_STATE_LOCK_FILE, O_RDWR | O_CLOEXEC);
  ck_assert_int_ge (stale, 0);
  sp_state_lock_release (top_fd, &first);
  /* The old file is free now, and named by nobody: locking it proves
     nothing; a real taker makes and takes a new one.  */
  ck_assert_int_eq (fcntl (stale, F_OFD_SETLK, &whole), 0);
  ck_assert_int_eq (sp_state_lock_take (top_fd, top, "stage", &second, &err), 0);
  ck_assert_int_eq (sp_state_lock_take (top_fd, top, "unstage", &third, &err), -1);
  ck_assert_int_eq (third, -1);
  sp_state_lock_release (top_fd, &second);
}
END_TEST

START_TEST (a_directory_never_locked_is_free_and_stays_untouched)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_state_owner owner;
  struct stat st;

  ck_assert_int_eq (sp_state_lock_holder (top_fd, &owner, &err), 0);
  ck_assert_int_eq (fstatat (top_fd, SP_STATE_LOCK_FILE, &st, 0), -1);
  ck_assert_int_eq (errno, ENOENT);
}
END_TEST

START_TEST (a_lock_file_that_is_a_symlink_or_a_directory_is_refused)
{
  cleanup_error sp_error_t err = NULL;
  int fd = -1;

  ck_assert_int_eq (symlinkat ("/etc/passwd", top_fd, SP_STATE_LOCK_FILE), 0);
  ck_assert_int_eq (sp_state_lock_take (top_fd, top, "serve", &fd, &err), -1);
  sp_error_release (&err);
  ck_assert_int_eq (unlinkat (top_fd, SP_STATE_LOCK_FILE, 0), 0);
  ck_assert_int_eq (mkdirat (top_fd, SP_STATE_LOCK_FILE, 0700), 0);
  ck_assert_int_eq (sp_state_lock_take (top_fd, top, "serve", &fd, &err), -1);
  ck_assert_int_eq (fd, -1);
}
END_TEST

START_TEST (content_that_names_no_holder_is_said_as_another_process)
{
  struct sp_state_owner owner = { .known = false };
  char buf[64];

  sp_state_owner_describe (&owner, buf, sizeof (buf));
  ck_assert_str_eq (buf, "another process");
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("state_lock");
  TCase *tc = tcase_create ("state_lock");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, a_second_taker_is_refused_at_once_naming_the_holder);
  tcase_add_test (tc, the_holder_is_named_to_a_reader_without_taking_anything);
  tcase_add_test (tc, a_holder_killed_with_sigkill_leaves_the_directory_free);
  tcase_add_test (tc, a_release_frees_it_and_leaves_no_file);
  tcase_add_test (tc, a_taker_of_a_released_holders_file_tries_the_new_one);
  tcase_add_test (tc, a_directory_never_locked_is_free_and_stays_untouched);
  tcase_add_test (tc, a_lock_file_that_is_a_symlink_or_a_directory_is_refused);
  tcase_add_test (tc, content_that_names_no_holder_is_said_as_another_process);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
