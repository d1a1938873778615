/* The OCI runtime command-line driver shared by runc and runsc
   (oci_cli.h, docs/runtimes.md).  Every run of this proxy keeps its
   containers' state under its own --root, <state>/<runtime>/<run>, so that
   orphan cleanup finds another run's leftovers by directory name alone.
   After verify and prepare, the struct is only read: run and kill may be
   called from any thread.  */
#define _GNU_SOURCE
#include "runtimes/oci_cli.h"

#include "runtimes/binary_check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/clock.h" /* SP_BUNDLE_CGROUP_PARENT only: the bundle library is not linked */
#include "bundle/bundle.h"
#include "os/dir_names.h"
#include "os/fileio.h"
#include "os/spawn.h"
#include "runtimes/cgroup_stats.h"
#include "text/json.h"
#include "text/yajl_util.h"

#define VERSION_TIMEOUT_MS (10 * 1000)
/* kill, start and delete: each is given this long.  */
#define COMMAND_TIMEOUT_MS (10 * 1000)
/* create: namespaces, mounts and cgroups (and for runsc, a whole sandbox
   kernel), on a machine that may be busy.  */
#define CREATE_TIMEOUT_MS (60 * 1000)
/* A helper `create` left behind (runsc's gofer): how long it gets to leave
   once the sandbox is gone, before it is killed.  */
#define HELPER_EXIT_MS (5 * 1000)
/* Orphan cgroups: how long their killed processes get to leave.  */
#define CGROUP_DRAIN_MS     2000
#define CGROUP_DRAIN_NAP_MS 10
#define CGROUP_PROCS_MAX    (256 * 1024)
/* An earlier run's container: how often its removal is tried, and how far
   apart (delete_orphan).  */
#define ORPHAN_DELETE_TRIES  3
#define ORPHAN_DELETE_NAP_MS 1000
/* A reaped container's cgroup: how long it may still be busy.  */
#define REMOVE_BUSY_MS 200
/* "sp-" <run> "-" <invocation>.  */
#define CONTAINER_ID_MAX (3 + SP_ID_MAX_CHARS + 1 + SP_ID_MAX_CHARS)
/* runc's fifo in <root>/<id>/ that a created container's init waits on.  */
#define EXEC_FIFO_NAME "exec.fifo"
/* A --root holds runc's <id>/ with state.json and exec.fifo, or runsc's
   <id>_sandbox:<id>.state and .lock: shallow.  */
#define STATE_TREE_MAX_DEPTH 4
/* runc's <root>/<id>/: state.json and the exec fifo, no directories.  */
#define CONTAINER_DIR_MAX_DEPTH 1
/* The longest command line: binary, --root ROOT, the flags, a verb's own
   words (create's six) and the NULL.  */
#define ARGV_MAX (3 + OCI_CLI_FLAGS_MAX + 8)

static int remove_tree_at (int dirfd, const char *name, int depth);

static char *const runtime_env[] = { (char *)"PATH=" SP_RUNTIME_SEARCH_PATH, NULL };

/* "sp-" then id characters: what runc is ever given as a container id, so
   that nothing starting with `-` reaches its argv.  */
static int
container_id_check (const char *id)
{
  size_t len = strlen (id);

  if (len < 4 || len > CONTAINER_ID_MAX || strncmp (id, "sp-", 3) != 0)
    return -1;
  for (size_t i = 3; i < len; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
      return -1;
  return 0;
}

static void
describe_status (int status, char *buf, size_t size)
{
  if (WIFEXITED (status))
    snprintf (buf, size, "exited with status %d", WEXITSTATUS (status));
  else if (WIFSIGNALED (status))
    snprintf (buf, size, "was killed by signal %d", WTERMSIG (status));
  else
    snprintf (buf, size, "ended with wait status 0x%x", (unsigned)status);
}

/* binary --root ROOT FLAGS... WORDS...: every command line this driver
   execs is built here, and describe shows what it builds.  */
static void
command_line (const struct oci_cli *r, const char *root, char *const words[], char *argv[ARGV_MAX])
{
  size_t n = 0;

  argv[n++] = r->binary;
  argv[n++] = (char *)"--root";
  argv[n++] = (char *)root;
  for (size_t i = 0; r->flags[i] != NULL; i++)
    argv[n++] = r->flags[i];
  for (size_t i = 0; words[i] != NULL && n < ARGV_MAX - 1; i++)
    argv[n++] = words[i];
  argv[n] = NULL;
}

/* The words of each verb after the global flags.  */
#define KILL_WORDS(id)                                                                                       \
  {                                                                                                          \
    (char *)"kill", (char *)(id), (char *)"KILL", NULL                                                       \
  }
#define DELETE_WORDS(id)                                                                                     \
  {                                                                                                          \
    (char *)"delete", (char *)"--force", (char *)(id), NULL                                                  \
  }
#define START_WORDS(id)                                                                                      \
  {                                                                                                          \
    (char *)"start", (char *)(id), NULL                                                                      \
  }
#define CREATE_WORDS(bundle, pid_file, id)                                                                   \
  {                                                                                                          \
    (char *)"create", (char *)"--bundle", (char *)(bundle), (char *)"--pid-file", (char *)(pid_file),        \
        (char *)(id), NULL                                                                                   \
  }

/* Runs one short command to completion within COMMAND_TIMEOUT_MS; anything
   but exit 0 is an error naming what.  */
static int
runtime_bounded (const char *binary, char *const argv[], const char *what, bool *spawned, sp_error_t *err)
{
  struct sp_child child;
  int status = 0;
  int ret;
  char desc[64];

  if (sp_spawn (binary, argv, runtime_env, &child, err) < 0)
    return sp_error_wrap (err, "%s", what);
  if (spawned != NULL)
    *spawned = true;
  ret = sp_child_wait (&child, COMMAND_TIMEOUT_MS, &status, err);
  if (ret <= 0)
    {
      sp_child_kill_and_reap (&child);
      if (ret < 0)
        return sp_error_wrap (err, "%s", what);
      return sp_make_error (err, 0, "%s: did not finish within %d s", what, COMMAND_TIMEOUT_MS / 1000);
    }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      describe_status (status, desc, sizeof (desc));
      return sp_make_error (err, 0, "%s: `%s` %s", what, binary, desc);
    }
  return 0;
}

/* One short verb on a container (kill, delete), bounded; what names it in
   an error.  */
static int
container_verb (const struct oci_cli *r, const char *root, char *const words[], const char *id,
                sp_error_t *err)
{
  char what[64 + CONTAINER_ID_MAX];
  char *argv[ARGV_MAX];

  command_line (r, root, words, argv);
  snprintf (what, sizeof (what), "%s %s `%s`", r->flavor->binary_name, words[0], id);
  return runtime_bounded (r->binary, argv, what, NULL, err);
}

static int
kill_id (const struct oci_cli *r, const char *root, const char *id, sp_error_t *err)
{
  char *words[] = KILL_WORDS (id);

  return container_verb (r, root, words, id, err);
}

static int
delete_id (const struct oci_cli *r, const char *root, const char *id, sp_error_t *err)
{
  char *words[] = DELETE_WORDS (id);

  return container_verb (r, root, words, id, err);
}

