/* A sandbox's cgroup statistics (cgroup_stats.h): strict parsing on fake v1
   and v2 trees, path checks, and, as root on a v1 host, a real memory and
   cpuacct cgroup with a child that allocates and burns CPU, and one that
   the OOM killer kills.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "runtimes/cgroup_stats.h"

#include "sp_check.h"
#include "sp_tmpdir.h"

#define CG "/sealed-probe/run1-inv1"

static char top[64];
static int top_fd = -1;

static void
put (const char *rel, const char *content)
{
  char path[512];
  char *slash;
  int fd;

  /* mkdir -p of the parents.  */
  snprintf (path, sizeof (path), "%s", rel);
  for (slash = strchr (path, '/'); slash; slash = strchr (slash + 1, '/'))
    {
      *slash = '\0';
      ck_assert (mkdirat (top_fd, path, 0755) == 0 || errno == EEXIST);
      *slash = '/';
    }
  fd = openat (top_fd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, content, strlen (content)), (ssize_t)strlen (content));
  close (fd);
}

static void
setup (void)
{
  strcpy (top, "/tmp/sp-cgstats-XXXXXX");
  top_fd = sp_tmpdir_make (top);
}

static void
teardown (void)
{
  close (top_fd);
  sp_tmpdir_remove (top);
}

static void
fake_v1 (void)
{
  put ("memory" CG "/memory.max_usage_in_bytes", "123456\n");
  put ("memory" CG "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  put ("cpuacct" CG "/cpuacct.usage", "987654321\n");
}

static void
fake_v2 (void)
{
  put ("cgroup.controllers", "cpu memory pids\n");
  put ("sealed-probe/run1-inv1/memory.peak", "4096\n");
  put ("sealed-probe/run1-inv1/memory.events", "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n");
  put ("sealed-probe/run1-inv1/cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n");
}

START_TEST (v1_files_are_read)
{
  struct sp_cgroup_stats st = { 0 };
  cleanup_error sp_error_t err = NULL;

  fake_v1 ();
  ck_assert_msg (sp_cgroup_stats_read_under (top, CG, &st, &err) == 0, "%s", sp_error_message (err));
  ck_assert_uint_eq (st.peak_memory_bytes, 123456);
  ck_assert_uint_eq (st.oom_kills, 2);
  ck_assert_uint_eq (st.cpu_ns, 987654321);
}
END_TEST

START_TEST (v2_files_are_read_and_usec_becomes_ns)
{
  struct sp_cgroup_stats st = { 0 };
  cleanup_error sp_error_t err = NULL;

  fake_v2 ();
  ck_assert_msg (sp_cgroup_stats_read_under (top, CG, &st, &err) == 0, "%s", sp_error_message (err));
  ck_assert_uint_eq (st.peak_memory_bytes, 4096);
  ck_assert_uint_eq (st.oom_kills, 1);
  ck_assert_uint_eq (st.cpu_ns, 1500000);
}
END_TEST

/* file, content: each must be refused with an error naming the file.  */
static const char *const malformed[][2] = {
  { "memory" CG "/memory.max_usage_in_bytes", "12x\n" },
  { "memory" CG "/memory.max_usage_in_bytes", "" },
  { "memory" CG "/memory.max_usage_in_bytes", "-1\n" },
  { "memory" CG "/memory.max_usage_in_bytes", " 1\n" },
  { "memory" CG "/memory.max_usage_in_bytes", "01\n" },
  { "memory" CG "/memory.max_usage_in_bytes", "12" },
  { "memory" CG "/memory.max_usage_in_bytes", "12\n\n" },
  { "memory" CG "/memory.max_usage_in_bytes", "18446744073709551616\n" },
  { "memory" CG "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n" },
  { "memory" CG "/memory.oom_control", "oom_kill 1\noom_kill 1\n" },
  { "memory" CG "/memory.oom_control", "oom_kill\n" },
  { "memory" CG "/memory.oom_control", "oom_kill 1" },
  { "memory" CG "/memory.oom_control", "oom_kill  1\n" },
  { "cpuacct" CG "/cpuacct.usage", "1e9\n" },
};

START_TEST (v1_malformed_values_are_errors_naming_the_file)
{
  struct sp_cgroup_stats st = { 7, 7, 7 };
  cleanup_error sp_error_t err = NULL;
  const char *file = malformed[_i][0];

  fake_v1 ();
  put (file, malformed[_i][1]);
  ck_assert_int_eq (sp_cgroup_stats_read_under (top, CG, &st, &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), strrchr (file, '/')) != NULL, "case %d: %s", _i,
                 sp_error_message (err));
  ck_assert_uint_eq (st.peak_memory_bytes, 7);
}
END_TEST

