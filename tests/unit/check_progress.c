/* Staging's progress line (src/os/progress.h): number
   formats, each phase's line, the rate bound, a step drawn as it begins, a
   removal's count, the final line, cutting to the terminal's width,
   clearing, nothing at all when off, and the stop a signal asks for.  The renderer
   writes to a pipe here, with a clock the test moves.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "os/progress.h"

#include "sp_check.h"

#define MS 1000000ULL

static uint64_t fake_now;

static uint64_t
fake_clock (void)
{
  return fake_now;
}

/* A non-blocking pipe: [0] to read what was drawn, [1] for the renderer.  */
static void
open_pipe (int fds[2])
{
  ck_assert_int_eq (pipe2 (fds, O_NONBLOCK | O_CLOEXEC), 0);
}

/* Everything drawn so far, NUL-terminated.  */
static size_t
drain (int fd, char *buf, size_t size)
{
  size_t at = 0;

  for (;;)
    {
      ssize_t n = read (fd, buf + at, size - 1 - at);

      if (n <= 0)
        break;
      at += (size_t)n;
    }
  buf[at] = '\0';
  return at;
}

static size_t
count_char (const char *s, char c)
{
  size_t n = 0;

  for (; *s; s++)
    n += *s == c;
  return n;
}

static void
start (struct sp_progress *p, int fds[2], bool on, bool clear_eol, unsigned columns)
{
  open_pipe (fds);
  fake_now = 1000 * MS;
  sp_progress_init_with (p, fds[1], on, clear_eol, columns, fake_clock);
}

static const char *
bytes (uint64_t n)
{
  static char buf[SP_PROGRESS_NUMBER_MAX];

  return sp_progress_bytes (n, buf);
}

static const char *
duration (uint64_t ns)
{
  static char buf[SP_PROGRESS_NUMBER_MAX];

  return sp_progress_duration (ns, buf);
}

START_TEST (bytes_are_shown_in_binary_units_tenths_rounded_down)
{
  ck_assert_str_eq (bytes (0), "0 B");
  ck_assert_str_eq (bytes (1023), "1023 B");
  ck_assert_str_eq (bytes (1024), "1.0 KiB");
  ck_assert_str_eq (bytes (1536), "1.5 KiB");
  ck_assert_str_eq (bytes ((1ULL << 20) - 1), "1023.9 KiB");
  ck_assert_str_eq (bytes (1ULL << 20), "1.0 MiB");
  ck_assert_str_eq (bytes ((5ULL << 30) + (1ULL << 29)), "5.5 GiB");
  ck_assert_str_eq (bytes (3ULL << 40), "3.0 TiB");
  ck_assert_str_eq (bytes (1ULL << 60), "1.0 EiB");
  ck_assert_str_eq (bytes (UINT64_MAX), "15.9 EiB");
}
END_TEST

START_TEST (durations_are_tenths_of_seconds_then_minutes)
{
  ck_assert_str_eq (duration (0), "0.0 s");
  ck_assert_str_eq (duration (450 * MS), "0.4 s");
  ck_assert_str_eq (duration (59999 * MS), "59.9 s");
  ck_assert_str_eq (duration (60000 * MS), "1 min 0 s");
  ck_assert_str_eq (duration (3665000 * MS), "61 min 5 s");
}
END_TEST