void
oci_cli_close (struct sp_runtime_backend *rt)
{
  struct oci_cli *r = (struct oci_cli *)rt;

  if (r == NULL)
    return;
  free (r->binary);
  free (r->state_dir);
  free (r->run_id);
  free (r->state_root);
  free (r->root);
  for (size_t i = 0; i < OCI_CLI_FLAGS_MAX; i++)
    free (r->flags[i]);
  free (r);
}

int
oci_cli_parse_triple (const char *p, unsigned v[3])
{
  for (int i = 0; i < 3; i++)
    {
      unsigned long n = 0;
      int digits = 0;

      while (*p >= '0' && *p <= '9' && digits < 6)
        {
          n = n * 10 + (unsigned long)(*p - '0');
          p++;
          digits++;
        }
      if (digits == 0 || (*p >= '0' && *p <= '9'))
        return -1;
      v[i] = (unsigned)n;
      if (i < 2)
        {
          if (*p != '.')
            return -1;
          p++;
        }
    }
  if (*p == '.')
    return -1;
  return 0;
}

void
oci_cli_shown_line (const char *out, char *buf, size_t size)
{
  size_t shown = strcspn (out, "\n");

  if (shown > 80)
    shown = 80;
  if (shown >= size)
    shown = size - 1;
  for (size_t i = 0; i < shown; i++)
    buf[i] = ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] >= 0x7f) ? '?' : out[i];
  buf[shown] = '\0';
}

int
oci_cli_verify (struct sp_runtime_backend *rt, sp_error_t *err)
{
  struct oci_cli *r = (struct oci_cli *)rt;
  cleanup_free char *real = NULL;
  char out[SP_RUNTIME_VERSION_MAX_BYTES + 1];
  size_t len = 0;
  int status = 0;
  char why[160];
  char desc[64];

  if (runtime_binary_check (r->binary, &real, err) < 0)
    return -1;

  char *argv[] = { real, (char *)"--version", NULL };
  if (sp_spawn_capture (real, argv, runtime_env, VERSION_TIMEOUT_MS, out, SP_RUNTIME_VERSION_MAX_BYTES, &len,
                        &status, err)
      < 0)
    return sp_error_wrap (err, "runtime binary `%s`: --version", real);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      describe_status (status, desc, sizeof (desc));
      return sp_make_error (err, 0, "runtime binary `%s`: --version %s", real, desc);
    }
  if (strlen (out) != len)
    return sp_make_error (err, 0, "runtime binary `%s`: --version printed a NUL byte", real);
  if (r->flavor->version_check (out, why, sizeof (why)) < 0)
    return sp_make_error (err, 0, "runtime binary `%s`: %s", real, why);
  /* Every later exec runs the file that was checked.  */
  free (r->binary);
  r->binary = get_and_reset (&real);
  return 0;
}

/* mkdir name below dirfd (0700, EEXIST is fine), then opens it refusing a
   symlink, and insists on a directory of ours that nobody else can enter.  */
static int
make_private_dir (int dirfd, const char *name, const char *shown, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;

  if (mkdirat (dirfd, name, 0700) < 0 && errno != EEXIST)
    return sp_make_error (err, errno, "mkdir `%s`", shown);
  fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", shown);
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "stat `%s`", shown);
  if (st.st_uid != geteuid ())
    return sp_make_error (err, 0, "`%s` is not owned by uid %d", shown, (int)geteuid ());
  if ((st.st_mode & 07777) != 0700 && fchmod (fd, 0700) < 0)
    return sp_make_error (err, errno, "chmod `%s`", shown);
  return get_and_reset_fd (&fd);
}