START_TEST (v2_malformed_values_are_errors_naming_the_file)
{
  static const char *const cases[][2] = {
    { "sealed-probe/run1-inv1/memory.peak", "max\n" },
    { "sealed-probe/run1-inv1/memory.events", "low 0\nhigh 0\n" },
    { "sealed-probe/run1-inv1/cpu.stat", "usage_usec 18446744073709552\n" }, /* overflows as ns */
    { "sealed-probe/run1-inv1/cpu.stat", "Usage_usec 1\n" },
  };
  struct sp_cgroup_stats st = { 0 };
  cleanup_error sp_error_t err = NULL;

  fake_v2 ();
  put (cases[_i][0], cases[_i][1]);
  ck_assert_int_eq (sp_cgroup_stats_read_under (top, CG, &st, &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), strrchr (cases[_i][0], '/')) != NULL, "case %d: %s", _i,
                 sp_error_message (err));
}
END_TEST

START_TEST (an_over_long_file_is_an_error)
{
  static char big[8192];
  struct sp_cgroup_stats st = { 0 };
  cleanup_error sp_error_t err = NULL;

  fake_v1 ();
  for (size_t i = 0; i + 1 < sizeof (big); i += 8)
    memcpy (big + i, "under 0\n", 8);
  big[sizeof (big) - 1] = '\0';
  put ("memory" CG "/memory.oom_control", big);
  ck_assert_int_eq (sp_cgroup_stats_read_under (top, CG, &st, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "memory.oom_control"));
}
END_TEST

START_TEST (a_missing_file_is_an_error_naming_it)
{
  struct sp_cgroup_stats st = { 0 };
  cleanup_error sp_error_t err = NULL;
  cleanup_error sp_error_t err2 = NULL;

  fake_v1 ();
  ck_assert_int_eq (unlinkat (top_fd, "cpuacct" CG "/cpuacct.usage", 0), 0);
  ck_assert_int_eq (sp_cgroup_stats_read_under (top, CG, &st, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "cpuacct" CG "/cpuacct.usage"));
  ck_assert_int_eq (err->status, ENOENT);
  /* A missing cgroup likewise.  */
  ck_assert_int_eq (sp_cgroup_stats_read_under (top, "/sealed-probe/other", &st, &err2), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err2), "/sealed-probe/other/"));
}
END_TEST

START_TEST (bad_cgroup_paths_are_refused)
{
  static const char *const bad[]
      = { "", "/", "relative/x", "/a/../b", "/..", "/a//b", "/a/", "/a/./b", "//a", "/a/\n" };
  struct sp_cgroup_stats st = { 0 };

  fake_v1 ();
  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      cleanup_error sp_error_t err = NULL;

      ck_assert_msg (sp_cgroup_stats_read_under (top, bad[i], &st, &err) == -1, "accepted `%s`", bad[i]);
      ck_assert_int_eq (err->status, 0);
    }
}
END_TEST

START_TEST (a_symlink_in_the_cgroup_path_is_refused)
{
  struct sp_cgroup_stats st = { 0 };
  cleanup_error sp_error_t err = NULL;

  fake_v1 ();
  ck_assert_int_eq (symlinkat ("run1-inv1", top_fd, "memory/sealed-probe/link"), 0);
  ck_assert_int_eq (symlinkat ("run1-inv1", top_fd, "cpuacct/sealed-probe/link"), 0);
  ck_assert_int_eq (sp_cgroup_stats_read_under (top, "/sealed-probe/link", &st, &err), -1);
  ck_assert_int_eq (err->status, ELOOP);
}
END_TEST

/* Real v1 cgroups, as root.  */

#define REAL_MEM "/sys/fs/cgroup/memory"
#define REAL_CPU "/sys/fs/cgroup/cpuacct"
static char cg_name[64];

static void
write_file (const char *path, const char *s)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  ck_assert_msg (fd >= 0, "open %s: %s", path, strerror (errno));
  ck_assert_msg (write (fd, s, strlen (s)) == (ssize_t)strlen (s), "write %s: %s", path, strerror (errno));
  close (fd);
}

static void
real_setup (void)
{
  char path[256];

  snprintf (cg_name, sizeof (cg_name), "sp-check-cgstats-%d", (int)getpid ());
  snprintf (path, sizeof (path), REAL_MEM "/%s", cg_name);
  ck_assert_msg (mkdir (path, 0755) == 0, "mkdir %s: %s", path, strerror (errno));
  snprintf (path, sizeof (path), REAL_CPU "/%s", cg_name);
  ck_assert_msg (mkdir (path, 0755) == 0, "mkdir %s: %s", path, strerror (errno));
}

static void
real_teardown (void)
{
  char path[256];

  /* The child has been reaped by now: the cgroups are empty.  */
  snprintf (path, sizeof (path), REAL_MEM "/%s", cg_name);
  rmdir (path);
  snprintf (path, sizeof (path), REAL_CPU "/%s", cg_name);
  rmdir (path);
}