START_TEST (each_unit_reads_as_documented)
{
  struct sp_progress p;
  char line[SP_PROGRESS_LINE_MAX];
  int fds[2];

  start (&p, fds, false, true, 0);
  sp_progress_repo (&p, "acme/big");
  ck_assert_uint_eq (sp_progress_format (&p, false, 0, line), strlen ("acme/big"));
  ck_assert_str_eq (line, "acme/big");
  sp_progress_phase (&p, "write the index", SP_PROGRESS_STEP, 0);
  sp_progress_format (&p, false, 0, line);
  ck_assert_str_eq (line, "acme/big: write the index");
  sp_progress_phase (&p, "write the tree", SP_PROGRESS_TREE, 0);
  sp_progress_add (&p, 1, 10);
  sp_progress_format (&p, false, 0, line);
  ck_assert_str_eq (line, "acme/big: write the tree: 1 file, 10 B");
  sp_progress_add (&p, 99999, 2048);
  sp_progress_format (&p, false, 0, line);
  ck_assert_str_eq (line, "acme/big: write the tree: 100000 files, 2.0 KiB");
  sp_progress_phase (&p, "check the gzip stream", SP_PROGRESS_BYTES, 0);
  sp_progress_add (&p, 0, 3 << 20);
  sp_progress_format (&p, false, 0, line);
  ck_assert_str_eq (line, "acme/big: check the gzip stream: 3.0 MiB");
  sp_progress_phase (&p, "download", SP_PROGRESS_DOWNLOAD, 0);
  sp_progress_set (&p, 0, 1536, 0);
  sp_progress_format (&p, false, 0, line);
  ck_assert_str_eq (line, "acme/big: download: 1.5 KiB");
  sp_progress_set (&p, 0, 1 << 20, 4 << 20);
  sp_progress_format (&p, false, 0, line);
  ck_assert_str_eq (line, "acme/big: download: 1.0 MiB of 4.0 MiB (25%)");
  sp_progress_set (&p, 0, 5 << 20, 4 << 20);
  sp_progress_format (&p, false, 0, line);
  ck_assert_str_eq (line, "acme/big: download: 5.0 MiB of 4.0 MiB (100%)");
  sp_progress_phase (&p, "list the objects", SP_PROGRESS_OBJECTS, 0);
  sp_progress_add (&p, 7, 0);
  sp_progress_format (&p, false, 0, line);
  ck_assert_str_eq (line, "acme/big: list the objects: 7 objects");
  sp_progress_phase (&p, "write the pack", SP_PROGRESS_OBJECTS, 100252);
  sp_progress_set (&p, 6747, 0, 100252);
  sp_progress_format (&p, false, 0, line);
  ck_assert_str_eq (line, "acme/big: write the pack: 6747 of 100252 objects");
}
END_TEST

START_TEST (off_writes_nothing_whatever_happens)
{
  struct sp_progress p;
  char out[4096];
  int fds[2];

  start (&p, fds, false, true, 80);
  sp_progress_repo (&p, "acme/big");
  sp_progress_phase (&p, "write the tree", SP_PROGRESS_TREE, 0);
  for (int i = 0; i < 1000; i++)
    {
      fake_now += 50 * MS;
      sp_progress_add (&p, 1, 100);
    }
  /* Only the rendering is off: the counters still count.  */
  ck_assert_uint_eq (p.count, 1000);
  sp_progress_done (&p);
  sp_progress_repo (&p, "acme/other");
  sp_progress_phase (&p, "digest", SP_PROGRESS_STEP, 0);
  sp_progress_clear (&p);
  ck_assert_uint_eq (drain (fds[0], out, sizeof (out)), 0);
}
END_TEST

START_TEST (a_pipe_or_dev_null_is_not_a_terminal_so_it_is_off)
{
  struct sp_progress p;
  int fds[2];
  int null = open ("/dev/null", O_WRONLY | O_CLOEXEC);

  open_pipe (fds);
  sp_progress_init (&p, fds[1]);
  ck_assert (!p.on);
  ck_assert_int_ge (null, 0);
  sp_progress_init (&p, null);
  ck_assert (!p.on);
}
END_TEST