int
oci_cli_prepare (struct sp_runtime_backend *rt, sp_error_t *err)
{
  struct oci_cli *r = (struct oci_cli *)rt;
  cleanup_close int state_fd = open (r->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int state_root_fd = -1;
  cleanup_close int run_fd = -1;

  if (state_fd < 0)
    return sp_make_error (err, errno, "open state directory `%s`", r->state_dir);
  state_root_fd = make_private_dir (state_fd, r->flavor->state_name, r->state_root, err);
  if (state_root_fd < 0)
    return -1;
  run_fd = make_private_dir (state_root_fd, r->run_id, r->root, err);
  if (run_fd < 0)
    return -1;
  /* `create` exits and leaves the container's init behind (runsc: the
     sandbox, and its gofer): as the subreaper, this process inherits it,
     and so can wait for it and read the probe's own exit status.  */
  if (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
    return sp_make_error (err, errno, "become the subreaper of the containers' inits");
  return 0;
}

/* Reads the pid `create --pid-file` wrote, and takes hold of the
   container's init: a child of this process (its subreaper), waiting to be
   started (runc: its init on the exec fifo; runsc: the sandbox).  */
static int
init_open (const char *pid_file, struct sp_child *init, sp_error_t *err)
{
  cleanup_close int fd = open (pid_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  char text[32];
  ssize_t n;
  long pid;

  if (fd < 0)
    return sp_make_error (err, errno, "read the pid file `%s`", pid_file);
  n = read (fd, text, sizeof (text) - 1);
  if (n <= 0)
    return sp_make_error (err, n < 0 ? errno : 0, "read the pid file `%s`", pid_file);
  text[n] = '\0';
  pid = strtol (text, NULL, 10);
  if (pid <= 1 || pid > INT32_MAX)
    return sp_make_error (err, 0, "the pid file `%s` holds no pid", pid_file);
  if (sp_child_adopt ((pid_t)pid, init, err) < 0)
    return sp_error_wrap (err, "the container's init");
  return 0;
}

static char *
pid_file_path (const struct oci_cli *r, const char *container_id)
{
  char *path = NULL;

  if (asprintf (&path, "%s/%s.pid", r->root, container_id) < 0)
    return NULL;
  return path;
}

/* Runs `create`, bounded.  */
static int
create_container (const struct oci_cli *r, const struct sp_runtime_job *job, const char *pid_file,
                  int stdin_fd, struct sp_run_facts *facts, sp_error_t *err)
{
  char *words[] = CREATE_WORDS (job->bundle_dir, pid_file, job->container_id);
  /* Both runtimes hand create's stdin on to the container's process.  */
  const struct sp_spawn_options options = { .input_fd = stdin_fd, .output_fd = -1, .root_dirfd = -1 };
  char *argv[ARGV_MAX];
  struct sp_child child;
  const char *name = r->flavor->binary_name;
  char desc[64];
  int status = 0;
  int ret;

  command_line (r, r->root, words, argv);
  if (sp_spawn_with (r->binary, argv, runtime_env, &options, &child, err) < 0)
    return sp_error_wrap (err, "%s create `%s`", name, job->container_id);
  facts->launched = true;
  facts->stage = SP_RUN_STAGE_CREATE;
  ret = sp_child_wait (&child, CREATE_TIMEOUT_MS, &status, err);
  if (ret <= 0)
    {
      sp_child_kill_and_reap (&child);
      if (ret < 0)
        return sp_error_wrap (err, "%s create `%s`", name, job->container_id);
      return sp_make_error (err, 0, "%s create `%s`: did not finish within %d s", name, job->container_id,
                            CREATE_TIMEOUT_MS / 1000);
    }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      describe_status (status, desc, sizeof (desc));
      return sp_make_error (err, 0, "%s create `%s`: `%s` %s", name, job->container_id, r->binary, desc);
    }
  return 0;
}

/* True when nothing of the container is left in the --root: neither runc's
   <id>/ nor runsc's <id>_sandbox:<id>.state and .lock.  */
static int
state_gone (const struct oci_cli *r, const char *container_id, sp_error_t *err)
{
  cleanup_close int root_fd = open (r->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  size_t n = strlen (container_id);

  if (root_fd < 0)
    return sp_make_error (err, errno, "open `%s`", r->root);
  if (sp_dir_names_read (root_fd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", r->root);
  for (size_t i = 0; i < names.len; i++)
    if (strncmp (names.v[i], container_id, n) == 0 && (names.v[i][n] == '\0' || names.v[i][n] == '_'))
      return sp_make_error (err, 0, "%s delete `%s`: its state is still in `%s`", r->flavor->binary_name,
                            container_id, r->root);
  return 0;
}

static int
run_checked (struct oci_cli *r, const struct sp_runtime_job *job, struct sp_run_facts *facts, sp_error_t *err)
{
  const char *name = r->flavor->binary_name;

  memset (facts, 0, sizeof (*facts));
  facts->exit_code = -1;
  if (job == NULL || job->bundle_dir == NULL || job->bundle_dir[0] != '/')
    return sp_make_error (err, 0, "%s run: the bundle directory must be an absolute path", name);
  if (job->container_id == NULL || container_id_check (job->container_id) < 0)
    return sp_make_error (err, 0, "%s run: bad container id", name);
  if (job->timeout_seconds == 0 || job->timeout_seconds > SP_TIMEOUT_MAX_SECONDS)
    return sp_make_error (err, 0, "%s run: timeout must be 1 to %d s", name, SP_TIMEOUT_MAX_SECONDS);
  return 0;
}

/* A created container: its init (and runsc's gofer) held by this process,
   waiting for `start`.  */
struct sp_runtime_sandbox
{
  char *container_id;
  char *cgroup_path; /* NULL: no statistics */
  char *pid_file;
  uint32_t timeout_seconds;
  struct sp_child init;
  struct sp_child helper;
  int signal_fd; /* the write end of the probe's stdin while its interpreter waits; else -1 */
  bool released; /* the init was let go: it runs the interpreter */
  bool started;
  bool init_reaped; /* this process reaped the init it adopted */
};

static void
sandbox_free (struct sp_runtime_sandbox *sb)
{
  if (sb->signal_fd >= 0)
    close (sb->signal_fd);
  free (sb->container_id);
  free (sb->cgroup_path);
  free (sb->pid_file);
  free (sb);
}

/* Kills and reaps the init while this process holds it, noting that it did.  */
static void
init_kill_and_reap (struct sp_runtime_sandbox *sb)
{
  if (sp_child_kill_and_reap (&sb->init) == 1)
    sb->init_reaped = true;
}

/* The cgroup's name below <hierarchy>/SP_BUNDLE_CGROUP_PARENT/ when path is
   "/" SP_BUNDLE_CGROUP_PARENT "/<name>", as bundle.c makes it; else NULL.  */
static const char *
cgroup_leaf (const char *path)
{
  static const char parent[] = "/" SP_BUNDLE_CGROUP_PARENT "/";
  const char *name;

  if (path == NULL || strncmp (path, parent, sizeof (parent) - 1) != 0)
    return NULL;
  name = path + sizeof (parent) - 1;
  if (name[0] == '\0' || strchr (name, '/') != NULL || strcmp (name, ".") == 0 || strcmp (name, "..") == 0)
    return NULL;
  return name;
}

/* rmdir <hier_fd>/SP_BUNDLE_CGROUP_PARENT/<name>: 0 when it is gone (or was
   never there), -1 when it stays.  A cgroup whose last task just exited may
   still count as populated for a moment: EBUSY is retried briefly.  */
static int
remove_cgroup_in (int hier_fd, const char *name)
{
  cleanup_close int parent_fd
      = openat (hier_fd, SP_BUNDLE_CGROUP_PARENT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (parent_fd < 0)
    return errno == ENOENT ? 0 : -1;
  for (int waited = 0;; waited += CGROUP_DRAIN_NAP_MS)
    {
      struct timespec nap = { 0, CGROUP_DRAIN_NAP_MS * 1000000L };

      if (unlinkat (parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
      if (errno != EBUSY || waited >= REMOVE_BUSY_MS)
        return -1;
      nanosleep (&nap, NULL);
    }
}

/* Removes the container's cgroup from every hierarchy, as `runc delete`
   does (its state.json's cgroup_paths are <SP_CGROUP_ROOT>/<h>/<path> for
   each v1 hierarchy h, `unified` and `systemd` among them, or the v2 root):
   0 when it is gone from all of them.  */
static int
remove_cgroup (const char *name)
{
  cleanup_close int root_fd = open (SP_CGROUP_ROOT, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_error sp_error_t ignored = NULL;
  struct stat st;
  int ret = 0;

  if (root_fd < 0)
    return -1;
  if (fstatat (root_fd, "cgroup.controllers", &st, AT_SYMLINK_NOFOLLOW) == 0)
    return remove_cgroup_in (root_fd, name);
  if (sp_dir_names_read (root_fd, &names, &ignored) < 0)
    return -1;
  for (size_t i = 0; i < names.len; i++)
    {
      cleanup_close int hier_fd = -1;

      /* A symlink (cpu -> cpu,cpuacct) is visited under its real name.  */
      if (fstatat (root_fd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
      if (!S_ISDIR (st.st_mode))
        continue;
      hier_fd = openat (root_fd, names.v[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (hier_fd < 0 || remove_cgroup_in (hier_fd, name) < 0)
        ret = -1;
    }
  return ret;
}

/* `runc delete` without the binary, for a container whose init this
   process reaped (remove_reaped_directly).  The init was the pid
   namespace's first process, so every other process in it was killed and
   reaped by the kernel before the init could be (every bundle has its own
   pid namespace, bundle.c): nothing of the container runs.  What is left
   is what `runc delete` removes for a stopped container: its cgroup in every
   hierarchy, then <root>/<id>/ (state.json, and the exec fifo of one never
   started); the bundle has no hooks.  0 when both are gone; -1 when
   anything stays, with state.json still there for `delete --force` (the
   cgroup goes first).  */
static int
remove_reaped (const struct oci_cli *r, const struct sp_runtime_sandbox *sb)
{
  cleanup_close int root_fd = -1;
  const char *leaf = cgroup_leaf (sb->cgroup_path);

  if (!sb->init_reaped || leaf == NULL || remove_cgroup (leaf) < 0)
    return -1;
  root_fd = open (r->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root_fd < 0 || remove_tree_at (root_fd, sb->container_id, CONTAINER_DIR_MAX_DEPTH) < 0)
    return -1;
  return 0;
}

/* Reaps what create left, removes the container (directly, or by `delete
   --force`) and confirms its state is gone.  */
static int
sandbox_remove (struct oci_cli *r, struct sp_runtime_sandbox *sb, sp_error_t *err)
{
  cleanup_error sp_error_t ignored = NULL;
  int status = 0;

  init_kill_and_reap (sb);
  /* A helper leaves once the sandbox is gone; one that does not is killed.
     Either way it is reaped here, so that `delete` does not wait on it.  */
  if (sb->helper.pidfd >= 0 && sp_child_wait (&sb->helper, HELPER_EXIT_MS, &status, &ignored) != 1)
    sp_child_kill_and_reap (&sb->helper);
  sp_error_release (&ignored);
  unlink (sb->pid_file);
  if (r->flavor->remove_reaped_directly && remove_reaped (r, sb) == 0)
    return state_gone (r, sb->container_id, err);
  if (delete_id (r, r->root, sb->container_id, err) < 0)
    return -1;
  return state_gone (r, sb->container_id, err);
}

/* The probe's stdin: a pipe.  With start_ahead, *signal_wr keeps its write
   end, whose closing is the signal the waiting interpreter runs the script
   on; otherwise it is closed at once, so that every probe finds the same
   stdin, an empty pipe at its end.  */
static int
probe_stdin (bool start_ahead, int *rd, int *signal_wr, sp_error_t *err)
{
  int fds[2];

  if (pipe2 (fds, O_CLOEXEC) < 0)
    return sp_make_error (err, errno, "make the probe's stdin");
  *rd = fds[0];
  if (start_ahead)
    *signal_wr = fds[1];
  else
    close (fds[1]);
  return 0;
}

static int release_init (struct oci_cli *r, struct sp_runtime_sandbox *sb, struct sp_run_facts *facts,
                         sp_error_t *err);

int
oci_cli_create (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, struct sp_run_facts *facts,
                struct sp_runtime_sandbox **out, sp_error_t *err)
{
  struct oci_cli *r = (struct oci_cli *)rt;
  cleanup_error sp_error_t ignored = NULL;
  cleanup_close int stdin_rd = -1;
  struct sp_runtime_sandbox *sb;
  int ret;

  *out = NULL;
  if (run_checked (r, job, facts, err) < 0)
    return -1;
  sb = calloc (1, sizeof (*sb));
  if (sb == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  sb->init = (struct sp_child){ .pid = -1, .pidfd = -1 };
  sb->helper = (struct sp_child){ .pid = -1, .pidfd = -1 };
  sb->signal_fd = -1;
  sb->timeout_seconds = job->timeout_seconds;
  sb->container_id = strdup (job->container_id);
  sb->cgroup_path = job->cgroup_path ? strdup (job->cgroup_path) : NULL;
  sb->pid_file = pid_file_path (r, job->container_id);
  if (sb->container_id == NULL || (job->cgroup_path && sb->cgroup_path == NULL) || sb->pid_file == NULL)
    {
      sandbox_free (sb);
      return sp_make_error (err, ENOMEM, "allocate");
    }

  /* `create` returns once the container exists and its init waits to exec
     the probe; `start` releases it.  A failure up to there is the
     runtime's (or the host's), never the probe's: `run`'s exit status could
     not tell the two apart (docs/runtimes.md).  */
  if (probe_stdin (job->start_ahead, &stdin_rd, &sb->signal_fd, err) < 0)
    {
      sandbox_free (sb);
      return -1;
    }
  ret = create_container (r, job, sb->pid_file, stdin_rd, facts, err);
  sp_closep (&stdin_rd);
  if (ret < 0)
    {
      if (facts->stage != SP_RUN_STAGE_NONE)
        (void)sandbox_remove (r, sb, &ignored);
      sandbox_free (sb);
      return -1;
    }
  if (init_open (sb->pid_file, &sb->init, err) < 0
      || (r->flavor->adopt_helpers && r->flavor->adopt_helpers (r, job->container_id, &sb->helper, err) < 0)
      || (job->start_ahead && release_init (r, sb, facts, err) < 0))
    {
      (void)sandbox_remove (r, sb, &ignored);
      sandbox_free (sb);
      return -1;
    }
  *out = sb;
  return 0;
}

static char *
exec_fifo_path (const struct oci_cli *r, const char *container_id)
{
  char *path = NULL;

  if (asprintf (&path, "%s/%s/" EXEC_FIFO_NAME, r->root, container_id) < 0)
    return NULL;
  return path;
}

/* `runc start`, without the binary: the created container's init blocks
   opening its exec fifo for writing, writes one byte once a reader has it
   open, and then execs the probe.  The read is the release; removing the
   fifo afterwards is what tells runc's later commands that the container
   started.  The init's exit before its byte, or no byte in time, fails the
   start.  */
static int
start_by_exec_fifo (const struct oci_cli *r, struct sp_runtime_sandbox *sb, const char *what, sp_error_t *err)
{
  cleanup_free char *path = exec_fifo_path (r, sb->container_id);
  cleanup_close int fd = -1;
  struct stat st;
  char byte;

  if (path == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  /* Non-blocking: an init that is gone never opens the other end.  */
  fd = open (path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "%s: open `%s`", what, path);
  /* runc makes it as the sandbox's root (a host id of the slot's), in the
     run's --root, which is root's and private: only its type is checked.  */
  if (fstat (fd, &st) < 0 || !S_ISFIFO (st.st_mode))
    return sp_make_error (err, 0, "%s: `%s` is not a fifo", what, path);
  for (int64_t deadline = sp_monotonic_ms () + COMMAND_TIMEOUT_MS;;)
    {
      struct pollfd fds[2] = { { .fd = fd, .events = POLLIN }, { .fd = sb->init.pidfd, .events = POLLIN } };
      int64_t left = deadline - sp_monotonic_ms ();
      ssize_t n;
      int ready;

      if (left <= 0)
        return sp_make_error (err, 0, "%s: the init did not write its exec fifo within %d s", what,
                              COMMAND_TIMEOUT_MS / 1000);
      ready = poll (fds, sb->init.pidfd >= 0 ? 2 : 1, (int)(left > 100 ? 100 : left));
      if (ready < 0 && errno != EINTR)
        return sp_make_error (err, errno, "%s: poll", what);
      n = read (fd, &byte, 1);
      if (n == 1)
        break;
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        return sp_make_error (err, errno, "%s: read `%s`", what, path);
      if (ready > 0 && sb->init.pidfd >= 0 && (fds[1].revents & POLLIN))
        return sp_make_error (err, 0, "%s: the container's init exited before it was started", what);
      /* End of file: no writer yet (its open is still completing), or one
         that left without its byte, which the init's exit then tells.
         poll would not wait on either: nap instead.  */
      if (n == 0)
        {
          struct timespec nap = { 0, 1000 * 1000 };

          nanosleep (&nap, NULL);
        }
    }
  if (unlink (path) < 0)
    return sp_make_error (err, errno, "%s: remove `%s`", what, path);
  return 0;
}

/* Lets the created container's init go: it execs the process of the
   bundle (the probe, or the interpreter that waits for its signal).  */
static int
release_init (struct oci_cli *r, struct sp_runtime_sandbox *sb, struct sp_run_facts *facts, sp_error_t *err)
{
  char what[64 + CONTAINER_ID_MAX];

  snprintf (what, sizeof (what), "%s start `%s`", r->flavor->binary_name, sb->container_id);
  sb->released = true;
  if (r->flavor->start_by_exec_fifo)
    {
      if (start_by_exec_fifo (r, sb, what, err) < 0)
        {
          init_kill_and_reap (sb);
          return -1;
        }
    }
  else
    {
      char *words[] = START_WORDS (sb->container_id);
      char *argv[ARGV_MAX];
      bool spawned = false;

      command_line (r, r->root, words, argv);
      if (runtime_bounded (r->binary, argv, what, &spawned, err) < 0)
        {
          /* A binary that cannot be executed any more started nothing: the
             host's failure, as at create (a sandbox made ahead was created
             while it still could be).  */
          if (!spawned)
            facts->stage = SP_RUN_STAGE_NONE;
          init_kill_and_reap (sb);
          return -1;
        }
    }
  return 0;
}

/* The signal to an interpreter started ahead, once it is known to be still
   waiting: its stdin's write end closed.  *cpu_ns is what the sandbox had
   used until then (0 when unknown), which the run's facts leave out.  */
static int
signal_interpreter (struct oci_cli *r, struct sp_runtime_sandbox *sb, uint64_t *cpu_ns, sp_error_t *err)
{
  cleanup_error sp_error_t ignored = NULL;
  struct pollfd init = { .fd = sb->init.pidfd, .events = POLLIN };
  struct sp_cgroup_stats stats;

  *cpu_ns = 0;
  if (sb->init.pidfd < 0 || poll (&init, 1, 0) != 0)
    {
      init_kill_and_reap (sb);
      return sp_make_error (err, 0,
                            "%s start `%s`: the interpreter started ahead did not wait for its script",
                            r->flavor->binary_name, sb->container_id);
    }
  if (sb->cgroup_path && sp_cgroup_stats_read (sb->cgroup_path, &stats, &ignored) == 0)
    *cpu_ns = stats.cpu_ns;
  sp_closep (&sb->signal_fd);
  return 0;
}

int
oci_cli_start (struct sp_runtime_backend *rt, struct sp_runtime_sandbox *sb, struct sp_run_facts *facts,
               sp_error_t *err)
{
  struct oci_cli *r = (struct oci_cli *)rt;
  const char *name = r->flavor->binary_name;
  cleanup_error sp_error_t ignored = NULL;
  struct sp_cgroup_stats stats;
  uint64_t cpu_before = 0;
  uint64_t start;
  int status = 0;
  int ret;

  if (sb->started)
    return sp_make_error (err, 0, "%s start `%s`: a sandbox starts once", name, sb->container_id);
  sb->started = true;
  facts->launched = true;
  facts->stage = SP_RUN_STAGE_CREATE;
  start = sp_monotonic_ns ();
  if (sb->released)
    {
      /* Started ahead: the timeout and the facts count from the signal.  */
      if (signal_interpreter (r, sb, &cpu_before, err) < 0)
        return -1;
      start = sp_monotonic_ns ();
    }
  else if (release_init (r, sb, facts, err) < 0)
    return -1;
  facts->stage = SP_RUN_STAGE_PROBE;

  /* runc: the probe runs as the init itself, so its wait status is the
     probe's own, death by a signal included.  runsc: the sandbox exits with
     the probe's exit status (docs/runtimes.md).  */
  ret = sp_child_wait (&sb->init, (int)sb->timeout_seconds * 1000, &status, err);
  if (ret == 1)
    sb->init_reaped = true;
  if (ret == 0)
    {
      facts->timed_out = true;
      /* A failed kill is not final: the grace wait and a direct kill follow.  */
      kill_id (r, r->root, sb->container_id, &ignored);
      sp_error_release (&ignored);
      if (sp_child_wait (&sb->init, SP_SERVE_KILL_GRACE_SECONDS * 1000, &status, &ignored) == 1)
        sb->init_reaped = true;
      else
        init_kill_and_reap (sb);
      sp_error_release (&ignored);
    }
  else if (ret < 0)
    {
      sp_error_wrap (err, "%s `%s`", name, sb->container_id);
      init_kill_and_reap (sb);
    }
  facts->wall_ns = sp_monotonic_ns () - start;
  if (facts->timed_out)
    facts->signal = SIGKILL;
  else if (ret == 1 && WIFEXITED (status))
    facts->exit_code = WEXITSTATUS (status);
  else if (ret == 1 && WIFSIGNALED (status))
    facts->signal = WTERMSIG (status);

  /* Statistics are for the audit log only: a failure to read them leaves 0s
     and does not fail the run.  */
  if (sb->cgroup_path && sp_cgroup_stats_read (sb->cgroup_path, &stats, &ignored) == 0)
    {
      facts->peak_memory_bytes = stats.peak_memory_bytes;
      facts->cpu_ns = stats.cpu_ns > cpu_before ? stats.cpu_ns - cpu_before : 0;
      facts->oom = stats.oom_kills > 0;
    }
  return ret < 0 ? -1 : 0;
}

int
oci_cli_destroy (struct sp_runtime_backend *rt, struct sp_runtime_sandbox *sb, sp_error_t *err)
{
  int ret;

  if (sb == NULL)
    return 0;
  ret = sandbox_remove ((struct oci_cli *)rt, sb, err);
  sandbox_free (sb);
  /* What runsc left to this subreaper besides its sandbox and gofer.  */
  sp_reap_strays ();
  return ret;
}

int
oci_cli_run (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, struct sp_run_facts *facts,
             sp_error_t *err)
{
  struct sp_runtime_sandbox *sb = NULL;
  cleanup_error sp_error_t ignored = NULL;
  int ret;

  if (oci_cli_create (rt, job, facts, &sb, err) < 0)
    return -1;
  ret = oci_cli_start (rt, sb, facts, err);
  if (oci_cli_destroy (rt, sb, *err ? &ignored : err) < 0)
    return -1;
  return *err ? -1 : ret;
}

int
oci_cli_kill (struct sp_runtime_backend *rt, const char *container_id, sp_error_t *err)
{
  struct oci_cli *r = (struct oci_cli *)rt;

  if (container_id == NULL || container_id_check (container_id) < 0)
    return sp_make_error (err, 0, "%s kill: bad container id", r->flavor->binary_name);
  return kill_id (r, r->root, container_id, err);
}

int
oci_cli_describe (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, char **json, size_t *len,
                  sp_error_t *err)
{
  struct oci_cli *r = (struct oci_cli *)rt;
  struct sp_run_facts facts;
  cleanup_free char *pid_file = NULL;
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  char *create[] = CREATE_WORDS (job ? job->bundle_dir : NULL, NULL, job ? job->container_id : NULL);
  char *start[] = START_WORDS (job ? job->container_id : NULL);
  char *kill_words[] = KILL_WORDS (job ? job->container_id : NULL);
  char *delete_words[] = DELETE_WORDS (job ? job->container_id : NULL);
  char *argv[ARGV_MAX];
  const unsigned char *buf;
  size_t buf_len;
  int bad = 0;

  *json = NULL;
  if (run_checked (r, job, &facts, err) < 0)
    return -1;
  pid_file = pid_file_path (r, job->container_id);
  if (g == NULL || pid_file == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  create[4] = pid_file;
  yajl_gen_config (g, yajl_gen_beautify, 1);
  bad |= yajl_gen_map_open (g) != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)"runtime", 7) != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)rt->ops->name, strlen (rt->ops->name))
         != yajl_gen_status_ok;
  bad |= yajl_gen_string (g, (const unsigned char *)"commands", 8) != yajl_gen_status_ok;
  bad |= yajl_gen_array_open (g) != yajl_gen_status_ok;
  command_line (r, r->root, create, argv);
  bad |= sp_yajl_gen_command (g, "create", argv) < 0;
  if (r->flavor->start_by_exec_fifo)
    {
      /* No command: serve reads the init's exec fifo (start_by_exec_fifo).  */
      cleanup_free char *fifo = exec_fifo_path (r, job->container_id);

      bad |= fifo == NULL;
      bad |= yajl_gen_map_open (g) != yajl_gen_status_ok;
      bad |= yajl_gen_string (g, (const unsigned char *)"step", 4) != yajl_gen_status_ok;
      bad |= yajl_gen_string (g, (const unsigned char *)"start", 5) != yajl_gen_status_ok;
      bad |= yajl_gen_string (g, (const unsigned char *)"exec_fifo", 9) != yajl_gen_status_ok;
      bad |= fifo == NULL
             || yajl_gen_string (g, (const unsigned char *)fifo, strlen (fifo)) != yajl_gen_status_ok;
      bad |= yajl_gen_map_close (g) != yajl_gen_status_ok;
    }
  else
    {
      command_line (r, r->root, start, argv);
      bad |= sp_yajl_gen_command (g, "start", argv) < 0;
    }
  if (job->start_ahead)
    {
      /* The steps above ran before the request; this one is the request's.  */
      bad |= yajl_gen_map_open (g) != yajl_gen_status_ok;
      bad |= (sp_yajl_gen_cstr (g, "step") | sp_yajl_gen_cstr (g, "signal") | sp_yajl_gen_cstr (g, "stdin")
              | sp_yajl_gen_cstr (g,
                                  "serve closes the write end of the probe's stdin once probe.py holds the "
                                  "script; the interpreter started ahead then runs it"))
             != yajl_gen_status_ok;
      bad |= yajl_gen_map_close (g) != yajl_gen_status_ok;
    }
  command_line (r, r->root, kill_words, argv);
  bad |= sp_yajl_gen_command (g, "kill (on timeout or stop)", argv) < 0;
  if (r->flavor->remove_reaped_directly)
    {
      /* No command: once its init is reaped, serve removes the container's
         cgroup from every hierarchy and its state directory itself
         (remove_reaped); `delete` is what it falls back to.  */
      cleanup_free char *state = NULL;

      bad |= asprintf (&state, "%s/%s", r->root, job->container_id) < 0;
      bad |= yajl_gen_map_open (g) != yajl_gen_status_ok;
      bad |= (sp_yajl_gen_cstr (g, "step") | sp_yajl_gen_cstr (g, "remove") | sp_yajl_gen_cstr (g, "cgroup")
              | sp_yajl_gen_cstr (g, job->cgroup_path ? job->cgroup_path : "") | sp_yajl_gen_cstr (g, "state")
              | sp_yajl_gen_cstr (g, state ? state : ""))
             != yajl_gen_status_ok;
      bad |= yajl_gen_map_close (g) != yajl_gen_status_ok;
    }
  command_line (r, r->root, delete_words, argv);
  bad |= sp_yajl_gen_command (g, "delete", argv) < 0;
  bad |= yajl_gen_array_close (g) != yajl_gen_status_ok;
  bad |= yajl_gen_map_close (g) != yajl_gen_status_ok;
  if (bad || yajl_gen_get_buf (g, &buf, &buf_len) != yajl_gen_status_ok)
    return sp_make_error (err, 0, "describe the %s command lines: yajl failed", r->flavor->binary_name);
  *json = strndup ((const char *)buf, buf_len);
  if (*json == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  *len = buf_len;
  return 0;
}

/* Removes name below dirfd and everything in it, never following a link.  */
static int
remove_tree_at (int dirfd, const char *name, int depth)
{
  cleanup_close int fd = -1;
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_error sp_error_t ignored = NULL;

  if (unlinkat (dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
    return 0;
  if (errno == ENOTDIR)
    return unlinkat (dirfd, name, 0);
  if (errno != ENOTEMPTY && errno != EEXIST)
    return -1;
  if (depth <= 0)
    {
      errno = ENOTEMPTY;
      return -1;
    }
  fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  if (sp_dir_names_read (fd, &names, &ignored) < 0)
    {
      errno = ignored && ignored->status ? ignored->status : EIO;
      return -1;
    }
  for (size_t i = 0; i < names.len; i++)
    if (remove_tree_at (fd, names.v[i], depth - 1) < 0)
      return -1;
  return unlinkat (dirfd, name, AT_REMOVEDIR);
}

/* Keeps the first error and drops the rest, so that cleanup goes on.  */
static void
keep_first (sp_error_t *first, sp_error_t *e)
{
  if (*first == NULL)
    *first = *e;
  else
    sp_error_release (e);
  *e = NULL;
}

struct run_list
{
  char **v;
  size_t len;
};

static void
run_list_release (struct run_list *l)
{
  for (size_t i = 0; i < l->len; i++)
    free (l->v[i]);
  free (l->v);
  l->v = NULL;
  l->len = 0;
}

static int
run_list_add (struct run_list *l, const char *id)
{
  char **grown = realloc (l->v, (l->len + 1) * sizeof (*l->v));

  if (grown == NULL)
    return -1;
  l->v = grown;
  if ((l->v[l->len] = strdup (id)) == NULL)
    return -1;
  l->len++;
  return 0;
}

static bool
has_run_prefix (const char *name, const char *run)
{
  size_t n = strlen (run);

  return strncmp (name, run, n) == 0 && name[n] == '-' && sp_bundle_id_valid (name + n + 1);
}

/* A cgroup "<run>-<invocation>" is cleaned when <run> is one being cleaned.
   Run ids may hold `-`, so "a-b-1" fits run "a" and run "a-b": when one of
   the readings is the current run and it is spared, the cgroup is spared.  */
static bool
cgroup_is_orphan (const struct oci_cli *r, const struct run_list *runs, bool include_current,
                  const char *name)
{
  if (!include_current && has_run_prefix (name, r->run_id))
    return false;
  for (size_t i = 0; i < runs->len; i++)
    if (has_run_prefix (name, runs->v[i]))
      return true;
  return false;
}

/* The container id a --root entry belongs to: runc's <id>/, runsc's
   <id>_sandbox:<id>.state and .lock.  Container ids hold no `_` or `.`
   (container_id_check), so this driver's <id>.pid is none.  NULL for
   anything else.  */
static char *
entry_container_id (const char *entry)
{
  size_t n = strcspn (entry, "_");
  char *id;

  if (entry[n] == '_' && strncmp (entry + n, "_sandbox:", 9) != 0)
    return NULL;
  id = strndup (entry, n);

  if (id != NULL && container_id_check (id) < 0)
    {
      free (id);
      return NULL;
    }
  return id;
}

/* Deletes the containers under one --root (<state>/<runtime>/<run>), then
   the root itself, adding what went to removed.  */
/* `delete --force` of an earlier run's container, tried ORPHAN_DELETE_TRIES
   times ORPHAN_DELETE_NAP_MS apart.  Its processes were another process's
   children: once killed they stay zombies until the host's init reaps them,
   and runsc, which waits 5 s for its killed sandbox's pid to go, gives up
   (exit 128) where init is slow to reap; a later try finds it gone.  Any
   failure of the last try is the error.  */
static int
delete_orphan (const struct oci_cli *r, const char *root, const char *id, sp_error_t *err)
{
  for (int tries = 1;; tries++)
    {
      cleanup_error sp_error_t e = NULL;
      struct timespec nap = { ORPHAN_DELETE_NAP_MS / 1000, (ORPHAN_DELETE_NAP_MS % 1000) * 1000000L };

      if (delete_id (r, root, id, &e) == 0)
        return 0;
      if (tries >= ORPHAN_DELETE_TRIES)
        {
          *err = get_and_reset (&e);
          return -1;
        }
      nanosleep (&nap, NULL);
    }
}

static int
clean_run_root (struct oci_cli *r, int state_root_fd, const char *run, struct sp_orphans_removed *removed,
                sp_error_t *err)
{
  cleanup_close int run_fd = openat (state_root_fd, run, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_free char *root = NULL;
  cleanup_error sp_error_t first = NULL;
  cleanup_error sp_error_t e = NULL;
  unsigned deleted = 0;

  if (run_fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open `%s/%s`", r->state_root, run);
  if (asprintf (&root, "%s/%s", r->state_root, run) < 0)
    return sp_make_error (err, errno, "allocate");
  if (sp_dir_names_read (run_fd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", root);
  for (size_t i = 0; i < names.len; i++)
    {
      cleanup_free char *id = entry_container_id (names.v[i]);
      bool seen = false;

      if (id == NULL)
        continue;
      /* runsc leaves two entries per container: delete it once.  */
      for (size_t j = 0; j < i && !seen; j++)
        {
          cleanup_free char *earlier = entry_container_id (names.v[j]);
          seen = earlier != NULL && strcmp (earlier, id) == 0;
        }
      if (seen)
        continue;
      if (delete_orphan (r, root, id, &e) < 0)
        keep_first (&first, &e);
      else
        deleted++;
    }
  if (sp_orphans_note (removed, run, deleted, 0, false) < 0)
    return sp_make_error (err, ENOMEM, "allocate");
  if (first)
    {
      *err = get_and_reset (&first);
      return -1;
    }
  if (remove_tree_at (state_root_fd, run, STATE_TREE_MAX_DEPTH) < 0)
    return sp_make_error (err, errno, "remove `%s`", root);
  return sp_orphans_note (removed, run, 0, 0, true) < 0 ? sp_make_error (err, ENOMEM, "allocate") : 0;
}

static int
kill_cgroup_procs (int cg_fd)
{
  cleanup_close int fd = openat (cg_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  cleanup_free char *buf = NULL;
  cleanup_error sp_error_t e = NULL;
  size_t len = 0;
  int found = 0;

  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  if (sp_read_fd_capped (fd, CGROUP_PROCS_MAX, &buf, &len, &e) < 0)
    return -1;
  for (char *p = buf; *p;)
    {
      char *end;
      long pid = strtol (p, &end, 10);

      if (end == p)
        break;
      if (pid > 0)
        {
          kill ((pid_t)pid, SIGKILL);
          found++;
        }
      p = end;
      while (*p == '\n')
        p++;
    }
  return found;
}

/* Kills what is left in one orphan cgroup, waits briefly for it to empty,
   and removes it: 1 when it removed it, 0 when it was gone already.  */
static int
clean_cgroup (int parent_fd, const char *hier, const char *name, sp_error_t *err)
{
  cleanup_close int cg_fd = openat (parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int waited = 0;

  if (cg_fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open cgroup `%s/%s`", hier, name);
  /* A frozen cgroup's processes cannot die until thawed (v1 freezer).  */
  {
    cleanup_close int fz = openat (cg_fd, "freezer.state", O_WRONLY | O_CLOEXEC);
    if (fz >= 0 && write (fz, "THAWED", 6) < 0)
      {
        /* the kill below reports what is left */
      }
  }
  while (kill_cgroup_procs (cg_fd) > 0 && waited < CGROUP_DRAIN_MS)
    {
      struct timespec nap = { 0, CGROUP_DRAIN_NAP_MS * 1000000L };
      nanosleep (&nap, NULL);
      waited += CGROUP_DRAIN_NAP_MS;
    }
  for (;;)
    {
      if (unlinkat (parent_fd, name, AT_REMOVEDIR) == 0)
        return 1;
      if (errno == ENOENT)
        return 0;
      if (errno != EBUSY || waited >= CGROUP_DRAIN_MS)
        return sp_make_error (err, errno, "remove cgroup `%s/%s`", hier, name);
      struct timespec nap = { 0, CGROUP_DRAIN_NAP_MS * 1000000L };
      nanosleep (&nap, NULL);
      waited += CGROUP_DRAIN_NAP_MS;
    }
}

/* The run of runs a cgroup "<run>-<invocation>" was removed for.  */
static const char *
cgroup_run (const struct run_list *runs, const char *name)
{
  for (size_t i = 0; i < runs->len; i++)
    if (has_run_prefix (name, runs->v[i]))
      return runs->v[i];
  return NULL;
}

/* Adds name to l unless it holds it already.  */
static int
run_list_add_once (struct run_list *l, const char *name)
{
  for (size_t i = 0; i < l->len; i++)
    if (strcmp (l->v[i], name) == 0)
      return 0;
  return run_list_add (l, name);
}

/* Cleans the orphan cgroups of one hierarchy, or when only_list, lists
   them into found (each name once, whichever hierarchies hold it).  */
static int
clean_hierarchy (const struct oci_cli *r, int hier_fd, const char *hier, const struct run_list *runs,
                 bool include_current, bool only_list, struct run_list *found, sp_error_t *err)
{
  cleanup_close int parent_fd
      = openat (hier_fd, SP_BUNDLE_CGROUP_PARENT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_error sp_error_t first = NULL;
  cleanup_error sp_error_t e = NULL;

  if (parent_fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open `%s/%s`", hier, SP_BUNDLE_CGROUP_PARENT);
  if (sp_dir_names_read (parent_fd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s/%s`", hier, SP_BUNDLE_CGROUP_PARENT);
  for (size_t i = 0; i < names.len; i++)
    {
      struct stat st;

      if (fstatat (parent_fd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode))
        continue;
      if (!cgroup_is_orphan (r, runs, include_current, names.v[i]))
        continue;
      if (only_list)
        {
          if (run_list_add_once (found, names.v[i]) < 0)
            return sp_make_error (err, ENOMEM, "allocate");
        }
      else if (clean_cgroup (parent_fd, hier, names.v[i], &e) < 0)
        keep_first (&first, &e);
    }
  /* The shared parent stays, empty, as runc leaves it: another proxy's runc
     may be creating its sandbox's cgroup in it at this very moment, and
     removing the parent then would fail that sandbox.  */
  if (first)
    {
      *err = get_and_reset (&first);
      return -1;
    }
  return 0;
}

/* Counts, for the runs they belonged to, the cgroups of before that are
   gone now (with their containers' deletes, or cleaned).  */
static int
note_cgroups (const struct run_list *runs, const struct run_list *before, const struct run_list *now,
              struct sp_orphans_removed *removed, sp_error_t *err)
{
  for (size_t i = 0; i < before->len; i++)
    {
      const char *run = cgroup_run (runs, before->v[i]);
      bool left = false;

      for (size_t j = 0; j < now->len && !left; j++)
        left = strcmp (now->v[j], before->v[i]) == 0;
      if (!left && run != NULL && sp_orphans_note (removed, run, 0, 1, false) < 0)
        return sp_make_error (err, ENOMEM, "allocate");
    }
  return 0;
}

/* Cleans the runs' cgroups in every hierarchy, or when only_list, lists
   them into found.  */
static int
clean_cgroups (const struct oci_cli *r, const struct run_list *runs, bool include_current, bool only_list,
               struct run_list *found, sp_error_t *err)
{
  cleanup_close int root_fd = open (SP_CGROUP_ROOT, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_error sp_error_t first = NULL;
  cleanup_error sp_error_t e = NULL;
  struct stat st;

  if (root_fd < 0)
    return sp_make_error (err, errno, "open `%s`", SP_CGROUP_ROOT);
  /* v2: the root is the one hierarchy; v1: one per controller below it.  */
  if (fstatat (root_fd, "cgroup.controllers", &st, AT_SYMLINK_NOFOLLOW) == 0)
    {
      if (clean_hierarchy (r, root_fd, SP_CGROUP_ROOT, runs, include_current, only_list, found, &e) < 0)
        keep_first (&first, &e);
    }
  else if (sp_dir_names_read (root_fd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", SP_CGROUP_ROOT);
  for (size_t i = 0; i < names.len; i++)
    {
      cleanup_close int hier_fd = -1;
      char hier[PATH_MAX];

      /* A symlink (cpu -> cpu,cpuacct) is visited under its real name.  */
      if (fstatat (root_fd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode))
        continue;
      hier_fd = openat (root_fd, names.v[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (hier_fd < 0)
        continue;
      snprintf (hier, sizeof (hier), "%s/%s", SP_CGROUP_ROOT, names.v[i]);
      if (clean_hierarchy (r, hier_fd, hier, runs, include_current, only_list, found, &e) < 0)
        keep_first (&first, &e);
    }
  if (first)
    {
      *err = get_and_reset (&first);
      return -1;
    }
  return 0;
}

int
oci_cli_cleanup_orphans (struct sp_runtime_backend *rt, bool include_current,
                         struct sp_orphans_removed *removed, sp_error_t *err)
{
  struct oci_cli *r = (struct oci_cli *)rt;
  struct run_list runs __attribute__ ((cleanup (run_list_release))) = { 0 };
  struct run_list before __attribute__ ((cleanup (run_list_release))) = { 0 };
  struct run_list now __attribute__ ((cleanup (run_list_release))) = { 0 };
  cleanup_close int state_root_fd = open (r->state_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_error sp_error_t first = NULL;
  cleanup_error sp_error_t e = NULL;
  size_t rooted;

  if (state_root_fd < 0 && errno != ENOENT)
    return sp_make_error (err, errno, "open `%s`", r->state_root);
  if (state_root_fd >= 0 && sp_dir_names_read (state_root_fd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", r->state_root);
  for (size_t i = 0; i < names.len; i++)
    {
      if (!sp_bundle_id_valid (names.v[i]))
        continue;
      if (!include_current && strcmp (names.v[i], r->run_id) == 0)
        continue;
      if (run_list_add (&runs, names.v[i]) < 0)
        return sp_make_error (err, errno, "allocate");
    }
  rooted = runs.len;
  /* The current run's cgroups go too, even when its root is already gone.  */
  if (include_current && run_list_add_once (&runs, r->run_id) < 0)
    return sp_make_error (err, errno, "allocate");
  if (runs.len == 0)
    return 0;
  /* The cgroups there are first: a container's delete takes its own, and
     what went either way is said.  */
  if (removed != NULL && clean_cgroups (r, &runs, include_current, true, &before, &e) < 0)
    keep_first (&first, &e);
  for (size_t i = 0; i < rooted; i++)
    if (clean_run_root (r, state_root_fd, runs.v[i], removed, &e) < 0)
      keep_first (&first, &e);
  if (clean_cgroups (r, &runs, include_current, false, NULL, &e) < 0)
    keep_first (&first, &e);
  if (removed != NULL
      && (clean_cgroups (r, &runs, include_current, true, &now, &e) < 0
          || note_cgroups (&runs, &before, &now, removed, &e) < 0))
    keep_first (&first, &e);
  if (first)
    {
      *err = get_and_reset (&first);
      return sp_error_wrap (err, "clean up orphans");
    }
  return 0;
}

int
oci_cli_open (const struct oci_flavor *flavor, const struct sp_runtime_ops *ops,
              const struct sp_runtime_settings *settings, const char *const *flags,
              struct sp_runtime_backend **out, sp_error_t *err)
{
  const char *name = flavor->binary_name;
  struct oci_cli *r = NULL;

  *out = NULL;
  if (settings == NULL || settings->state_dir == NULL || settings->state_dir[0] != '/')
    return sp_make_error (err, 0, "%s: the state directory must be an absolute path", name);
  if (settings->run_id == NULL || !sp_bundle_id_valid (settings->run_id))
    return sp_make_error (err, 0, "%s: run id must be 1 to %d characters of a-z, 0-9 and -", name,
                          SP_ID_MAX_CHARS);
  if (settings->binary && settings->binary[0] != '/')
    return sp_make_error (err, 0, "%s: the binary `%s` must be an absolute path", name, settings->binary);

  r = calloc (1, sizeof (*r));
  if (r == NULL)
    return sp_make_error (err, errno, "allocate");
  r->base.ops = ops;
  r->flavor = flavor;
  for (size_t i = 0; flags != NULL && flags[i] != NULL; i++)
    {
      if (i == OCI_CLI_FLAGS_MAX || (r->flags[i] = strdup (flags[i])) == NULL)
        {
          oci_cli_close (&r->base);
          return sp_make_error (err, i == OCI_CLI_FLAGS_MAX ? 0 : ENOMEM, "%s: too many flags", name);
        }
    }
  r->binary = settings->binary ? strdup (settings->binary) : runtime_binary_find (name);
  if (r->binary == NULL)
    {
      int e = errno;
      oci_cli_close (&r->base);
      return sp_make_error (err, e, "%s: no `%s` in %s", name, name, SP_RUNTIME_SEARCH_PATH);
    }
  r->state_dir = strdup (settings->state_dir);
  r->run_id = strdup (settings->run_id);
  if (r->state_dir == NULL || r->run_id == NULL
      || asprintf (&r->state_root, "%s/%s", r->state_dir, flavor->state_name) < 0)
    {
      r->state_root = NULL; /* undefined after a failed asprintf */
      oci_cli_close (&r->base);
      return sp_make_error (err, ENOMEM, "allocate");
    }
  if (asprintf (&r->root, "%s/%s", r->state_root, r->run_id) < 0)
    {
      r->root = NULL;
      oci_cli_close (&r->base);
      return sp_make_error (err, ENOMEM, "allocate");
    }
  *out = &r->base;
  return 0;
}
