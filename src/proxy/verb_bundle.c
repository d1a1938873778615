/* sealed-probe-proxy bundle --dry-run: writes the exact bundle serve would run
   for one request and starts nothing.  The operator's tool for reviewing
   policy: no network, no credentials, no runtime.  bundle --remove takes such
   a bundle away again.  See docs/bundle.md.  */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/sha256.h"
#include "bundle/bundle.h"
#include "os/fileio.h"
#include "rootfs/copy.h"
#include "rootfs/verify.h"
#include "runtimes/runtime.h"
#include "seccomp/profile.h"
#include "stage/seed_store.h"
#include "text/config.h"
#include "tree/copy.h"
#include "tree/remove.h"

#include "build_config.h"
#include "proxy/options.h"
#include "proxy/verbs.h"

#define USAGE                                                                                                \
  "usage: sealed-probe-proxy bundle --dry-run --config PATH|- --repo OWNER/NAME --script PATH|- --out DIR\n" \
  "                                 [--rootfs DIR] [--state DIR] [--probe-ids BASE] [--started-ahead]\n"     \
  "                                 [--runc PATH | --runsc PATH [--gvisor-platform NAME]\n"                  \
  "                                  | --docker-socket PATH [--docker-state-dir PATH]\n"                     \
  "                                  | [--sbx PATH] --sbx-template NAME@sha256:HEX]\n"                       \
  "       sealed-probe-proxy bundle --remove DIR"

/* The bundle's own filesystem: room for the rootfs copy and a seed.  */
#define BUNDLE_TMPFS_BYTES  (SP_ROOTFS_COPY_TMPFS_BYTES + SP_SEED_MAX_BYTES)
#define BUNDLE_TMPFS_INODES (SP_ROOTFS_COPY_TMPFS_INODES + SP_SEED_MAX_ENTRIES + 16)
#define BUNDLE_ROOTFS_DIR   "rootfs"
/* Beside config.json: the runtime command lines serve would exec for it.  */
#define BUNDLE_COMMANDS "runtime-commands.json"

#define fail(...) (sp_verb_report ("bundle", __VA_ARGS__), SP_EXIT_FAIL)

struct bundle_args
{
  int dry_run;
  const char *config;
  const char *repo;
  const char *script;
  const char *out;
  const char *rootfs;
  const char *state;
  const char *probe_ids;
  const char *runc;
  const char *runsc;
  const char *gvisor_platform;
  const char *docker_socket;
  const char *docker_state_dir;
  const char *sbx;
  const char *sbx_template;
  const char *remove;
  int started_ahead;
  uint32_t probe_id_base;
};

