/* The docker backend's create, start and destroy (runtime.h, src/runtimes/docker.c)
   against the project's real dockerd (scripts/dockerd, SP_DOCKER_SOCKET), as
   root: a container created ahead runs the script bytes written into its
   bound file after the create (serve writes probe.py then: same inode), one
   destroyed unstarted never ran, the timeout counts from start, a failure at
   start or at create is the runtime's and leaves nothing, and run is the
   three in a row.  The bundle is a minimal one that the create-body mapping
   accepts: an image of an empty tree with the host's /usr bound read-only
   (Debian's merged /usr), imported under a digest of this process's own and
   removed at the end.  Without the daemon: a SKIP saying so, a failure under
   CI=true (sp_harness's convention for a missing runtime).  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "runtimes/runtime.h"

#include "sp_check.h"
#include "sp_tmpdir.h"
#include "runtimes/docker_api.h"

#define RUN_ID "checkdocker"

static const char *sock;
static char top[64];
static char state[128];
static char rootfs[128];
static char bundle[128];
static char work[128];
static char script[128];
static char usr_ro[128];
static char out_file[128];
static char digest[80];
static char image[80];
static struct sp_runtime_backend *rt;
static int script_fd = -1; /* the script, open for writing before the create (open_script) */

/* The create body's mapping wants every field a generated bundle has.  */
static const char config_fmt[]
    = "{\"ociVersion\":\"1.0.2-dev\","
      "\"process\":{\"terminal\":false,\"user\":{\"uid\":0,\"gid\":0,\"additionalGids\":[]},"
      "\"args\":[\"/bin/sh\",\"/s/script\"],\"env\":[\"PATH=/usr/bin:/bin\"],\"cwd\":\"/\","
      "\"capabilities\":{\"bounding\":[],\"effective\":[],\"inheritable\":[],\"permitted\":[],\"ambient\":[]}"
      ","
      "\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"hard\":256,\"soft\":256}],"
      "\"noNewPrivileges\":true,\"oomScoreAdj\":500},"
      "\"root\":{\"path\":\"rootfs\",\"readonly\":true},\"hostname\":\"probe\",\"domainname\":\"none\","
      "\"mounts\":["
      "{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\",\"options\":[\"nosuid\",\"noexec\","
      "\"nodev\"]},"
      "{\"destination\":\"/"
      "dev\",\"type\":\"tmpfs\",\"source\":\"tmpfs\",\"options\":[\"nosuid\",\"mode=755\"]},"
      "{\"destination\":\"/sys\",\"type\":\"sysfs\",\"source\":\"sysfs\",\"options\":[\"nosuid\",\"noexec\","
      "\"nodev\",\"ro\"]},"
      "{\"destination\":\"/tmp\",\"type\":\"tmpfs\",\"source\":\"tmpfs\",\"options\":[\"nosuid\",\"nodev\","
      "\"size=1m\"]},"
      "{\"destination\":\"/usr\",\"type\":\"bind\",\"source\":\"%s\",\"options\":[\"rbind\",\"ro\"]},"
      "{\"destination\":\"/s/script\",\"type\":\"bind\",\"source\":\"%s\",\"options\":[\"bind\",\"ro\"]},"
      "{\"destination\":\"/w\",\"type\":\"bind\",\"source\":\"%s\",\"options\":[\"bind\",\"rw\"]}],"
      "\"annotations\":{\"org.sealed-probe.rootfs.digest\":\"%s\",\"org.sealed-probe.run\":\"" RUN_ID "\","
      "\"org.sealed-probe.invocation\":\"%d-%d\"},"
      "\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"},{\"type\":\"ipc\"},{\"type\":"
      "\"uts\"},{\"type\":\"mount\"},{\"type\":\"cgroup\"}],"
      "\"rootfsPropagation\":\"private\","
      "\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}],"
      "\"memory\":{\"limit\":%lu,\"swap\":%lu},\"cpu\":{\"quota\":100000,\"period\":100000},"
      "\"pids\":{\"limit\":64}},"
      "\"cgroupsPath\":\"%s\","
      "\"maskedPaths\":[\"/proc/kcore\"],\"readonlyPaths\":[\"/proc/sys\"],"
      "\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ALLOW\"}}}";

static void
write_file (const char *path, const char *text, int flags)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, text, strlen (text)), (ssize_t)strlen (text));
  ck_assert_int_eq (close (fd), 0);
}

