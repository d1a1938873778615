/* The Docker backend: runc under Docker Engine, driven through the Engine
   API over the daemon's Unix socket (docs/runtimes.md, "Docker").  No
   docker CLI.  The socket's path is held here and nowhere else: no error,
   no audit line and no sandbox sees it.  After verify and use_rootfs the
   struct is only read, but for the one inspect after the first create.  */
#define _GNU_SOURCE
#include "runtimes/backends.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cause.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "bundle/bundle.h"
#include "os/fileio.h"
#include "runtimes/cgroup_stats.h"
#include "text/yajl_util.h"

#include "runtimes/docker_api.h"
#include "runtimes/docker_create.h"
#include "runtimes/docker_image.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define DEFAULT_SOCKET "/var/run/docker.sock"
/* create, start, kill, inspect, remove: each is given this long.  */
#define CALL_TIMEOUT_MS (30 * 1000)
/* A bundle's config.json.  */
#define CONFIG_MAX_BYTES (1024 * 1024)

struct docker
{
  struct sp_runtime_backend base;
  char *socket;
  char *state_dir;
  char *daemon_state_dir;
  char *run_id;
  char *state_key; /* DOCKER_LABEL_STATE's value: the state directory's dev-inode */
  char *image;     /* after use_rootfs */
  char *rootfs_digest;
  char *image_layer;     /* its one layer, "sha256:<hex>": the digest of the rootfs's tar */
  atomic_bool inspected; /* the first create was inspected field by field */
};

static const long OK_200[] = { 200, 0 };
static const long OK_201[] = { 201, 0 };
static const long OK_204[] = { 204, 304, 0 };
static const long OK_REMOVE[] = { 204, 404, 0 };