/* Forks a child that joins both cgroups, touches mib MiB and burns cpu_ms of
   CPU; returns its wait status.  */
static int
run_in_cgroup (size_t mib, int cpu_ms)
{
  pid_t pid = fork ();
  int status = 0;

  ck_assert_int_ge (pid, 0);
  if (pid == 0)
    {
      char path[256];
      struct timespec a, b;
      volatile unsigned long spin = 0;
      char *mem;
      int fd;

      for (int i = 0; i < 2; i++)
        {
          snprintf (path, sizeof (path), "%s/%s/cgroup.procs", i ? REAL_CPU : REAL_MEM, cg_name);
          fd = open (path, O_WRONLY | O_CLOEXEC);
          if (fd < 0 || write (fd, "0", 1) != 1)
            _exit (90);
          close (fd);
        }
      mem = mmap (NULL, mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (mem == MAP_FAILED)
        _exit (91);
      for (size_t off = 0; off < (mib << 20); off += 4096)
        mem[off] = 1;
      clock_gettime (CLOCK_THREAD_CPUTIME_ID, &a);
      do
        {
          for (int i = 0; i < 100000; i++)
            spin++;
          clock_gettime (CLOCK_THREAD_CPUTIME_ID, &b);
        }
      while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < cpu_ms);
      _exit (0);
    }
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  return status;
}

START_TEST (a_real_v1_cgroup_records_peak_memory_and_cpu)
{
  struct sp_cgroup_stats st = { 0 };
  cleanup_error sp_error_t err = NULL;
  char cg[128];
  int status = run_in_cgroup (48, 200);

  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "child status 0x%x", status);
  snprintf (cg, sizeof (cg), "/%s", cg_name);
  ck_assert_msg (sp_cgroup_stats_read (cg, &st, &err) == 0, "%s", sp_error_message (err));
  ck_assert_uint_ge (st.peak_memory_bytes, 48ULL << 20);
  ck_assert_uint_ge (st.cpu_ns, 150ULL * 1000 * 1000);
  ck_assert_uint_eq (st.oom_kills, 0);
}
END_TEST

START_TEST (a_real_v1_cgroup_counts_an_oom_kill)
{
  struct sp_cgroup_stats st = { 0 };
  cleanup_error sp_error_t err = NULL;
  char path[256];
  char cg[128];
  int status;

  snprintf (path, sizeof (path), REAL_MEM "/%s/memory.limit_in_bytes", cg_name);
  write_file (path, "16777216");
  snprintf (path, sizeof (path), REAL_MEM "/%s/memory.memsw.limit_in_bytes", cg_name);
  if (access (path, F_OK) == 0)
    write_file (path, "16777216");
  status = run_in_cgroup (64, 0);
  ck_assert_msg (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL, "child status 0x%x", status);
  snprintf (cg, sizeof (cg), "/%s", cg_name);
  ck_assert_msg (sp_cgroup_stats_read (cg, &st, &err) == 0, "%s", sp_error_message (err));
  ck_assert_uint_ge (st.oom_kills, 1);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("cgroup_stats");
  TCase *fake = tcase_create ("fake");
  TCase *real = tcase_create ("real");
  struct stat st;

  tcase_add_checked_fixture (fake, setup, teardown);
  tcase_add_test (fake, v1_files_are_read);
  tcase_add_test (fake, v2_files_are_read_and_usec_becomes_ns);
  tcase_add_loop_test (fake, v1_malformed_values_are_errors_naming_the_file, 0,
                       sizeof (malformed) / sizeof (malformed[0]));
  tcase_add_loop_test (fake, v2_malformed_values_are_errors_naming_the_file, 0, 4);
  tcase_add_test (fake, an_over_long_file_is_an_error);
  tcase_add_test (fake, a_missing_file_is_an_error_naming_it);
  tcase_add_test (fake, bad_cgroup_paths_are_refused);
  tcase_add_test (fake, a_symlink_in_the_cgroup_path_is_refused);
  suite_add_tcase (s, fake);

  /* TAP has no per-test skip through check: say why on a comment line.  */
  if (geteuid () != 0)
    printf ("# SKIP real cgroup tests: need root to create cgroups\n");
  else if (stat (REAL_MEM, &st) < 0 || stat (REAL_CPU, &st) < 0)
    printf ("# SKIP real cgroup tests: no v1 memory and cpuacct hierarchies under /sys/fs/cgroup\n");
  else
    {
      tcase_add_checked_fixture (real, real_setup, real_teardown);
      tcase_set_timeout (real, 30);
      tcase_add_test (real, a_real_v1_cgroup_records_peak_memory_and_cpu);
      tcase_add_test (real, a_real_v1_cgroup_counts_an_oom_kill);
      suite_add_tcase (s, real);
    }
  return s;
}

SP_CHECK_MAIN (make_suite)