/* The script opened for writing before the create, as serve opens probe.py
   (sp_bundle_open_script): the backend seals the path read-only over itself
   at create, and the bytes go in through this descriptor afterwards.  */
static void
open_script (void)
{
  if (script_fd >= 0)
    close (script_fd);
  script_fd = open (script, O_WRONLY | O_CLOEXEC);
  ck_assert_int_ge (script_fd, 0);
}

/* Into the same inode, through that descriptor: no truncation, no rename.  */
static void
put_script (const char *text)
{
  ck_assert_int_ge (script_fd, 0);
  ck_assert_int_eq (write (script_fd, text, strlen (text)), (ssize_t)strlen (text));
}

static void
read_file (const char *path, char *buf, size_t size)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  ck_assert_int_ge (fd, 0);
  n = read (fd, buf, size - 1);
  ck_assert_int_ge (n, 0);
  buf[n] = '\0';
  close (fd);
}

/* The script's seal, which a start makes (serve's workspace removes it).  */
static void
unseal_script (void)
{
  while (umount2 (script, UMOUNT_NOFOLLOW) == 0)
    ;
}

/* The job's names: unique to this process and n, so that concurrent runs
   of this test on one daemon never meet.  */
struct names
{
  char container[64];
  char cgroup[64];
};

static struct sp_runtime_job
job_for (struct names *nm, int n, unsigned long memory, uint32_t timeout)
{
  char config[8192];

  snprintf (nm->container, sizeof (nm->container), "sp-" RUN_ID "-%d-%d", (int)getpid (), n);
  snprintf (nm->cgroup, sizeof (nm->cgroup), "/sealed-probe/" RUN_ID "-%d-%d", (int)getpid (), n);
  snprintf (config, sizeof (config), config_fmt, usr_ro, script, work, digest, (int)getpid (), n, memory,
            memory, nm->cgroup);
  {
    char path[160];
    snprintf (path, sizeof (path), "%s/config.json", bundle);
    write_file (path, config, O_TRUNC);
  }
  return (struct sp_runtime_job){
    .bundle_dir = bundle, .container_id = nm->container, .cgroup_path = nm->cgroup, .timeout_seconds = timeout
  };
}

static long
api_status (const char *method, const char *path, char **body)
{
  struct docker_response r;
  cleanup_error sp_error_t err = NULL;
  long status;

  ck_assert_msg (docker_api_call (sock, method, path, NULL, -1, 60000, &r, &err) == 0, "%s",
                 sp_error_message (err));
  status = r.status;
  if (body)
    *body = strdup (r.body);
  docker_response_release (&r);
  return status;
}

/* The container is gone: by name (404), from the list of all containers,
   and its parent cgroup with it.  */
static void
assert_gone (const struct names *nm)
{
  char path[256];
  cleanup_free char *list = NULL;
  struct stat st;

  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/containers/%s/json", nm->container);
  ck_assert_int_eq (api_status ("GET", path, NULL), 404);
  ck_assert_int_eq (api_status ("GET", DOCKER_API_PREFIX "/containers/json?all=1", &list), 200);
  ck_assert_msg (strstr (list, nm->container) == NULL, "`%s` is still in the daemon's list", nm->container);
  snprintf (path, sizeof (path), "/sys/fs/cgroup/pids%s", nm->cgroup);
  ck_assert_int_eq (lstat (path, &st), -1);
}

/* What the daemon says of the container: its State.Status.  */
static void
assert_status (const struct names *nm, const char *want)
{
  char path[256], needle[64];
  cleanup_free char *body = NULL;

  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/containers/%s/json", nm->container);
  ck_assert_int_eq (api_status ("GET", path, &body), 200);
  snprintf (needle, sizeof (needle), "\"Status\":\"%s\"", want);
  ck_assert_msg (strstr (body, needle) != NULL, "`%s` is not %s", nm->container, want);
}

/* Once for the whole suite, in the parent: the scratch tree and the
   image's digest.  */
