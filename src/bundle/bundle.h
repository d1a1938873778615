/* The OCI bundle one invocation runs: config.json (runtime spec 1.0.2) plus
   the paths it references.  The one source of truth for confinement; every
   backend runs or translates it.  docs/bundle.md explains each field.

   Nothing from a request reaches config.json: the spec below holds only what
   the operator configured and what the proxy chose.  The request's script
   becomes probe.py's bytes, and its repository only decides which seed the
   proxy copies into repo/.  */
#ifndef SP_BUNDLE_BUNDLE_H
#define SP_BUNDLE_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bounds.h"
#include "base/error.h"
#include "seccomp/profile.h"
#include "text/config.h"

/* The files of a bundle directory.  */
#define SP_BUNDLE_CONFIG "config.json"
#define SP_BUNDLE_SCRIPT "probe.py"
#define SP_BUNDLE_REPO   "repo"
#define SP_BUNDLE_OUT    "out"
#define SP_BUNDLE_TMP    "tmp" /* only with rules.tmp_on_host */

/* The sandbox's domain name: the kernel's own default, so that no NIS domain
   name of the host's shows inside.  config.json says so, for runtimes that
   honour "domainname"; runc 1.1 does not, and a sysctl cannot set it from a
   user namespace, so serve also sets it in a UTS namespace of its own, which
   every sandbox's new one starts as a copy of (sp_serve_detach).  */
#define SP_BUNDLE_DOMAINNAME "(none)"

/* The annotations that label every sandbox of a run, for orphan cleanup.  */
#define SP_ANNOTATION_RUN        "org.sealed-probe.run"
#define SP_ANNOTATION_INVOCATION "org.sealed-probe.invocation"
#define SP_ANNOTATION_ROOTFS     "org.sealed-probe.rootfs.digest"
#define SP_ANNOTATION_VERSION    "org.sealed-probe.version"

/* What a backend needs of the bundle and its mounts, beyond the one policy
   every backend runs: the runtime chooses them (runtime.h,
   sp_runtime_bundle_rules_for), the bundle and serve follow them.  */
struct sp_bundle_rules
{
  /* The rootfs's host mount may carry nosuid and nodev.  runsc 2022's gofer
     remounts the root read-only without repeating them, which a user
     namespace refuses as an attempt to clear locked flags; under gVisor the
     host never executes or opens a device from that mount (the sentry
     does, with its own nosuid and nodev), so the runsc backend asks for a
     rootfs mount without them.  */
  bool rootfs_nosuid_nodev;
  /* /tmp is a bind of a host tmpfs the proxy mounts per invocation, rather
     than a tmpfs the runtime makes: gVisor's own tmpfs enforces size= but
     not nr_inodes=, and a host tmpfs enforces both.  */
  bool tmp_on_host;
  /* runsc 2022 ignores a seccomp rule's `errnoRet` (every errno becomes
     EPERM), and its sentry has no clone3: the profile's ENOSYS rule is
     written as an allow, so that the sentry's own ENOSYS reaches glibc,
     which then falls back to clone (sp_seccomp_profile_gen_enosys_by_kernel;
     the canary checks the ENOSYS).  */
  bool seccomp_enosys_by_kernel;
  /* The sentry counts the probe's tasks itself: the bundle's task limit
     goes into RLIMIT_NPROC, and the host pids cgroup, which also counts
     the sentry's own threads and ptrace stubs, gets the outer bound
     SP_GVISOR_HOST_TASKS_MAX (bounds.h).  */
  bool tasks_counted_by_kernel;
  /* Docker has no per-container user namespace: the bundle has none, and
     the probe runs as its slot's host id directly (sp_bundle_spec).  */
  bool host_ids_direct;
  /* The daemon resolves bind sources in its own mount namespace, which is
     the host's: the proxy keeps its workspaces there (under the state
     directory, STATE/docker-work), not in a namespace of its own, and mounts
     them noexec, since a Docker bind cannot add a flag its source lacks.  */
  bool workspaces_on_host;
  /* runsc 2022 ignores maskedPaths and readonlyPaths: the trees they would
     hide are covered by empty read-only tmpfs mounts instead (bundle.c,
     covers), and /sys is one.  */
  bool masks_by_mount;
  /* The repository's mount alone is the sandbox's own to cache: runsc 2022
     serves volumes "shared" (every lookup revalidated against the host,
     --file-access-mounts), and a gVisor mount hint (annotations
     SP_GVISOR_REPO_HINT "share", "type", "source") makes just that mount
     exclusive.  Safe because no host process changes the snapshot while its
     sandbox lives: it is complete before `create`, and its lower layer is
     the read-only seed.  probe.py, out and /tmp stay shared: serve writes
     the script and reads the answer through them while the sandbox lives
     (docs/runtimes.md, "The repository's mount is exclusive").  */
  bool repo_exclusive;
};