/* Returns 0, SP_EXIT_USAGE after reporting, or -1 for --help.  */
static int
parse_args (int argc, char **argv, struct bundle_args *a)
{
  const struct sp_option options[] = {
    { .name = "--dry-run", .flag = &a->dry_run },
    { .name = "--config", .value = &a->config },
    { .name = "--repo", .value = &a->repo },
    { .name = "--script", .value = &a->script },
    { .name = "--out", .value = &a->out },
    { .name = "--rootfs", .value = &a->rootfs },
    { .name = "--state", .value = &a->state },
    { .name = "--probe-ids", .value = &a->probe_ids },
    { .name = "--runc", .value = &a->runc },
    { .name = "--runsc", .value = &a->runsc },
    { .name = "--gvisor-platform", .value = &a->gvisor_platform },
    { .name = "--docker-socket", .value = &a->docker_socket },
    { .name = "--docker-state-dir", .value = &a->docker_state_dir },
    { .name = "--sbx", .value = &a->sbx },
    { .name = "--sbx-template", .value = &a->sbx_template },
    { .name = "--started-ahead", .flag = &a->started_ahead },
    { .name = "--remove", .value = &a->remove },
  };
  const size_t n_options = sizeof (options) / sizeof (options[0]);
  const struct sp_option *required[] = { &options[1], &options[2], &options[3], &options[4] };
  int ret = sp_options_parse ("bundle", USAGE, argc, argv, options, n_options);

  if (ret != 0)
    return ret;
  if (a->remove != NULL)
    {
      for (size_t i = 0; i + 1 < n_options; i++)
        if (options[i].flag ? *options[i].flag != 0 : *options[i].value != NULL)
          return sp_options_usage_error ("bundle", USAGE, "--remove takes no other option (%s was given)",
                                         options[i].name);
      return 0;
    }
  if (!a->dry_run)
    return sp_options_usage_error ("bundle", USAGE,
                                   "--dry-run is required: bundle only writes bundles; serve runs them");
  for (size_t i = 0; i < sizeof (required) / sizeof (required[0]); i++)
    if (*required[i]->value == NULL)
      return sp_options_usage_error ("bundle", USAGE, "%s is required", required[i]->name);
  if (strcmp (a->config, "-") == 0 && strcmp (a->script, "-") == 0)
    return sp_options_usage_error ("bundle", USAGE, "--config and --script cannot both read standard input");
  if (a->rootfs == NULL)
    a->rootfs = SP_DEFAULT_ROOTFS;
  if (sp_options_probe_ids ("bundle", USAGE, a->probe_ids, &a->probe_id_base) != 0)
    return SP_EXIT_USAGE;
  if (a->gvisor_platform != NULL && !sp_gvisor_platform_valid (a->gvisor_platform))
    return sp_options_usage_error ("bundle", USAGE,
                                   "--gvisor-platform: must be `ptrace`, `systrap` or `kvm`");
  if (sp_options_binary_path ("bundle", USAGE, "--runc", a->runc) != 0
      || sp_options_binary_path ("bundle", USAGE, "--runsc", a->runsc) != 0
      || sp_options_binary_path ("bundle", USAGE, "--sbx", a->sbx) != 0)
    return SP_EXIT_USAGE;
  if (a->sbx_template != NULL && !sp_sbx_template_pinned (a->sbx_template))
    return sp_options_usage_error (
        "bundle", USAGE,
        "--sbx-template: must be NAME@sha256:<64 lowercase hex>, pinned by digest; "
        "a tag alone can change under you");
  return 0;
}

/* The backend serve would open for this config, with the same options, so
   that describe shows the command lines serve would exec.  Not verified:
   a dry run runs nothing.  */
static int
open_backend (const struct bundle_args *a, enum sp_runtime kind, const char *run_id,
              struct sp_runtime_backend **rt, sp_error_t *err)
{
  struct sp_runtime_settings settings = {
    .binary = kind == SP_RUNTIME_GVISOR ? a->runsc
              : kind == SP_RUNTIME_SBX  ? a->sbx
                                        : a->runc,
    .state_dir = a->state ? a->state : SP_DEFAULT_STATE,
    .run_id = run_id,
    .gvisor_platform = a->gvisor_platform,
    .docker_socket = a->docker_socket,
    .docker_state_dir = a->docker_state_dir,
    .sbx_template = a->sbx_template,
  };

  if (a->runc != NULL && kind != SP_RUNTIME_RUNC)
    return sp_make_error (err, 0, "--runc: sealedProbes.runtime is `%s`, not `runc`", sp_runtime_name (kind));
  if ((a->runsc != NULL || a->gvisor_platform != NULL) && kind != SP_RUNTIME_GVISOR)
    return sp_make_error (err, 0, "--%s: sealedProbes.runtime is `%s`, not `gvisor`",
                          a->runsc ? "runsc" : "gvisor-platform", sp_runtime_name (kind));
  if ((a->docker_socket != NULL || a->docker_state_dir != NULL) && kind != SP_RUNTIME_DOCKER)
    return sp_make_error (err, 0, "--%s: sealedProbes.runtime is `%s`, not `docker`",
                          a->docker_socket ? "docker-socket" : "docker-state-dir", sp_runtime_name (kind));
  if ((a->sbx != NULL || a->sbx_template != NULL) && kind != SP_RUNTIME_SBX)
    return sp_make_error (err, 0, "--%s: sealedProbes.runtime is `%s`, not `sbx`",
                          a->sbx ? "sbx" : "sbx-template", sp_runtime_name (kind));
  if (sp_runtime_open (kind, &settings, rt, err) < 0)
    return sp_error_wrap (err, "sealedProbes.runtime");
  return 0;
}