static void
suite_setup (void)
{
  struct timespec ts;
  int fd;

  strcpy (top, "/tmp/sp-check-docker-XXXXXX");
  fd = sp_tmpdir_make (top);
  close (fd);
  snprintf (state, sizeof (state), "%s/state", top);
  snprintf (rootfs, sizeof (rootfs), "%s/rootfs", top);
  snprintf (bundle, sizeof (bundle), "%s/bundle", top);
  snprintf (work, sizeof (work), "%s/work", top);
  /* The script where serve has it: the backend seals bundle/probe.py.  */
  snprintf (script, sizeof (script), "%s/bundle/probe.py", top);
  snprintf (usr_ro, sizeof (usr_ro), "%s/usr", top);
  snprintf (out_file, sizeof (out_file), "%s/work/out", top);
  for (const char *const *d = (const char *const[]){ state, rootfs, bundle, work, usr_ro, NULL }; *d; d++)
    ck_assert_int_eq (mkdir (*d, 0755), 0);
  /* The host's /usr as a read-only mount: a read-only bind's source must
     be one (the mapping sends it read-write, keeping the source's flags).  */
  ck_assert_int_eq (mount ("/usr", usr_ro, NULL, MS_BIND | MS_REC, NULL), 0);
  ck_assert_int_eq (mount (NULL, usr_ro, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL), 0);
  for (const char *const *d = (const char *const[]){ "usr", "proc", "dev", "sys", "tmp", NULL }; *d; d++)
    {
      char p[160];
      snprintf (p, sizeof (p), "%s/%s", rootfs, *d);
      ck_assert_int_eq (mkdir (p, 0755), 0);
    }
  for (const char *const *l = (const char *const[]){ "bin", "lib", "lib64", NULL }; *l; l++)
    {
      char p[160], target[32];
      snprintf (p, sizeof (p), "%s/%s", rootfs, *l);
      snprintf (target, sizeof (target), "usr/%s", *l);
      ck_assert_int_eq (symlink (target, p), 0);
    }
  clock_gettime (CLOCK_REALTIME, &ts);
  snprintf (digest, sizeof (digest), "sha256:%012llx%08x%044d",
            (unsigned long long)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec)
                & 0xffffffffffffULL,
            (unsigned)getpid (), 0);
  snprintf (image, sizeof (image), "sealed-probe/rootfs:%.12s", digest + 7);
}

static void
suite_teardown (void)
{
  char path[160];

  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/images/%s?force=1", image);
  api_status ("DELETE", path, NULL);
  unseal_script ();
  umount2 (usr_ro, MNT_DETACH);
  sp_tmpdir_remove (top);
}

/* In each test's own process: the backend, verified, with the image.  */
static void
setup (void)
{
  struct sp_runtime_settings settings = { .state_dir = state, .run_id = RUN_ID, .docker_socket = sock };
  cleanup_error sp_error_t err = NULL;

  ck_assert_msg (sp_runtime_open (SP_RUNTIME_DOCKER, &settings, &rt, &err) == 0, "%s",
                 sp_error_message (err));
  ck_assert_ptr_nonnull (rt->ops->create);
  ck_assert_ptr_nonnull (rt->ops->start);
  ck_assert_ptr_nonnull (rt->ops->destroy);
  ck_assert_msg (rt->ops->verify (rt, &err) == 0, "%s", sp_error_message (err));
  ck_assert_msg (rt->ops->prepare (rt, &err) == 0, "%s", sp_error_message (err));
  ck_assert_msg (rt->ops->use_rootfs (rt, rootfs, digest, &err) == 0, "%s", sp_error_message (err));
  /* The script file exists, empty, at create time, as serve leaves it.  */
  unseal_script ();
  write_file (script, "", O_TRUNC);
  open_script ();
  write_file (out_file, "", O_TRUNC);
}

/* What a failed test left: every container of this state directory, and
   its parent cgroup (named by its run and invocation labels).  */
static void
teardown (void)
{
  cleanup_error sp_error_t err = NULL;

  if (rt != NULL)
    rt->ops->cleanup_orphans (rt, true, NULL, &err);
  sp_runtime_closep (&rt);
  if (script_fd >= 0)
    close (script_fd);
  script_fd = -1;
  unseal_script ();
}