/* The gVisor mount hint that makes /probe/repo exclusive (repo_exclusive):
   share=container is runsc's "used by this container alone", which it
   serves with --file-access-mounts=exclusive's caching; the hint names the
   mount by its source.  */
#define SP_GVISOR_REPO_HINT "dev.gvisor.spec.mount.repo."

struct sp_bundle_spec
{
  const char *bundle_dir;    /* absolute path of the bundle directory */
  const char *rootfs_root;   /* absolute path of the verified rootfs tree */
  const char *rootfs_digest; /* its verified digest, "sha256:<hex>" */
  const char *run_id;        /* sp_bundle_id_check */
  const char *invocation_id; /* sp_bundle_id_check */
  uint64_t memory_limit_bytes;
  enum sp_interpreter interpreter;
  const struct sp_seccomp_profile *seccomp;
  /* The sandbox's user namespace maps its root onto host_root_id and
     SP_PROBE_UID:SP_PROBE_GID onto host_probe_id (uid and gid alike): an
     identity no other host process and no other running sandbox has
     (sp_bundle_slot_ids).  */
  uint32_t host_root_id;
  uint32_t host_probe_id;
  /* The backend's needs (sp_bundle_rules): with tmp_on_host, /tmp is a
     bind of bundle_dir/tmp, which the caller mounts (sp_bundle_mount_tmp);
     with seccomp_enosys_by_kernel, linux.seccomp is written by
     sp_seccomp_profile_gen_enosys_by_kernel; with tasks_counted_by_kernel,
     RLIMIT_NPROC is SP_SANDBOX_PIDS_MAX and the pids cgroup
     SP_GVISOR_HOST_TASKS_MAX (else the pids cgroup is SP_SANDBOX_PIDS_MAX and
     RLIMIT_NPROC the coarse SP_SANDBOX_NPROC); with host_ids_direct, no user
     namespace, and the probe runs as host_probe_id itself.  */
  struct sp_bundle_rules rules;
  /* The process is the interpreter started ahead: `python3 -I -S -B -c
     <sp_bundle_waiter_py>`, which runs /probe/probe.py once its stdin, a
     pipe serve holds, ends (docs/runtimes.md, "Interpreters started
     ahead").  false: `python3 -I -S -B /probe/probe.py`.  */
  bool interpreter_waits;
};

/* src/bundle/waiter.py, compiled in by src/embed.py: NUL-terminated,
   sp_bundle_waiter_py_len long without the NUL.  */
extern const unsigned char sp_bundle_waiter_py[];
extern const size_t sp_bundle_waiter_py_len;

/* The two host ids of slot K of the range that starts at base.  */
static inline void
sp_bundle_slot_ids (uint32_t base, unsigned slot, uint32_t *host_root_id, uint32_t *host_probe_id)
{
  *host_root_id = base + SP_PROBE_IDS_PER_SLOT * slot;
  *host_probe_id = base + SP_PROBE_IDS_PER_SLOT * slot + 1;
}