/* runtime-commands.json: what the backend would exec for this bundle.  */
static int
write_commands (int dirfd, struct sp_runtime_backend *rt, const struct sp_bundle_spec *spec, uint32_t timeout,
                sp_error_t *err)
{
  cleanup_free char *container_id = sp_bundle_container_id (spec);
  cleanup_free char *cgroup_path = sp_bundle_cgroup_path (spec);
  cleanup_free char *json = NULL;
  size_t len = 0;

  if (container_id == NULL || cgroup_path == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  const struct sp_runtime_job job = {
    .bundle_dir = spec->bundle_dir,
    .container_id = container_id,
    .cgroup_path = cgroup_path,
    .timeout_seconds = timeout,
    .start_ahead = spec->interpreter_waits,
  };
  if (rt->ops->describe (rt, &job, &json, &len, err) < 0)
    return -1;
  return sp_write_file_atomic_at (dirfd, BUNDLE_COMMANDS, json, len, 0444, err);
}

/* Unmounts the bundle's tmpfs, which holds everything a dry run wrote, and
   removes its mount point: a failed dry run leaves nothing behind.  */
static void
remove_bundle_dir (const char *path)
{
  char tmp[PATH_MAX];

  snprintf (tmp, sizeof (tmp), "%s/%s", path, SP_BUNDLE_TMP);
  umount2 (tmp, MNT_DETACH | UMOUNT_NOFOLLOW);
  umount2 (path, MNT_DETACH);
  rmdir (path);
}

/* Checks that fd is a dry-run bundle as make_bundle_fs and sp_bundle_write
   leave it: the root of a tmpfs of its own holding config.json,
   runtime-commands.json and rootfs/.  */
static int
check_dry_run_bundle (int fd, sp_error_t *err)
{
  static const struct
  {
    const char *name;
    mode_t type;
  } parts[] = { { SP_BUNDLE_CONFIG, S_IFREG }, { BUNDLE_COMMANDS, S_IFREG }, { BUNDLE_ROOTFS_DIR, S_IFDIR } };
  struct statfs fs;
  struct statx stx;
  struct stat st;

  if (fstatfs (fd, &fs) < 0 || statx (fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx) < 0)
    return sp_make_error (err, errno, "stat");
  if (fs.f_type != TMPFS_MAGIC || !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
      || !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
    return sp_make_error (err, 0, "not the mount point of a bundle's tmpfs");
  for (size_t i = 0; i < sizeof (parts) / sizeof (parts[0]); i++)
    if (fstatat (fd, parts[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0 || (st.st_mode & S_IFMT) != parts[i].type)
      return sp_make_error (err, 0, "a tmpfs, but it holds no %s: not a dry-run bundle", parts[i].name);
  return 0;
}

/* bundle --remove DIR: unmounts a dry-run bundle (its tmpfs and all below
   it) and removes its mount point.  Anything that is not one is refused
   untouched: this is never rm -r.  */
static int
remove_dry_run_bundle (const char *dir)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_free char *path = realpath (dir, NULL);
  cleanup_close int fd = -1;
  struct stat before, now;

  if (lstat (dir, &now) == 0 && S_ISLNK (now.st_mode))
    return fail ("--remove: `%s` is a symbolic link; name the bundle directory itself", dir);
  if (path == NULL)
    return fail ("--remove: `%s`: %s", dir, strerror (errno));
  fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return fail ("--remove: `%s`: %s", dir, strerror (errno));
  if (check_dry_run_bundle (fd, &err) < 0)
    return fail ("--remove: `%s`: %s; nothing was removed", dir, sp_error_message (err));
  /* The path still names what was checked.  MNT_DETACH takes the tmpfs and
     every mount below it (a bundle's tmp/) at once.  */
  if (fstat (fd, &before) < 0 || stat (path, &now) < 0 || before.st_dev != now.st_dev
      || before.st_ino != now.st_ino)
    return fail ("--remove: `%s` changed while it was checked; nothing was removed", dir);
  sp_closep (&fd);
  if (umount2 (path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
    return fail ("--remove: `%s`: umount: %s", dir, strerror (errno));
  if (rmdir (path) < 0)
    return fail ("--remove: `%s`: unmounted, but rmdir: %s", dir, strerror (errno));
  return SP_EXIT_OK;
}

/* With --state: the staged seed of repo, verified (digest and read-only
   mount) before anything is written.  Returns its open directory.  */
static int
open_staged_seed (const char *state, const char *repo, sp_error_t *err)
{
  cleanup_close int state_fd = -1;
  struct sp_staged staged;
  const struct sp_seed *seed;
  int fd = -1;

  if (sp_state_open (state, 0, &state_fd, err) < 0 || sp_staged_load (state_fd, &staged, err) < 0)
    return -1;
  seed = sp_staged_find (&staged, repo);
  if (seed == NULL)
    sp_make_error (err, 0, "`%s` has no staged seed (run `sealed-probe-proxy stage`)", repo);
  else if (sp_seed_verify (state_fd, staged.run, seed, err) == 0)
    fd = sp_seed_open (state_fd, staged.run, seed->index, err);
  sp_staged_release (&staged);
  return fd;
}

/* Snapshots the seed into repo/ as serve's copy mode does: a safe copy given
   to the probe's host id.  */
static int
snapshot_seed (int bundle_fd, int seed_fd, uint32_t host_probe_id, sp_error_t *err)
{
  static const struct sp_copy_options limits = {
    .max_bytes = SP_SEED_MAX_BYTES,
    .max_entries = SP_SEED_MAX_ENTRIES,
    .max_depth = SP_SEED_MAX_DEPTH,
    .owner_writable = true,
  };
  cleanup_close int repo_fd
      = openat (bundle_fd, SP_BUNDLE_REPO, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (repo_fd < 0)
    return sp_make_error (err, errno, "%s", SP_BUNDLE_REPO);
  if (sp_tree_copy (seed_fd, repo_fd, &limits, host_probe_id, host_probe_id, err) < 0)
    return sp_error_wrap (err, "copy the seed into %s", SP_BUNDLE_REPO);
  return 0;
}

/* Every directory above the bundle must let others search it: the sandbox's
   user-namespace root is an unprivileged host id, and the runtime reaches
   the rootfs and every mount source as that id.  */
static int
check_reachable (const char *bundle_path, uint32_t host_root_id, sp_error_t *err)
{
  cleanup_free char *dir = strdup (bundle_path);
  char *slash;
  struct stat st;

  if (dir == NULL)
    return sp_make_error (err, errno, "allocate a path");
  while ((slash = strrchr (dir, '/')) != NULL)
    {
      *(slash == dir ? slash + 1 : slash) = '\0';
      if (stat (dir, &st) < 0)
        return sp_make_error (err, errno, "stat `%s`", dir);
      if ((st.st_mode & S_IXOTH) == 0)
        return sp_make_error (err, 0,
                              "`%s` (mode %04o) is not searchable by others, so the sandbox's root (host id "
                              "%" PRIu32
                              ") could not reach the bundle: put it where every directory above is o+x",
                              dir, (unsigned)(st.st_mode & 07777), host_root_id);
      if (slash == dir)
        break;
    }
  return 0;
}

/* The bundle directory becomes a tmpfs of its own, holding a verified copy of
   the rootfs beside the bundle: a sandbox run from it by hand binds nothing
   from the host's filesystems, so its mountinfo names no host path, and the
   user namespace's root can reach every mount source.  */
static int
make_bundle_fs (const char *path, const struct sp_bundle_rules *rules, const struct sp_rootfs_info *rootfs,
                struct sp_rootfs_info *copy, int *dirfd, sp_error_t *err)
{
  cleanup_close int rootfs_fd = -1;
  cleanup_free char *rootfs_path = NULL;
  char options[128];

  snprintf (options, sizeof (options), "mode=0711,size=%llu,nr_inodes=%llu",
            (unsigned long long)BUNDLE_TMPFS_BYTES, (unsigned long long)BUNDLE_TMPFS_INODES);
  /* nosuid and nodev where the backend allows them (runtime.h).  */
  if (mount ("sealed-probe-bundle", path, "tmpfs",
             (rules->rootfs_nosuid_nodev ? MS_NOSUID | MS_NODEV : 0)
                 | (rules->workspaces_on_host ? MS_NOEXEC : 0),
             options)
      < 0)
    return sp_make_error (err, errno, "mount a tmpfs for the bundle");
  *dirfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (*dirfd < 0)
    return sp_make_error (err, errno, "open");
  if (mkdirat (*dirfd, BUNDLE_ROOTFS_DIR, 0711) < 0)
    return sp_make_error (err, errno, "mkdir %s", BUNDLE_ROOTFS_DIR);
  rootfs_fd = openat (*dirfd, BUNDLE_ROOTFS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rootfs_fd < 0)
    return sp_make_error (err, errno, "open %s", BUNDLE_ROOTFS_DIR);
  /* mkdir's mode passed through the umask; the bundle's is exact.  */
  if (fchmod (rootfs_fd, 0711) < 0)
    return sp_make_error (err, errno, "chmod %s", BUNDLE_ROOTFS_DIR);
  if (asprintf (&rootfs_path, "%s/%s", path, BUNDLE_ROOTFS_DIR) < 0)
    {
      rootfs_path = NULL;
      return sp_make_error (err, errno, "allocate a path");
    }
  if (sp_rootfs_copy (rootfs, rootfs_fd, err) < 0
      || sp_rootfs_copy_verify (rootfs_path, rootfs, copy, err) < 0)
    return -1;
  return 0;
}

int
sp_verb_bundle (int argc, char **argv)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_config struct sp_config *config = NULL;
  cleanup_seccomp_profile struct sp_seccomp_profile *seccomp = NULL;
  cleanup_free char *script = NULL;
  cleanup_free char *bundle_path = NULL;
  cleanup_close int dirfd = -1;
  cleanup_close int seed_fd = -1;
  cleanup_runtime struct sp_runtime_backend *backend = NULL;
  struct sp_bundle_rules rules;
  struct sp_rootfs_info rootfs = { 0 };
  struct sp_rootfs_info copy = { 0 };
  struct bundle_args a = { 0 };
  struct sp_bundle_spec spec;
  uint32_t host_root_id, host_probe_id;
  char run_id[SP_ID_MAX_CHARS + 1];
  size_t script_len;
  int ret;

  ret = parse_args (argc, argv, &a);
  if (ret != 0)
    return ret < 0 ? SP_EXIT_OK : ret;
  if (a.remove != NULL)
    return remove_dry_run_bundle (a.remove);

  /* Everything is checked before the output directory exists.  */
  if (sp_verb_load_enabled_config ("bundle", a.config, &config) < 0)
    return SP_EXIT_FAIL;
  if (!sp_config_allows_repo (config, (const uint8_t *)a.repo, strlen (a.repo)))
    return fail ("--repo: `%s` is not one of sealedProbes.privateRepos", a.repo);
  if (sp_read_path_capped (a.script, SP_SCRIPT_MAX_BYTES, &script, &script_len, &err) < 0)
    return fail ("--script: %s", sp_error_message (err));
  if (script_len == 0)
    return fail ("--script: is empty; a request's script is 1 to %d bytes", SP_SCRIPT_MAX_BYTES);
  if (a.state && (seed_fd = open_staged_seed (a.state, a.repo, &err)) < 0)
    return fail ("--state: %s", sp_error_message (err));
  if (sp_rootfs_verify (a.rootfs, &rootfs, &err) < 0)
    return fail ("--rootfs: %s: %s", a.rootfs, sp_error_message (err));
  if (sp_seccomp_profile_load_builtin (&seccomp, &err) < 0 || sp_bundle_id_make ("dry-", run_id, &err) < 0
      || open_backend (&a, config->runtime, run_id, &backend, &err) < 0)
    {
      sp_rootfs_info_release (&rootfs);
      return fail ("%s", sp_error_message (err));
    }
  rules = sp_runtime_bundle_rules_for (config->runtime);
  if (a.started_ahead && !backend->ops->starts_ahead)
    {
      sp_rootfs_info_release (&rootfs);
      return fail (
          "--started-ahead: %s does not start an interpreter ahead; serve starts its sandboxes at their "
          "request (docs/runtimes.md, \"Interpreters started ahead\")",
          sp_runtime_name (config->runtime));
    }

  if (mkdir (a.out, 0711) < 0)
    {
      ret = errno;
      sp_rootfs_info_release (&rootfs);
      return ret == EEXIST ? fail ("--out: `%s` exists; name a new directory", a.out)
                           : fail ("--out: `%s`: mkdir: %s", a.out, strerror (ret));
    }
  bundle_path = realpath (a.out, NULL);
  /* A dry run is slot 0 of the range, as serve's first worker is.  */
  sp_bundle_slot_ids (a.probe_id_base, 0, &host_root_id, &host_probe_id);
  ret = bundle_path && check_reachable (bundle_path, host_root_id, &err) == 0
            ? make_bundle_fs (bundle_path, &rules, &rootfs, &copy, &dirfd, &err)
            : -1;
  sp_rootfs_info_release (&rootfs);
  if (ret < 0)
    {
      if (err == NULL)
        sp_make_error (&err, errno, "realpath");
      remove_bundle_dir (bundle_path ? bundle_path : a.out);
      return fail ("--out: `%s`: %s", a.out, sp_error_message (err));
    }

  spec = (struct sp_bundle_spec){
    .bundle_dir = bundle_path,
    .rootfs_root = copy.root_path,
    .rootfs_digest = copy.digest,
    .run_id = run_id,
    .invocation_id = "0",
    .memory_limit_bytes = config->memory_limit_bytes,
    .interpreter = config->interpreter,
    .seccomp = seccomp,
    .host_root_id = host_root_id,
    .host_probe_id = host_probe_id,
    .rules = rules,
    .interpreter_waits = a.started_ahead != 0,
  };
  ret = sp_bundle_write (dirfd, &spec, script, script_len, &err);
  if (ret == 0 && spec.rules.tmp_on_host)
    ret = sp_bundle_mount_tmp (dirfd, bundle_path, &err);
  if (ret == 0)
    ret = write_commands (dirfd, backend, &spec, config->timeout_seconds, &err);
  if (ret == 0 && seed_fd >= 0)
    ret = snapshot_seed (dirfd, seed_fd, spec.host_probe_id, &err);
  sp_rootfs_info_release (&copy);
  if (ret < 0)
    {
      sp_closep (&dirfd);
      remove_bundle_dir (bundle_path);
      return fail ("--out: %s", sp_error_message (err));
    }
  printf ("%s\n", bundle_path);
  return fflush (stdout) == 0 ? SP_EXIT_OK : fail ("standard output: %s", strerror (errno));
}