static struct sp_runtime_sandbox *
create (const struct sp_runtime_job *job, struct sp_run_facts *facts)
{
  struct sp_runtime_sandbox *sb = NULL;
  cleanup_error sp_error_t err = NULL;

  ck_assert_msg (rt->ops->create (rt, job, facts, &sb, &err) == 0, "%s", sp_error_message (err));
  ck_assert_ptr_nonnull (sb);
  ck_assert (facts->launched);
  ck_assert_int_eq (facts->stage, SP_RUN_STAGE_CREATE);
  return sb;
}

static void
destroy (struct sp_runtime_sandbox *sb)
{
  cleanup_error sp_error_t err = NULL;

  ck_assert_msg (rt->ops->destroy (rt, sb, &err) == 0, "%s", sp_error_message (err));
}

START_TEST (a_created_container_runs_the_bytes_written_after_its_create)
{
  struct names nm;
  struct sp_runtime_job job = job_for (&nm, 1, 64ul << 20, 30);
  struct sp_run_facts facts;
  struct sp_runtime_sandbox *sb = create (&job, &facts);
  cleanup_error sp_error_t err = NULL;
  char out[64];

  assert_status (&nm, "created");
  /* Into the same inode, as serve writes probe.py, past the seal: the
     bind's source is that inode.  */
  put_script ("echo new > /w/out\nexit 7\n");
  ck_assert_msg (rt->ops->start (rt, sb, &facts, &err) == 0, "%s", sp_error_message (err));
  ck_assert (facts.launched);
  ck_assert_int_eq (facts.stage, SP_RUN_STAGE_PROBE);
  ck_assert_int_eq (facts.exit_code, 7);
  ck_assert_int_eq (facts.signal, 0);
  ck_assert (!facts.timed_out);
  ck_assert_uint_gt (facts.wall_ns, 0);
  read_file (out_file, out, sizeof (out));
  ck_assert_str_eq (out, "new\n");
  assert_status (&nm, "exited");
  /* A handle starts once.  */
  ck_assert_int_eq (rt->ops->start (rt, sb, &facts, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "starts once"));
  destroy (sb);
  assert_gone (&nm);
}
END_TEST

/* What the wrapper and the seal give the probe: /dev/null on fds 1 and 2
   (nothing for the shim to relay), exactly the bundle's environment (no
   HOSTNAME), and its script read-only, nosuid, nodev and noexec inside
   though the bind is sent read-write.  */
START_TEST (a_started_probe_has_null_stdio_the_bundle_env_and_a_sealed_script)
{
  struct names nm;
  struct sp_runtime_job job = job_for (&nm, 7, 64ul << 20, 30);
  struct sp_run_facts facts;
  struct sp_runtime_sandbox *sb = create (&job, &facts);
  cleanup_error sp_error_t err = NULL;
  char out[2048];
  struct statvfs st;

  put_script ("a=$(readlink /proc/$$/fd/1); b=$(readlink /proc/$$/fd/2)\n"
              "{ echo \"$a\"; echo \"$b\"; tr '\\000' '\\n' < /proc/$$/environ; grep ' /s/script ' "
              "/proc/self/mountinfo | cut -d' ' -f6; } "
              "> /w/out\n");
  ck_assert_msg (rt->ops->start (rt, sb, &facts, &err) == 0, "%s", sp_error_message (err));
  ck_assert_int_eq (facts.exit_code, 0);
  read_file (out_file, out, sizeof (out));
  ck_assert_str_eq (out, "/dev/null\n/dev/null\nPATH=/usr/bin:/bin\nro,nosuid,nodev,noexec,relatime\n");
  /* The control: the host side is the sealed bind the container kept.  */
  ck_assert_int_eq (statvfs (script, &st), 0);
  ck_assert ((st.f_flag & (ST_RDONLY | ST_NOEXEC | ST_NOSUID | ST_NODEV))
             == (ST_RDONLY | ST_NOEXEC | ST_NOSUID | ST_NODEV));
  destroy (sb);
  assert_gone (&nm);
}
END_TEST