/* 0 when a range of SP_PROBE_ID_RANGE ids from base is usable: above every
   id a distribution hands out (1000 .. 65535, and nobody), below 2^31 - 1
   (ids above it are not portable), and not overflowing; else -1, naming the
   reason.  Whether any host process or account already holds one is the
   preflight's to check (serve).  */
int sp_bundle_id_range_check (uint32_t base, sp_error_t *err);

/* Run and invocation ids, and the names built from them (workspaces, runc
   roots, cgroups): 1..SP_ID_MAX_CHARS of [a-z0-9-].  Inline, so that the
   runtimes and the workspace check names by the same rule without linking
   the bundle generator.  */
static inline bool
sp_bundle_id_valid (const char *id)
{
  size_t len = 0;

  for (; id[len] != '\0'; len++)
    if (len >= SP_ID_MAX_CHARS
        || !((id[len] >= 'a' && id[len] <= 'z') || (id[len] >= '0' && id[len] <= '9') || id[len] == '-'))
      return false;
  return len > 0;
}

/* 0 when sp_bundle_id_valid (id), else -1 with a reason.  */
int sp_bundle_id_check (const char *id, sp_error_t *err);

/* A fresh run id: prefix (or none) and 12 random lowercase hex digits.
   Each `stage`, `serve` and dry run draws its own, so that labels never
   collide across runs.  */
#define SP_RUN_ID_RANDOM_BYTES 6
int sp_bundle_id_make (const char *prefix, char out[SP_ID_MAX_CHARS + 1], sp_error_t *err);

/* The container id a runtime uses: "sp-<run>-<invocation>".  Allocated.  */
char *sp_bundle_container_id (const struct sp_bundle_spec *spec);

/* The cgroup every sandbox of a proxy lives under, one level below the root
   of each hierarchy: "/sealed-probe/<run>-<invocation>".  */
#define SP_BUNDLE_CGROUP_PARENT "sealed-probe"

/* config.json's linux.cgroupsPath: "/sealed-probe/<run>-<invocation>".
   Allocated.  */
char *sp_bundle_cgroup_path (const struct sp_bundle_spec *spec);

/* Renders config.json.  Deterministic: the same spec gives the same bytes.  */
int sp_bundle_render_config (const struct sp_bundle_spec *spec, char **json, size_t *len, sp_error_t *err);

/* Fills the empty directory dirfd (which is spec->bundle_dir) with:
     repo/        0700, owned by host_probe_id: the mount point's source,
                  empty here; serve snapshots the seed into it
     probe.py     0444, root: the script's bytes (empty for a sandbox
                  created ahead: sp_bundle_put_script fills it)
     out          0600, owned by host_probe_id, empty: the answer file
     config.json  0444, root
   Needs root, to give repo/ and out to the probe's host id.  */
int sp_bundle_write (int dirfd, const struct sp_bundle_spec *spec, const void *script, size_t script_len,
                     sp_error_t *err);

/* Opens the empty probe.py of a bundle written with no script (script_len
   0) for writing, into *fd, refusing one that is not that placeholder
   (root's, 0444, a regular file, empty).  Opened before the runtime's
   create: a backend may then bind the path read-only over itself (Docker's
   script seal), and the script still goes in through this fd.  */
int sp_bundle_open_script (int dirfd, int *fd, sp_error_t *err);

/* Writes the script through script_fd (sp_bundle_open_script's), into the
   same inode, so that a container created before its request runs it: the
   bind mount the runtime made at create time shows these bytes.  Refuses a
   file that is no longer empty.  */
int sp_bundle_put_script (int script_fd, const void *script, size_t script_len, sp_error_t *err);

/* For tmp_on_host: makes tmp/ (0755, root) in the bundle directory dirfd
   (whose absolute path is bundle_dir) and mounts on it the sandbox's /tmp:
   a tmpfs, nosuid, nodev, noexec, mode 1777, with SP_SANDBOX_TMP_SIZE and
   SP_SANDBOX_TMP_INODES.  The caller unmounts it before the bundle's own
   file system.  */
int sp_bundle_mount_tmp (int dirfd, const char *bundle_dir, sp_error_t *err);

#endif