START_TEST (redraws_come_at_most_once_per_interval)
{
  struct sp_progress p;
  static char out[1 << 20];
  int fds[2];

  start (&p, fds, true, true, 0);
  sp_progress_repo (&p, "acme/big");
  sp_progress_phase (&p, "write the tree", SP_PROGRESS_TREE, 0);
  drain (fds[0], out, sizeof (out));
  ck_assert_uint_eq (count_char (out, '\r'), 1); /* the first draw is at once */

  fake_now += 50 * MS;
  sp_progress_add (&p, 1, 1);
  fake_now += SP_PROGRESS_INTERVAL_MS * MS - 50 * MS - 1;
  sp_progress_add (&p, 1, 1);
  ck_assert_uint_eq (drain (fds[0], out, sizeof (out)), 0);
  fake_now += 1;
  sp_progress_add (&p, 1, 1);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\racme/big: write the tree: 3 files, 3 B\033[K");

  /* Ten seconds of work counting every millisecond: about 100 redraws, never
     more than one per interval, with counts that only grow.  */
  for (int i = 0; i < 10000; i++)
    {
      fake_now += MS;
      sp_progress_add (&p, 1, 1);
    }
  drain (fds[0], out, sizeof (out));
  ck_assert_uint_le (count_char (out, '\r'), 10000 / SP_PROGRESS_INTERVAL_MS);
  ck_assert_uint_ge (count_char (out, '\r'), 10000 / SP_PROGRESS_INTERVAL_MS - 1);
  {
    unsigned long long last = 0;

    for (char *s = strchr (out, '\r'); s != NULL; s = strchr (s + 1, '\r'))
      {
        unsigned long long n = strtoull (s + strlen ("\racme/big: write the tree: "), NULL, 10);

        ck_assert_uint_gt (n, last);
        last = n;
      }
  }
  /* A new phase that counts is no reason to draw sooner: its counts will.  */
  fake_now += 1;
  sp_progress_phase (&p, "list the objects", SP_PROGRESS_OBJECTS, 0);
  ck_assert_uint_eq (drain (fds[0], out, sizeof (out)), 0);
}
END_TEST

/* A step counts nothing, so no count would draw it later: drawn at once, or
   the previous phase's line would stand through the whole step.  */
START_TEST (a_step_is_drawn_as_it_begins_interval_or_not)
{
  struct sp_progress p;
  char out[4096];
  int fds[2];

  start (&p, fds, true, true, 0);
  sp_progress_repo (&p, "acme/big");
  sp_progress_phase (&p, "write the pack", SP_PROGRESS_OBJECTS, 10);
  drain (fds[0], out, sizeof (out));
  fake_now += 1;
  sp_progress_phase (&p, "normalize", SP_PROGRESS_STEP, 0);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\racme/big: normalize\033[K");
  /* And it restarts the interval: a count right after it waits.  */
  fake_now += 1;
  sp_progress_phase (&p, "remove the old objects", SP_PROGRESS_FILES, 0);
  sp_progress_add (&p, 1, 1);
  ck_assert_uint_eq (drain (fds[0], out, sizeof (out)), 0);
  fake_now += SP_PROGRESS_INTERVAL_MS * MS;
  sp_progress_add (&p, 1, 1);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\racme/big: remove the old objects: 2 files, 2 B\033[K");
}
END_TEST

/* unstage and a failed stage's removal: the run is the line's subject, and a
   removal's callback counts one file and its bytes per call.  */
START_TEST (a_removal_counts_files_under_its_run)
{
  struct sp_progress p;
  char out[4096];
  int fds[2];

  start (&p, fds, true, true, 0);
  sp_progress_repo (&p, "seeds/0123456789ab");
  sp_progress_phase (&p, "remove", SP_PROGRESS_FILES, 0);
  drain (fds[0], out, sizeof (out));
  for (int i = 0; i < 3; i++)
    sp_progress_count_file (&p, 1024);
  fake_now += SP_PROGRESS_INTERVAL_MS * MS;
  sp_progress_count_file (&p, 0);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\rseeds/0123456789ab: remove: 4 files, 3.0 KiB\033[K");
  sp_progress_count_file (NULL, 1);
  /* A leftover run may be named anything: quoted like a hostile repository.  */
  sp_progress_repo (&p, "seeds/run\n\033[2J");
  sp_progress_phase (&p, "remove", SP_PROGRESS_FILES, 0);
  fake_now += SP_PROGRESS_INTERVAL_MS * MS;
  sp_progress_count_file (&p, 0);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\rseeds/run\\x0a\\x1b[2J: remove: 1 file, 0 B\033[K");
}
END_TEST

/* The stop request: nothing until the flag is set, then the signal's name,
   whether the line is drawn or not; NULL and no flag never stop.  */
START_TEST (the_work_stops_once_a_signal_sets_the_flag)
{
  static volatile sig_atomic_t flag;
  struct sp_progress p;
  sp_error_t err = NULL;
  int fds[2];

  start (&p, fds, false, true, 0);
  ck_assert_int_eq (sp_progress_check (&p, &err), 0);
  flag = SIGINT;
  ck_assert_int_eq (sp_progress_check (&p, &err), 0);
  ck_assert_ptr_null (err);
  sp_progress_stop_on (&p, &flag);
  flag = 0;
  ck_assert_int_eq (sp_progress_stopped (&p), 0);
  ck_assert_int_eq (sp_progress_check (&p, &err), 0);
  flag = SIGTERM;
  ck_assert_int_eq (sp_progress_stopped (&p), SIGTERM);
  ck_assert_int_eq (sp_progress_check (&p, &err), -1);
  ck_assert_str_eq (sp_error_message (err), "interrupted by SIGTERM");
  sp_error_release (&err);
  /* init forgets the flag: only the caller that catches signals sets it.  */
  sp_progress_init_with (&p, fds[1], true, true, 0, fake_clock);
  ck_assert_int_eq (sp_progress_stopped (&p), 0);
  ck_assert_int_eq (sp_progress_stopped (NULL), 0);
  ck_assert_int_eq (sp_progress_check (NULL, &err), 0);
  flag = 0;
}
END_TEST

START_TEST (signals_are_named)
{
  char buf[SP_PROGRESS_SIGNAL_NAME_MAX];

  ck_assert_str_eq (sp_progress_signal_name (SIGINT, buf), "SIGINT");
  ck_assert_str_eq (sp_progress_signal_name (SIGTERM, buf), "SIGTERM");
  ck_assert_str_eq (sp_progress_signal_name (SIGHUP, buf), "SIGHUP");
  ck_assert_str_eq (sp_progress_signal_name (SIGUSR1, buf), "signal 10");
}
END_TEST

START_TEST (the_final_line_reports_the_tree_and_the_download)
{
  struct sp_progress p;
  char out[4096];
  int fds[2];

  start (&p, fds, true, true, 0);
  sp_progress_repo (&p, "acme/remote");
  sp_progress_phase (&p, "download", SP_PROGRESS_DOWNLOAD, 0);
  sp_progress_set (&p, 0, 2 << 20, 2 << 20);
  sp_progress_phase (&p, "check the gzip stream", SP_PROGRESS_BYTES, 0);
  sp_progress_add (&p, 0, 9 << 20);
  sp_progress_phase (&p, "extract", SP_PROGRESS_TREE, 0);
  sp_progress_add (&p, 3, 1536);
  sp_progress_phase (&p, "normalize", SP_PROGRESS_STEP, 0);
  drain (fds[0], out, sizeof (out));
  /* Drawn at once, interval or not, and ended by a newline.  */
  fake_now += 2500 * MS;
  sp_progress_done (&p);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\racme/remote: staged 3 files, 1.5 KiB, 2.0 MiB downloaded in 2.5 s\033[K\n");

  /* A local clone: no download; nothing is left of the last repository.  */
  sp_progress_repo (&p, "acme/big");
  sp_progress_phase (&p, "write the tree", SP_PROGRESS_TREE, 0);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\racme/big: write the tree: 0 files, 0 B\033[K");
  sp_progress_add (&p, 100000, 1 << 20);
  fake_now += 61 * 1000 * MS;
  sp_progress_done (&p);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\racme/big: staged 100000 files, 1.0 MiB in 1 min 1 s\033[K\n");
  /* Nothing live is left to clear.  */
  sp_progress_clear (&p);
  ck_assert_uint_eq (drain (fds[0], out, sizeof (out)), 0);
}
END_TEST

START_TEST (a_live_line_is_cut_to_the_terminal_width)
{
  struct sp_progress p;
  char out[4096];
  int fds[2];

  start (&p, fds, true, true, 20);
  sp_progress_repo (&p, "acme/a-long-repository-name");
  sp_progress_phase (&p, "write the tree", SP_PROGRESS_TREE, 0);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\racme/a-long-reposit\033[K");
  ck_assert_uint_eq (strlen ("acme/a-long-reposit"), 19);
  /* The final line is whole: it ends with a newline, so it may wrap.  */
  sp_progress_done (&p);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\racme/a-long-repository-name: staged 0 files, 0 B in 0.0 s\033[K\n");
}
END_TEST

START_TEST (clear_removes_the_live_line_once)
{
  struct sp_progress p;
  char out[4096];
  int fds[2];

  start (&p, fds, true, true, 0);
  sp_progress_clear (&p);
  ck_assert_uint_eq (drain (fds[0], out, sizeof (out)), 0);
  sp_progress_repo (&p, "acme/big");
  sp_progress_phase (&p, "digest", SP_PROGRESS_STEP, 0);
  drain (fds[0], out, sizeof (out));
  sp_progress_clear (&p);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\r\033[K");
  sp_progress_clear (&p);
  ck_assert_uint_eq (drain (fds[0], out, sizeof (out)), 0);
}
END_TEST

START_TEST (a_dumb_terminal_gets_spaces_instead_of_an_escape)
{
  const char *first = "acme/big: write the tree: 0 files, 0 B";
  const char *second = "acme/big: digest";
  struct sp_progress p;
  char out[4096], want[4096];
  int fds[2];

  start (&p, fds, true, false, 0);
  sp_progress_repo (&p, "acme/big");
  sp_progress_phase (&p, "write the tree", SP_PROGRESS_TREE, 0);
  drain (fds[0], out, sizeof (out));
  snprintf (want, sizeof (want), "\r%s", first);
  ck_assert_str_eq (out, want);
  /* The shorter line is padded over the longer one.  */
  fake_now += SP_PROGRESS_INTERVAL_MS * MS;
  sp_progress_phase (&p, "digest", SP_PROGRESS_STEP, 0);
  drain (fds[0], out, sizeof (out));
  snprintf (want, sizeof (want), "\r%s%*s", second, (int)(strlen (first) - strlen (second)), "");
  ck_assert_str_eq (out, want);
  sp_progress_clear (&p);
  drain (fds[0], out, sizeof (out));
  snprintf (want, sizeof (want), "\r%*s\r", (int)strlen (second), "");
  ck_assert_str_eq (out, want);
  ck_assert (strchr (out, '\033') == NULL);
}
END_TEST

START_TEST (a_hostile_name_reaches_the_terminal_quoted)
{
  struct sp_progress p;
  char out[4096];
  int fds[2];

  start (&p, fds, true, true, 0);
  sp_progress_repo (&p, "acme/x\033[2J\nforged");
  sp_progress_phase (&p, "digest", SP_PROGRESS_STEP, 0);
  drain (fds[0], out, sizeof (out));
  ck_assert_str_eq (out, "\racme/x\\x1b[2J\\x0aforged: digest\033[K");
}
END_TEST

START_TEST (a_failed_write_turns_it_off_and_nothing_else)
{
  struct sp_progress p;
  int fds[2];

  signal (SIGPIPE, SIG_IGN);
  start (&p, fds, true, true, 0);
  close (fds[0]);
  sp_progress_repo (&p, "acme/big");
  sp_progress_phase (&p, "write the tree", SP_PROGRESS_TREE, 0);
  ck_assert (!p.on);
  sp_progress_add (&p, 5, 5);
  sp_progress_done (&p);
  ck_assert_uint_eq (p.files, 5);
}
END_TEST

START_TEST (null_is_a_silent_no_op)
{
  sp_progress_add (NULL, 1, 1);
  sp_progress_set (NULL, 1, 1, 1);
  sp_progress_repo (NULL, "acme/big");
  sp_progress_phase (NULL, "digest", SP_PROGRESS_STEP, 0);
  sp_progress_tick (NULL);
  sp_progress_done (NULL);
  sp_progress_clear (NULL);
}
END_TEST

static Suite *
progress_suite (void)
{
  Suite *s = suite_create ("progress");
  TCase *tc = tcase_create ("progress");

  tcase_add_test (tc, bytes_are_shown_in_binary_units_tenths_rounded_down);
  tcase_add_test (tc, durations_are_tenths_of_seconds_then_minutes);
  tcase_add_test (tc, each_unit_reads_as_documented);
  tcase_add_test (tc, off_writes_nothing_whatever_happens);
  tcase_add_test (tc, a_pipe_or_dev_null_is_not_a_terminal_so_it_is_off);
  tcase_add_test (tc, redraws_come_at_most_once_per_interval);
  tcase_add_test (tc, a_step_is_drawn_as_it_begins_interval_or_not);
  tcase_add_test (tc, a_removal_counts_files_under_its_run);
  tcase_add_test (tc, the_work_stops_once_a_signal_sets_the_flag);
  tcase_add_test (tc, signals_are_named);
  tcase_add_test (tc, the_final_line_reports_the_tree_and_the_download);
  tcase_add_test (tc, a_live_line_is_cut_to_the_terminal_width);
  tcase_add_test (tc, clear_removes_the_live_line_once);
  tcase_add_test (tc, a_dumb_terminal_gets_spaces_instead_of_an_escape);
  tcase_add_test (tc, a_hostile_name_reaches_the_terminal_quoted);
  tcase_add_test (tc, a_failed_write_turns_it_off_and_nothing_else);
  tcase_add_test (tc, null_is_a_silent_no_op);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (progress_suite)