/* A POST with an empty JSON body that must answer 201; its answer is shown
   when it does not.  */
static void
post_created (const char *path)
{
  struct docker_response r;
  cleanup_error sp_error_t err = NULL;

  ck_assert_msg (docker_api_call (sock, "POST", path, "{}", -1, 60000, &r, &err) == 0, "%s",
                 sp_error_message (err));
  ck_assert_msg (r.status == 201, "POST %s answered %ld: %.300s", path, r.status, r.body ? r.body : "");
  docker_response_release (&r);
}

/* The image is the rootfs by content: one with the right tag and the right
   digest label whose layers differ (a container of it committed with a
   file added, re-tagged in its place) is refused at the next use and at the
   next start, naming the image.  The control: the same backend used the
   genuine image a moment before.  */
START_TEST (an_image_whose_layer_differs_is_refused_naming_it)
{
  struct names nm;
  struct sp_runtime_job job = job_for (&nm, 8, 64ul << 20, 30);
  struct sp_run_facts facts;
  struct sp_runtime_sandbox *sb = create (&job, &facts);
  struct sp_runtime_backend *again = NULL;
  struct sp_runtime_settings settings = { .state_dir = state, .run_id = RUN_ID, .docker_socket = sock };
  cleanup_error sp_error_t err = NULL;
  char path[512], tar[192], original[80], *body = NULL, *id;
  int fd;

  destroy (sb);
  /* The genuine image's id, to put it back after.  */
  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/images/%s/json", image);
  ck_assert_int_eq (api_status ("GET", path, &body), 200);
  id = strstr (body, "\"Id\":\"sha256:");
  ck_assert_ptr_nonnull (id);
  snprintf (original, sizeof (original), "%.71s", id + 6);
  free (body);
  /* A container of it, a file added, committed under the same tag with the
     same label.  */
  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/containers/create?name=sp-" RUN_ID "-tamper-%d",
            (int)getpid ());
  {
    struct docker_response r;
    char json[256];

    snprintf (json, sizeof (json), "{\"Image\":\"%s\",\"Cmd\":[\"/x\"]}", image);
    ck_assert_msg (docker_api_call (sock, "POST", path, json, -1, 60000, &r, &err) == 0, "%s",
                   sp_error_message (err));
    ck_assert_int_eq (r.status, 201);
    docker_response_release (&r);
  }
  snprintf (tar, sizeof (tar), "%s/added.tar", top);
  snprintf (path, sizeof (path), "echo changed > %s/added && tar -C %s -cf %s added", top, top, tar);
  ck_assert_int_eq (system (path), 0);
  fd = open (tar, O_RDONLY | O_CLOEXEC);
  ck_assert_int_ge (fd, 0);
  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/containers/sp-" RUN_ID "-tamper-%d/archive?path=/",
            (int)getpid ());
  {
    struct docker_response r;

    ck_assert_msg (docker_api_call (sock, "PUT", path, NULL, fd, 60000, &r, &err) == 0, "%s",
                   sp_error_message (err));
    ck_assert_int_eq (r.status, 200);
    docker_response_release (&r);
  }
  close (fd);
  snprintf (path, sizeof (path),
            DOCKER_API_PREFIX "/commit?container=sp-" RUN_ID "-tamper-%d&repo=sealed-probe/rootfs&tag=%.12s"
                              "&changes=LABEL%%20org.sealed-probe.rootfs.digest%%3D%s",
            (int)getpid (), digest + 7, digest);
  post_created (path);
  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/containers/sp-" RUN_ID "-tamper-%d?force=1",
            (int)getpid ());
  api_status ("DELETE", path, NULL);

  /* The next use by the backend that checked the genuine one: refused.  */
  job = job_for (&nm, 9, 64ul << 20, 30);
  sb = NULL;
  ck_assert_int_eq (rt->ops->create (rt, &job, &facts, &sb, &err), -1);
  ck_assert_ptr_null (sb);
  ck_assert_msg (strstr (sp_error_message (err), image) && strstr (sp_error_message (err), "layers"), "%s",
                 sp_error_message (err));
  sp_error_release (&err);
  /* A new start: refused too.  */
  ck_assert_int_eq (sp_runtime_open (SP_RUNTIME_DOCKER, &settings, &again, &err), 0);
  ck_assert_int_eq (again->ops->verify (again, &err), 0);
  ck_assert_int_eq (again->ops->use_rootfs (again, rootfs, digest, &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), image) && strstr (sp_error_message (err), "layers"), "%s",
                 sp_error_message (err));
  sp_runtime_closep (&again);

  /* The genuine image back under its tag; the tampered one removed.  */
  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/images/%s/json", image);
  ck_assert_int_eq (api_status ("GET", path, &body), 200);
  id = strstr (body, "\"Id\":\"sha256:");
  ck_assert_ptr_nonnull (id);
  snprintf (tar, sizeof (tar), "%.71s", id + 6);
  free (body);
  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/images/%s/tag?repo=sealed-probe/rootfs&tag=%.12s",
            original, digest + 7);
  post_created (path);
  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/images/%s?force=1", tar);
  api_status ("DELETE", path, NULL);
}
END_TEST