static int
container_path (char *out, size_t size, const char *id, const char *rest)
{
  int n = snprintf (out, size, DOCKER_API_PREFIX "/containers/%s%s", id, rest);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

void
sp_docker_accepts (char *out, size_t size)
{
  snprintf (out, size, "a Docker daemon with Engine API %d.%d or later", DOCKER_API_VERSION_MAJOR,
            DOCKER_API_VERSION_MINOR);
}

static int
docker_verify (struct sp_runtime_backend *rt, sp_error_t *err)
{
  struct docker *d = (struct docker *)rt;
  static const long any[] = { 200, 0 };
  struct docker_response r;
  cleanup_json struct sp_json *version = NULL;
  cleanup_json struct sp_json *info = NULL;
  const struct sp_json *api, *runtimes, *security;
  unsigned major = 0, minor = 0;
  bool seccomp = false;

  if (docker_api_call (d->socket, "GET", "/_ping", NULL, -1, CALL_TIMEOUT_MS, &r, err) < 0)
    {
      sp_error_wrap (err, "the Docker daemon is not reachable");
      return sp_error_hint (err, "start dockerd, or give the socket it listens on with --docker-socket PATH");
    }
  if (r.status != 200 || strcmp (r.body, "OK") != 0)
    {
      docker_response_release (&r);
      return sp_make_error (err, 0, "the Docker daemon's /_ping did not answer OK");
    }
  docker_response_release (&r);
  if (docker_api_json (d->socket, "GET", "/version", NULL, any, CALL_TIMEOUT_MS, &version, NULL, err) < 0)
    return -1;
  api = sp_json_object_get (version, "ApiVersion");
  if (api == NULL || api->type != SP_JSON_STRING || sscanf (api->u.string.data, "%u.%u", &major, &minor) != 2)
    return sp_make_error (err, 0, "the Docker daemon's /version names no ApiVersion");
  if (major < DOCKER_API_VERSION_MAJOR
      || (major == DOCKER_API_VERSION_MAJOR && minor < DOCKER_API_VERSION_MINOR))
    return sp_make_error (err, 0,
                          "the Docker daemon's Engine API version %u.%u is older than the %d.%d this needs",
                          major, minor, DOCKER_API_VERSION_MAJOR, DOCKER_API_VERSION_MINOR);
  if (docker_api_json (d->socket, "GET", DOCKER_API_PREFIX "/info", NULL, any, CALL_TIMEOUT_MS, &info, NULL,
                       err)
      < 0)
    return -1;
  runtimes = sp_json_object_get (info, "Runtimes");
  if (sp_json_object_get (runtimes, "runc") == NULL)
    return sp_make_error (err, 0, "the Docker daemon lists no runc runtime in /info");
  security = sp_json_object_get (info, "SecurityOptions");
  for (size_t i = 0; security && security->type == SP_JSON_ARRAY && i < security->u.array.len; i++)
    {
      const struct sp_json *o = security->u.array.items[i];
      seccomp = seccomp || (o->type == SP_JSON_STRING && strncmp (o->u.string.data, "name=seccomp", 12) == 0);
    }
  if (!seccomp)
    return sp_make_error (err, 0, "the Docker daemon has no seccomp support in /info's SecurityOptions");
  return 0;
}

static int
docker_prepare (struct sp_runtime_backend *rt, sp_error_t *err)
{
  (void)rt;
  (void)err;
  return 0;
}

static int
docker_use_rootfs (struct sp_runtime_backend *rt, const char *root, const char *digest, sp_error_t *err)
{
  struct docker *d = (struct docker *)rt;

  free (d->image);
  d->image = NULL;
  free (d->rootfs_digest);
  d->rootfs_digest = strdup (digest);
  if (d->rootfs_digest == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  free (d->image_layer);
  d->image_layer = NULL;
  return docker_image_ensure (d->socket, root, digest, &d->image, &d->image_layer, err);
}

/* The create body of a job: its bundle's config.json, mapped.  */
static int
job_body (const struct docker *d, const struct sp_runtime_job *job, bool for_run, char **body,
          char **image_out, sp_error_t *err)
{
  cleanup_free char *image = NULL;
  cleanup_free char *path = NULL;
  cleanup_free char *text = NULL;
  cleanup_json struct sp_json *config = NULL;
  const struct docker_paths paths = { .state_dir = d->state_dir, .daemon_state_dir = d->daemon_state_dir };
  const struct sp_json *annotations, *digest;
  size_t len = 0;

  if (asprintf (&path, "%s/config.json", job->bundle_dir) < 0)
    {
      path = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  if (sp_read_path_capped (path, CONFIG_MAX_BYTES, &text, &len, err) < 0
      || sp_json_parse (text, len, 64, &config, err) < 0)
    return sp_error_wrap (err, "docker: the bundle");
  /* The image is the rootfs the bundle names; a run also needs it to be the
     one use_rootfs imported and checked.  */
  annotations = sp_json_object_get (config, "annotations");
  digest = sp_json_object_get (annotations, DOCKER_LABEL_ROOTFS);
  if (digest == NULL || digest->type != SP_JSON_STRING
      || docker_image_name (digest->u.string.data, &image, err) < 0)
    return sp_error_wrap (err, "docker: the bundle's rootfs digest");
  if (for_run && (d->image == NULL || strcmp (d->image, image) != 0))
    return sp_make_error (err, 0, "docker: the bundle's rootfs is not the image use_rootfs checked");
  if (docker_create_body (config, job->bundle_dir, image, d->state_key, &paths, body, err) < 0)
    return -1;
  if (image_out)
    *image_out = get_and_reset (&image);
  return 0;
}

/* After the first create: every mapped field, read back, is what was sent.  */
static int
check_applied (const struct docker *d, const char *id, const char *body, sp_error_t *err)
{
  char path[256];
  cleanup_json struct sp_json *sent = NULL;
  cleanup_json struct sp_json *got = NULL;

  if (container_path (path, sizeof (path), id, "/json") < 0)
    return sp_make_error (err, 0, "docker: container id too long");
  if (sp_json_parse (body, strlen (body), 64, &sent, err) < 0
      || docker_api_json (d->socket, "GET", path, NULL, OK_200, CALL_TIMEOUT_MS, &got, NULL, err) < 0)
    return sp_error_wrap (err, "docker: inspect the first container");
  for (size_t i = 0; docker_checked_fields[i] != NULL; i++)
    {
      const char *field = docker_checked_fields[i];
      const char *dot = strchr (field, '.');
      const struct sp_json *want, *have;

      if (dot != NULL)
        {
          char head[32];
          snprintf (head, sizeof (head), "%.*s", (int)(dot - field), field);
          want = sp_json_object_get (sp_json_object_get (sent, head), dot + 1);
          have = sp_json_object_get (sp_json_object_get (got, head), dot + 1);
        }
      else
        {
          want = sp_json_object_get (sent, field);
          have = sp_json_object_get (sp_json_object_get (got, "Config"), field);
        }
      if (want != NULL && !docker_json_equal (want, have))
        return sp_make_error (err, 0, "docker: the daemon did not apply `%s` as sent; refusing to run weaker",
                              field);
    }
  return 0;
}

static int
remove_container (const struct docker *d, const char *id, sp_error_t *err)
{
  char path[256];
  long status = 0;

  if (container_path (path, sizeof (path), id, "?force=1&v=1") < 0)
    return sp_make_error (err, 0, "docker: container id too long");
  if (docker_api_json (d->socket, "DELETE", path, NULL, OK_REMOVE, CALL_TIMEOUT_MS, NULL, &status, err) < 0)
    return sp_error_wrap (err, "docker: remove `%s`", id);
  /* Confirm it is gone.  */
  if (container_path (path, sizeof (path), id, "/json") < 0)
    return -1;
  {
    static const long gone[] = { 404, 0 };
    if (docker_api_json (d->socket, "GET", path, NULL, gone, CALL_TIMEOUT_MS, NULL, NULL, err) < 0)
      return sp_error_wrap (err, "docker: `%s` is still there after its removal", id);
  }
  return 0;
}

/* rmdir of the cgroup at path (below SP_CGROUP_ROOT) in every hierarchy,
   once its container is gone; briefly retried while the daemon's own
   cleanup of the container's cgroup below it finishes.  */
static int
remove_cgroup (const char *path, sp_error_t *err)
{
  cleanup_dir DIR *root = opendir (SP_CGROUP_ROOT);
  struct dirent *de;

  if (root == NULL)
    return sp_make_error (err, errno, "open `%s`", SP_CGROUP_ROOT);
  while ((de = readdir (root)) != NULL)
    {
      char dir[512];

      if (de->d_name[0] == '.' || de->d_type != DT_DIR)
        continue;
      snprintf (dir, sizeof (dir), "%s/%s%s", SP_CGROUP_ROOT, de->d_name, path);
      for (int tries = 0;; tries++)
        {
          if (rmdir (dir) == 0 || errno == ENOENT || errno == ENOTDIR)
            break;
          if (errno != EBUSY || tries >= 200)
            return sp_make_error (err, errno, "remove the cgroup `%s`", dir);
          struct timespec nap = { 0, 10 * 1000 * 1000 };
          nanosleep (&nap, NULL);
        }
    }
  /* A v2-only host has no hierarchies below the root: the path is direct.  */
  {
    char dir[512];
    snprintf (dir, sizeof (dir), "%s%s", SP_CGROUP_ROOT, path);
    if (rmdir (dir) < 0 && errno != ENOENT && errno != ENOTDIR && errno != EBUSY)
      return sp_make_error (err, errno, "remove the cgroup `%s`", dir);
  }
  return 0;
}

static int
kill_container (const struct docker *d, const char *id, sp_error_t *err)
{
  static const long ok[] = { 204, 409, 0 }; /* 409: it is not running */
  char path[256];

  if (container_path (path, sizeof (path), id, "/kill?signal=KILL") < 0)
    return sp_make_error (err, 0, "docker: container id too long");
  return docker_api_json (d->socket, "POST", path, NULL, ok, CALL_TIMEOUT_MS, NULL, NULL, err);
}

/* A container `create` made: copies of what start and destroy need, so that
   the job may be gone by then.  */
struct sp_runtime_sandbox
{
  char *name;        /* job->container_id: errors name the container by it */
  char id[65];       /* the daemon's id, 64 hex: every later call uses it */
  char *cgroup_path; /* the container's parent cgroup, or NULL */
  char *script;      /* the bundle's probe.py, sealed at create (seal_script) */
  int stdin_fd;      /* the attach connection, the container's stdin while open; -1 once closed */
  int pidfd;         /* started ahead: its waiting interpreter, the container's init; else -1 */
  uint32_t timeout_seconds;
  bool started;
};

static void
sandbox_free (struct sp_runtime_sandbox *sb)
{
  if (sb == NULL)
    return;
  sp_closep (&sb->stdin_fd);
  sp_closep (&sb->pidfd);
  free (sb->name);
  free (sb->cgroup_path);
  free (sb->script);
  free (sb);
}

/* The container (by name when the daemon gave no id) and its parent
   cgroup: ?force=1 kills it first when it still runs.  The first failure
   is kept.  */
static int
sandbox_remove (const struct docker *d, const char *id_or_name, const char *cgroup_path, sp_error_t *err)
{
  cleanup_error sp_error_t ignored = NULL;
  int ret = 0;

  if (remove_container (d, id_or_name, err) < 0)
    ret = -1;
  /* The cgroup goes even when the container could not be confirmed gone:
     an rmdir of a cgroup still in use fails, harmlessly.  */
  if (cgroup_path != NULL && remove_cgroup (cgroup_path, ret < 0 ? &ignored : err) < 0)
    ret = -1;
  return ret;
}

/* The script as a read-only bind of itself, nosuid, nodev and noexec: the
   container binds it read-write (docker_create.c says why), so these are
   the flags it has inside.  Done at create, before the container starts:
   its bind of the script is made then, from what is mounted there; serve
   writes the script later through a descriptor it opened before
   (sp_bundle_open_script).  The workspace's destroy unmounts it.
   The bind gets its flags before it is attached: a remount's would stay
   on this copy, and a daemon in another mount namespace (--docker-state-dir)
   sees the copy propagated to it, with the flags it had when attached.  */
static int
seal_script (const char *script, sp_error_t *err)
{
  const unsigned long want = ST_RDONLY | ST_NOSUID | ST_NODEV | ST_NOEXEC;
  struct mount_attr attr = {
    .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
  };
  cleanup_close int tree = -1;
  struct statvfs st;

  tree = (int)syscall (SYS_open_tree, AT_FDCWD, script,
                       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
  if (tree < 0)
    return sp_make_error (err, errno, "clone the script's mount");
  if (syscall (SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof (attr)) < 0)
    return sp_make_error (err, errno, "make the script's bind read-only");
  if (syscall (SYS_move_mount, tree, "", AT_FDCWD, script, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    return sp_make_error (err, errno, "bind the script onto itself");
  if (statvfs (script, &st) < 0)
    return sp_make_error (err, errno, "the script's bind");
  if ((st.f_flag & want) != want)
    return sp_make_error (err, 0, "the script's bind is not read-only, nosuid, nodev and noexec");
  return 0;
}

/* Starts a created container whose process is the interpreter started
   ahead (sp_bundle_spec.interpreter_waits), which then waits for end of
   file on the stdin the attach holds open; its init is then held by a
   pidfd, so that start can tell that it still waits.  The pid the daemon
   names is taken only if that process is in the container's cgroup.  */
static int
start_interpreter (struct docker *d, struct sp_runtime_sandbox *sb, sp_error_t *err)
{
  cleanup_json struct sp_json *state = NULL;
  cleanup_free char *cgroups = NULL;
  const struct sp_json *st;
  char path[256], below[256];
  size_t len = 0;
  int64_t pid = 0;

  if (sb->cgroup_path == NULL)
    return sp_make_error (err, 0, "an interpreter started ahead needs the container's cgroup");
  if (container_path (path, sizeof (path), sb->id, "/start") < 0
      || docker_api_json (d->socket, "POST", path, NULL, OK_204, CALL_TIMEOUT_MS, NULL, NULL, err) < 0)
    return sp_error_wrap (err, "start");
  container_path (path, sizeof (path), sb->id, "/json");
  if (docker_api_json (d->socket, "GET", path, NULL, OK_200, CALL_TIMEOUT_MS, &state, NULL, err) < 0)
    return sp_error_wrap (err, "inspect");
  st = sp_json_object_get (state, "State");
  if (sp_json_object_get (st, "Running") == NULL || sp_json_object_get (st, "Running")->type != SP_JSON_BOOL
      || !sp_json_object_get (st, "Running")->u.boolean
      || sp_json_integer (sp_json_object_get (st, "Pid"), 2, INT32_MAX, &pid) < 0)
    return sp_make_error (err, 0, "the interpreter started ahead is not running");
  sb->pidfd = (int)syscall (SYS_pidfd_open, (pid_t)pid, 0);
  if (sb->pidfd < 0)
    return sp_make_error (err, errno, "hold the interpreter started ahead (pidfd_open)");
  snprintf (path, sizeof (path), "/proc/%" PRId64 "/cgroup", pid);
  snprintf (below, sizeof (below), ":%s/", sb->cgroup_path);
  if (sp_read_path_capped (path, 64 * 1024, &cgroups, &len, err) < 0)
    return sp_error_wrap (err, "the interpreter started ahead");
  if (strstr (cgroups, below) == NULL)
    return sp_make_error (err, 0, "the pid the daemon named is not in the container's cgroup");
  return 0;
}

static int
docker_create (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, struct sp_run_facts *facts,
               struct sp_runtime_sandbox **out, sp_error_t *err)
{
  struct docker *d = (struct docker *)rt;
  cleanup_free char *body = NULL;
  cleanup_free char *create_path = NULL;
  cleanup_json struct sp_json *created = NULL;
  cleanup_error sp_error_t ignored = NULL;
  struct sp_runtime_sandbox *sb;
  const struct sp_json *id_json;

  *out = NULL;
  memset (facts, 0, sizeof (*facts));
  facts->exit_code = -1;
  if (job == NULL || job->bundle_dir == NULL || job->container_id == NULL || job->timeout_seconds == 0
      || job->timeout_seconds > SP_TIMEOUT_MAX_SECONDS)
    return sp_make_error (err, 0, "docker create: bad job");
  if (job_body (d, job, true, &body, NULL, err) < 0)
    return -1;
  /* Every use of the image: still the rootfs's, by its layer, not only by
     its tag and label (which anyone who can reach the daemon can copy).  */
  if (docker_image_check (d->socket, d->image, d->rootfs_digest, d->image_layer, err) < 0)
    return sp_error_wrap (err, "docker");
  sb = calloc (1, sizeof (*sb));
  if (sb == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  sb->timeout_seconds = job->timeout_seconds;
  sb->stdin_fd = -1;
  sb->pidfd = -1;
  sb->name = strdup (job->container_id);
  sb->cgroup_path = job->cgroup_path ? strdup (job->cgroup_path) : NULL;
  if (asprintf (&sb->script, "%s/%s", job->bundle_dir, SP_BUNDLE_SCRIPT) < 0)
    sb->script = NULL;
  if (sb->name == NULL || sb->script == NULL || (job->cgroup_path && sb->cgroup_path == NULL)
      || asprintf (&create_path, DOCKER_API_PREFIX "/containers/create?name=%s", job->container_id) < 0)
    {
      create_path = NULL;
      sandbox_free (sb);
      return sp_make_error (err, ENOMEM, "allocate");
    }
  facts->launched = true;
  facts->stage = SP_RUN_STAGE_CREATE;
  if (docker_api_json (d->socket, "POST", create_path, body, OK_201, CALL_TIMEOUT_MS, &created, NULL, err)
      < 0)
    {
      struct docker_response ping;

      /* A daemon that does not answer at all ran nothing: the host's
         failure, as a runtime binary that cannot be executed is.  */
      if (docker_api_call (d->socket, "GET", "/_ping", NULL, -1, CALL_TIMEOUT_MS, &ping, &ignored) < 0)
        {
          sp_error_release (&ignored);
          facts->launched = false;
          facts->stage = SP_RUN_STAGE_NONE;
          sandbox_free (sb);
          return sp_error_wrap (err, "docker: create `%s`", job->container_id);
        }
      docker_response_release (&ping);
      sp_error_wrap (err, "docker: create `%s`", job->container_id);
      /* It may exist all the same (a create that timed out on our side).  */
      sandbox_remove (d, sb->name, sb->cgroup_path, &ignored);
      sandbox_free (sb);
      return -1;
    }
  id_json = sp_json_object_get (created, "Id");
  if (id_json == NULL || id_json->type != SP_JSON_STRING || id_json->u.string.len != 64
      || strspn (id_json->u.string.data, "0123456789abcdef") != 64)
    {
      sandbox_remove (d, sb->name, sb->cgroup_path, &ignored);
      sandbox_free (sb);
      return sp_make_error (err, 0, "docker: create `%s` answered no container id", job->container_id);
    }
  snprintf (sb->id, sizeof (sb->id), "%s", id_json->u.string.data);
  if (!atomic_load (&d->inspected))
    {
      if (check_applied (d, sb->id, body, err) < 0)
        {
          sandbox_remove (d, sb->id, sb->cgroup_path, &ignored);
          sandbox_free (sb);
          return -1;
        }
      atomic_store (&d->inspected, true);
    }
  /* The container's stdin (OpenStdin, StdinOnce): the daemon's pipe, open
     while this attach lasts.  Cold, it ends here, so that the probe reads
     an empty pipe at its end, as one started ahead does after its signal.
     The script is sealed now, before anything starts: serve writes it later
     through a descriptor it opened before (sp_bundle_open_script).  */
  if (docker_api_attach_stdin (d->socket, sb->id, CALL_TIMEOUT_MS, &sb->stdin_fd, err) < 0
      || seal_script (sb->script, err) < 0
      || (job->start_ahead ? start_interpreter (d, sb, err) : (sp_closep (&sb->stdin_fd), 0)) < 0)
    {
      sp_error_wrap (err, "docker: create `%s`", job->container_id);
      sandbox_remove (d, sb->id, sb->cgroup_path, &ignored);
      sandbox_free (sb);
      return -1;
    }
  *out = sb;
  return 0;
}

static int
docker_start (struct sp_runtime_backend *rt, struct sp_runtime_sandbox *sb, struct sp_run_facts *facts,
              sp_error_t *err)
{
  struct docker *d = (struct docker *)rt;
  cleanup_json struct sp_json *state = NULL;
  cleanup_error sp_error_t ignored = NULL;
  const struct sp_json *st;
  char path[256];
  struct sp_cgroup_stats stats;
  uint64_t start;
  uint64_t cpu_before = 0;
  long status = 0;
  int64_t code = -1;

  if (sb == NULL)
    return sp_make_error (err, 0, "docker start: no sandbox");
  /* A second start would find an exited container: refused, and the first
     one's facts are left as they are.  */
  if (sb->started)
    return sp_make_error (err, 0, "docker: start `%s`: a sandbox starts once", sb->name);
  sb->started = true;
  memset (facts, 0, sizeof (*facts));
  facts->exit_code = -1;
  facts->launched = true;
  facts->stage = SP_RUN_STAGE_CREATE;
  if (sb->pidfd >= 0)
    {
      struct pollfd init = { .fd = sb->pidfd, .events = POLLIN };

      /* Started ahead: it must still wait for its script.  The timeout and
         the facts count from the signal, the end of its stdin.  */
      if (sb->stdin_fd < 0 || poll (&init, 1, 0) != 0)
        return sp_make_error (err, 0,
                              "docker: start `%s`: the interpreter started ahead did not wait for its script",
                              sb->name);
      if (sb->cgroup_path && sp_cgroup_stats_read (sb->cgroup_path, &stats, &ignored) == 0)
        cpu_before = stats.cpu_ns;
      sp_error_release (&ignored);
      start = sp_monotonic_ns ();
      sp_closep (&sb->stdin_fd);
    }
  else
    {
      /* The timeout counts from here: a container created ahead has waited
         for its request, not run.  */
      start = sp_monotonic_ns ();
      if (container_path (path, sizeof (path), sb->id, "/start") < 0
          || docker_api_json (d->socket, "POST", path, NULL, OK_204, CALL_TIMEOUT_MS, NULL, NULL, err) < 0)
        {
          struct docker_response ping;

          /* A daemon that does not answer at all started nothing: the host's
             failure, as at create (a sandbox made ahead was created while it
             still answered).  */
          if (docker_api_call (d->socket, "GET", "/_ping", NULL, -1, CALL_TIMEOUT_MS, &ping, &ignored) < 0)
            facts->stage = SP_RUN_STAGE_NONE;
          else
            docker_response_release (&ping);
          sp_error_release (&ignored);
          return sp_error_wrap (err, "docker: start `%s`", sb->name);
        }
    }
  facts->stage = SP_RUN_STAGE_PROBE;

  /* The wait is the timeout: when it runs out, the container is killed.
     Any other failure of the wait (an answer that cannot be read, a
     daemon gone) is the runtime's or the host's, never a timeout: the
     container is killed all the same, since nothing says it ended.  */
  container_path (path, sizeof (path), sb->id, "/wait");
  {
    cleanup_json struct sp_json *waited = NULL;
    cleanup_error sp_error_t wait_err = NULL;

    if (docker_api_json (d->socket, "POST", path, NULL, OK_200, (long)sb->timeout_seconds * 1000, &waited,
                         NULL, &wait_err)
        < 0)
      {
        facts->timed_out = sp_error_cause (wait_err) == SP_CAUSE_TIMEOUT;
        kill_container (d, sb->id, &ignored);
        sp_error_release (&ignored);
        if (docker_api_json (d->socket, "POST", path, NULL, OK_200, SP_SERVE_KILL_GRACE_SECONDS * 1000L, NULL,
                             NULL, &ignored)
            < 0)
          sp_error_release (&ignored);
        if (!facts->timed_out)
          {
            struct docker_response ping;

            facts->wall_ns = sp_monotonic_ns () - start;
            *err = get_and_reset (&wait_err);
            /* A daemon that no longer answers at all is the host's failure,
               as at create and start, whatever broke the wait.  */
            if (docker_api_call (d->socket, "GET", "/_ping", NULL, -1, CALL_TIMEOUT_MS, &ping, &ignored) < 0)
              {
                sp_error_release (&ignored);
                if (*err != NULL)
                  (*err)->cause = SP_CAUSE_ENVIRONMENT;
                return sp_error_wrap (err, "docker: wait for `%s` (the daemon no longer answers)", sb->name);
              }
            docker_response_release (&ping);
            return sp_error_wrap (err, "docker: wait for `%s`", sb->name);
          }
      }
  }
  facts->wall_ns = sp_monotonic_ns () - start;

  /* The container's own account: its exit and whether the OOM killer
     struck.  Statistics are for the audit log only.  */
  container_path (path, sizeof (path), sb->id, "/json");
  if (docker_api_json (d->socket, "GET", path, NULL, OK_200, CALL_TIMEOUT_MS, &state, &status, err) < 0)
    return sp_error_wrap (err, "docker: inspect `%s`", sb->name);
  st = sp_json_object_get (state, "State");
  facts->oom = sp_json_object_get (st, "OOMKilled")
               && sp_json_object_get (st, "OOMKilled")->type == SP_JSON_BOOL
               && sp_json_object_get (st, "OOMKilled")->u.boolean;
  if (facts->timed_out)
    facts->signal = SIGKILL;
  else if (sp_json_integer (sp_json_object_get (st, "ExitCode"), 0, 255, &code) == 0)
    facts->exit_code = (int)code;
  /* The container's parent cgroup (the bundle's cgroupsPath) holds its
     whole account, and outlives it.  */
  if (sb->cgroup_path != NULL)
    {
      if (sp_cgroup_stats_read (sb->cgroup_path, &stats, &ignored) == 0)
        {
          facts->peak_memory_bytes = stats.peak_memory_bytes;
          facts->cpu_ns = stats.cpu_ns > cpu_before ? stats.cpu_ns - cpu_before : 0;
          facts->oom = facts->oom || stats.oom_kills > 0;
        }
      sp_error_release (&ignored);
    }
  return 0;
}

static int
docker_destroy (struct sp_runtime_backend *rt, struct sp_runtime_sandbox *sb, sp_error_t *err)
{
  int ret;

  if (sb == NULL)
    return 0;
  ret = sandbox_remove ((struct docker *)rt, sb->id, sb->cgroup_path, err);
  sandbox_free (sb);
  return ret;
}

static int
docker_run (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, struct sp_run_facts *facts,
            sp_error_t *err)
{
  struct sp_runtime_sandbox *sb = NULL;
  cleanup_error sp_error_t ignored = NULL;
  int ret;

  if (docker_create (rt, job, facts, &sb, err) < 0)
    return -1;
  ret = docker_start (rt, sb, facts, err);
  if (docker_destroy (rt, sb, *err ? &ignored : err) < 0)
    return -1;
  return *err ? -1 : ret;
}

static int
docker_kill (struct sp_runtime_backend *rt, const char *container_id, sp_error_t *err)
{
  return kill_container ((struct docker *)rt, container_id, err);
}

static int
docker_cleanup_orphans (struct sp_runtime_backend *rt, bool include_current,
                        struct sp_orphans_removed *removed, sp_error_t *err)
{
  struct docker *d = (struct docker *)rt;
  cleanup_free char *filter = NULL;
  cleanup_free char *filter_q = NULL;
  cleanup_free char *path = NULL;
  cleanup_json struct sp_json *list = NULL;
  cleanup_error sp_error_t first = NULL;

  if (asprintf (&filter, "{\"label\":[\"%s=%s\"]}", DOCKER_LABEL_STATE, d->state_key) < 0
      || (filter_q = docker_api_escape (filter)) == NULL
      || asprintf (&path, DOCKER_API_PREFIX "/containers/json?all=1&filters=%s", filter_q) < 0)
    {
      path = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  if (docker_api_json (d->socket, "GET", path, NULL, OK_200, CALL_TIMEOUT_MS, &list, NULL, err) < 0)
    return sp_error_wrap (err, "docker: list this state directory's containers");
  for (size_t i = 0; list && list->type == SP_JSON_ARRAY && i < list->u.array.len; i++)
    {
      const struct sp_json *c = list->u.array.items[i];
      const struct sp_json *cid = sp_json_object_get (c, "Id");
      const struct sp_json *run = sp_json_object_get (sp_json_object_get (c, "Labels"), DOCKER_LABEL_RUN);
      sp_error_t e = NULL;

      /* An id from the listing is used only as hex: never as an argument.  */
      if (cid == NULL || cid->type != SP_JSON_STRING || cid->u.string.len != 64
          || strspn (cid->u.string.data, "0123456789abcdef") != 64)
        continue;
      if (!include_current && run && run->type == SP_JSON_STRING
          && strcmp (run->u.string.data, d->run_id) == 0)
        continue;
      if (remove_container (d, cid->u.string.data, &e) == 0)
        {
          /* And its parent cgroup, named by its labels.  */
          const struct sp_json *inv
              = sp_json_object_get (sp_json_object_get (c, "Labels"), "org.sealed-probe.invocation");
          bool run_named = run && run->type == SP_JSON_STRING && sp_bundle_id_valid (run->u.string.data);
          bool cgroup_gone = false;

          if (run_named && inv && inv->type == SP_JSON_STRING && sp_bundle_id_valid (inv->u.string.data))
            {
              char cg[160];
              snprintf (cg, sizeof (cg), "%s/%s-%s", DOCKER_CGROUP_PARENT, run->u.string.data,
                        inv->u.string.data);
              cgroup_gone = remove_cgroup (cg, &e) == 0;
            }
          /* Said by its run label; one without is counted under "?".  */
          if (sp_orphans_note (removed, run_named ? run->u.string.data : "?", 1, cgroup_gone, false) < 0)
            {
              sp_error_release (&e);
              sp_error_release (&first);
              return sp_make_error (err, ENOMEM, "allocate");
            }
        }
      if (e != NULL)
        {
          if (first == NULL)
            first = e;
          else
            sp_error_release (&e);
        }
    }
  if (first)
    {
      *err = get_and_reset (&first);
      return sp_error_wrap (err, "clean up orphans");
    }
  return 0;
}

/* s as a JSON string, whole: sp_json_quote cuts long strings, and a
   path or a note must be shown as it is.  */
static int
put_json_string (FILE *f, const char *s)
{
  cleanup_yajl_gen yajl_gen g = yajl_gen_alloc (NULL);
  const unsigned char *buf;
  size_t len;

  if (g == NULL || sp_yajl_gen_cstr (g, s) != yajl_gen_status_ok
      || yajl_gen_get_buf (g, &buf, &len) != yajl_gen_status_ok)
    return -1;
  return fwrite (buf, 1, len, f) == len ? 0 : -1;
}

/* One request of the description; stdin_note, when given, says that the
   request's connection becomes the container's stdin, and when it ends.  */
static int
gen_request (FILE *f, bool first, const char *step, const char *method, const char *path, const char *body,
             const char *stdin_note)
{
  int bad = 0;

  fprintf (f, "%s\n    {\"step\": ", first ? "" : ",");
  bad |= put_json_string (f, step);
  fprintf (f, ", \"method\": \"%s\", \"path\": ", method);
  bad |= put_json_string (f, path);
  if (body)
    fprintf (f, ", \"body\": %s", body);
  if (stdin_note)
    {
      fprintf (f, ", \"upgrade\": \"tcp\", \"stdin\": ");
      bad |= put_json_string (f, stdin_note);
    }
  fputc ('}', f);
  return bad;
}

static int
docker_describe (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, char **json, size_t *len,
                 sp_error_t *err)
{
  struct docker *d = (struct docker *)rt;
  cleanup_free char *body = NULL;
  cleanup_free char *image = NULL;
  char path[256], create[256];
  char *buf = NULL;
  size_t size = 0;
  FILE *f;
  int bad = 0;

  *json = NULL;
  if (job_body (d, job, false, &body, &image, err) < 0)
    return -1;
  f = open_memstream (&buf, &size);
  if (f == NULL)
    return sp_make_error (err, errno, "allocate");
  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/images/%s/json", image);
  snprintf (create, sizeof (create), DOCKER_API_PREFIX "/containers/create?name=%s", job->container_id);
  fprintf (f, "{\n  \"runtime\": \"docker\",\n  \"image\": \"%s\",\n  \"requests\": [", image);
  bad |= gen_request (f, true, "image", "GET", path, NULL, NULL);
  bad |= gen_request (f, false, "create", "POST", create, body, NULL);
  /* The attach is a request whose connection then stays open as the
     container's stdin: when it closes is said beside it.  */
  container_path (path, sizeof (path), job->container_id, "/attach?stream=1&stdin=1");
  bad |= gen_request (f, false, "attach", "POST", path, NULL,
                      job->start_ahead
                          ? "serve closes this connection once probe.py holds the script (the "
                            "signal): the interpreter started ahead reads end of file"
                          : "serve closes this connection at once, before the start: the probe's "
                            "stdin is an empty pipe at its end");
  container_path (path, sizeof (path), job->container_id, "/start");
  if (job->start_ahead)
    {
      bad |= gen_request (f, false, "start (the interpreter, ahead of the request)", "POST", path, NULL,
                          NULL);
      container_path (path, sizeof (path), job->container_id, "/json");
      bad |= gen_request (f, false, "inspect (its pid, held by a pidfd)", "GET", path, NULL, NULL);
    }
  else
    bad |= gen_request (f, false, "start", "POST", path, NULL, NULL);
  container_path (path, sizeof (path), job->container_id, "/wait");
  bad |= gen_request (f, false, "wait (under the timeout)", "POST", path, NULL, NULL);
  container_path (path, sizeof (path), job->container_id, "/kill?signal=KILL");
  bad |= gen_request (f, false, "kill (on timeout or stop)", "POST", path, NULL, NULL);
  container_path (path, sizeof (path), job->container_id, "/json");
  bad |= gen_request (f, false, "inspect", "GET", path, NULL, NULL);
  container_path (path, sizeof (path), job->container_id, "?force=1&v=1");
  bad |= gen_request (f, false, "remove", "DELETE", path, NULL, NULL);
  fprintf (f, "\n  ]\n}\n");
  if (fclose (f) != 0 || bad)
    {
      free (buf);
      return sp_make_error (err, 0, "describe the Docker requests");
    }
  *json = buf;
  *len = size;
  return 0;
}

static void
docker_close (struct sp_runtime_backend *rt)
{
  struct docker *d = (struct docker *)rt;

  if (d == NULL)
    return;
  free (d->socket);
  free (d->state_dir);
  free (d->daemon_state_dir);
  free (d->run_id);
  free (d->state_key);
  free (d->image);
  free (d->rootfs_digest);
  free (d->image_layer);
  free (d);
}

static const char *const docker_evidence[] = {
  "/proc/version is the host kernel's, and no gVisor file (/proc/sentry-meminfo) exists",
  NULL,
};

static const struct sp_runtime_ops docker_ops = {
  .name = "docker",
  .kernel = SP_SANDBOX_KERNEL_HOST,
  .canary_evidence = docker_evidence,
  .starts_ahead = true,
  .verify = docker_verify,
  .prepare = docker_prepare,
  .use_rootfs = docker_use_rootfs,
  .run = docker_run,
  .describe = docker_describe,
  .create = docker_create,
  .start = docker_start,
  .destroy = docker_destroy,
  .kill = docker_kill,
  .cleanup_orphans = docker_cleanup_orphans,
  .close = docker_close,
};

int
sp_docker_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out, sp_error_t *err)
{
  struct docker *d;
  struct stat st;

  *out = NULL;
  if (settings == NULL || settings->state_dir == NULL || settings->state_dir[0] != '/'
      || settings->run_id == NULL)
    return sp_make_error (err, 0, "docker: the state directory must be an absolute path");
  if (settings->docker_socket && settings->docker_socket[0] != '/')
    return sp_make_error (err, 0, "docker: --docker-socket must be an absolute path");
  if (settings->docker_state_dir && settings->docker_state_dir[0] != '/')
    return sp_make_error (err, 0, "docker: --docker-state-dir must be an absolute path");
  if (stat (settings->state_dir, &st) < 0)
    return sp_make_error (err, errno, "docker: the state directory");
  d = calloc (1, sizeof (*d));
  if (d == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  d->base.ops = &docker_ops;
  d->socket = strdup (settings->docker_socket ? settings->docker_socket : DEFAULT_SOCKET);
  d->state_dir = strdup (settings->state_dir);
  d->daemon_state_dir
      = strdup (settings->docker_state_dir ? settings->docker_state_dir : settings->state_dir);
  d->run_id = strdup (settings->run_id);
  if (asprintf (&d->state_key, "%jx-%jx", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino) < 0)
    d->state_key = NULL;
  if (d->socket == NULL || d->state_dir == NULL || d->daemon_state_dir == NULL || d->run_id == NULL
      || d->state_key == NULL)
    {
      docker_close (&d->base);
      return sp_make_error (err, ENOMEM, "allocate");
    }
  *out = &d->base;
  return 0;
}