START_TEST (a_container_destroyed_unstarted_never_ran)
{
  struct names nm;
  struct sp_runtime_job job;
  struct sp_run_facts facts;
  struct sp_runtime_sandbox *sb;
  char out[64];
  struct stat st;

  /* The script is all there before the create: only a start runs it.  */
  write_file (script, "echo ran > /w/out\n", 0);
  job = job_for (&nm, 2, 64ul << 20, 30);
  sb = create (&job, &facts);
  sleep (1);
  read_file (out_file, out, sizeof (out));
  ck_assert_str_eq (out, "");
  assert_status (&nm, "created");
  destroy (sb);
  assert_gone (&nm);
  ck_assert_int_eq (stat (out_file, &st), 0);
  ck_assert_int_eq (st.st_size, 0);
}
END_TEST

START_TEST (the_timeout_counts_from_start)
{
  struct names nm;
  struct sp_runtime_job job = job_for (&nm, 3, 64ul << 20, 2);
  struct sp_run_facts facts;
  struct sp_runtime_sandbox *sb = create (&job, &facts);
  cleanup_error sp_error_t err = NULL;
  char out[64];

  /* Longer than the timeout between create and start; the probe itself
     runs well within it.  */
  sleep (3);
  put_script ("sleep 0.5; echo done > /w/out\n");
  ck_assert_msg (rt->ops->start (rt, sb, &facts, &err) == 0, "%s", sp_error_message (err));
  ck_assert (!facts.timed_out);
  ck_assert_int_eq (facts.exit_code, 0);
  ck_assert_uint_lt (facts.wall_ns, 2000000000u);
  read_file (out_file, out, sizeof (out));
  ck_assert_str_eq (out, "done\n");
  destroy (sb);
  assert_gone (&nm);

  /* And it is enforced: a probe that outlives it is killed.  */
  job = job_for (&nm, 4, 64ul << 20, 1);
  /* A new invocation's script, as a new workspace would have it.  */
  unseal_script ();
  write_file (script, "", O_TRUNC);
  open_script ();
  sb = create (&job, &facts);
  put_script ("sleep 30\n");
  ck_assert_msg (rt->ops->start (rt, sb, &facts, &err) == 0, "%s", sp_error_message (err));
  ck_assert (facts.timed_out);
  ck_assert_int_eq (facts.signal, SIGKILL);
  ck_assert_int_eq (facts.exit_code, -1);
  ck_assert_uint_ge (facts.wall_ns, 1000000000u);
  ck_assert_uint_lt (facts.wall_ns, 20000000000u);
  destroy (sb);
  assert_gone (&nm);
}
END_TEST

/* The container removed behind the handle's back: start fails at start
   itself, the runtime's failure, and destroy still succeeds.  */
START_TEST (a_failed_start_stays_at_the_create_stage)
{
  struct names nm;
  struct sp_runtime_job job = job_for (&nm, 5, 64ul << 20, 30);
  struct sp_run_facts facts;
  struct sp_runtime_sandbox *sb = create (&job, &facts);
  cleanup_error sp_error_t err = NULL;
  char path[256];

  snprintf (path, sizeof (path), DOCKER_API_PREFIX "/containers/%s?force=1", nm.container);
  ck_assert_int_eq (api_status ("DELETE", path, NULL), 204);
  ck_assert_int_eq (rt->ops->start (rt, sb, &facts, &err), -1);
  ck_assert (facts.launched);
  ck_assert_int_eq (facts.stage, SP_RUN_STAGE_CREATE);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "start"));
  destroy (sb);
  assert_gone (&nm);
}
END_TEST

/* A create the daemon refuses (a memory limit below its 6 MB minimum):
   the runtime's failure, no handle, no container.  */
START_TEST (a_failed_create_leaves_nothing)
{
  struct names nm;
  struct sp_runtime_job job = job_for (&nm, 6, 1ul << 20, 30);
  struct sp_run_facts facts;
  struct sp_runtime_sandbox *sb = (struct sp_runtime_sandbox *)&facts;
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_eq (rt->ops->create (rt, &job, &facts, &sb, &err), -1);
  ck_assert_ptr_null (sb);
  ck_assert (facts.launched);
  ck_assert_int_eq (facts.stage, SP_RUN_STAGE_CREATE);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "create"));
  assert_gone (&nm);
}
END_TEST

START_TEST (run_is_create_start_destroy)
{
  struct names nm;
  struct sp_runtime_job job;
  struct sp_run_facts facts;
  cleanup_error sp_error_t err = NULL;
  char out[64];

  write_file (script, "echo run > /w/out\nexit 3\n", 0);
  job = job_for (&nm, 7, 64ul << 20, 30);
  ck_assert_msg (rt->ops->run (rt, &job, &facts, &err) == 0, "%s", sp_error_message (err));
  ck_assert (facts.launched);
  ck_assert_int_eq (facts.stage, SP_RUN_STAGE_PROBE);
  ck_assert_int_eq (facts.exit_code, 3);
  read_file (out_file, out, sizeof (out));
  ck_assert_str_eq (out, "run\n");
  assert_gone (&nm);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("docker");
  TCase *tc = tcase_create ("create_start_destroy");

  tcase_add_unchecked_fixture (tc, suite_setup, suite_teardown);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 90);
  tcase_add_test (tc, a_created_container_runs_the_bytes_written_after_its_create);
  tcase_add_test (tc, a_started_probe_has_null_stdio_the_bundle_env_and_a_sealed_script);
  tcase_add_test (tc, a_container_destroyed_unstarted_never_ran);
  tcase_add_test (tc, the_timeout_counts_from_start);
  tcase_add_test (tc, a_failed_start_stays_at_the_create_stage);
  tcase_add_test (tc, a_failed_create_leaves_nothing);
  tcase_add_test (tc, run_is_create_start_destroy);
  /* Last: it swaps the image's tag for a while.  */
  tcase_add_test (tc, an_image_whose_layer_differs_is_refused_naming_it);
  suite_add_tcase (s, tc);
  return s;
}

/* Without root or the daemon: the whole program skips and says why, but
   fails under CI=true, where every backend must run.  */
static int
unavailable (const char *why)
{
  const char *ci = getenv ("CI");

  if (ci != NULL && strcmp (ci, "true") == 0)
    {
      printf ("Bail out! %s; under CI=true a missing runtime is a failure, not a skip\n", why);
      return EXIT_FAILURE;
    }
  printf ("1..0 # SKIP %s\n", why);
  return EXIT_SUCCESS;
}

int
main (void)
{
  struct docker_response r;
  cleanup_error sp_error_t err = NULL;

  if (geteuid () != 0)
    return unavailable ("needs root: the docker backend's bind sources and cgroups are root's");
  sock = getenv ("SP_DOCKER_SOCKET");
  if (sock == NULL || sock[0] != '/')
    return unavailable ("SP_DOCKER_SOCKET is not set (scripts/dockerd start; scripts/test sets it)");
  if (docker_api_call (sock, "GET", "/_ping", NULL, -1, 10000, &r, &err) < 0)
    return unavailable ("the daemon at SP_DOCKER_SOCKET does not answer /_ping");
  docker_response_release (&r);
  return sp_check_run (make_suite ());
}
