/* The sandbox backends behind one vtable (docs/runtimes.md): one file per
   backend in runtimes/.  serve picks the backend the config names and never
   falls back to another; a backend that cannot be verified stops the proxy
   before it is ready.  */
#ifndef SP_RUNTIMES_RUNTIME_H
#define SP_RUNTIMES_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "bundle/bundle.h"
#include "text/config.h"

/* How far a run got: what tells the runtime's own failure from the probe's
   (docs/runtimes.md).  */
enum sp_run_stage
{
  SP_RUN_STAGE_NONE = 0, /* the runtime never ran: its binary could not be executed */
  SP_RUN_STAGE_CREATE,   /* the runtime ran, but the sandbox was not both created and started */
  SP_RUN_STAGE_PROBE,    /* the sandbox started: its init was released to exec the probe */
};

/* What one run of a bundle did, for the audit log.  Never shown to the agent.  */
struct sp_run_facts
{
  bool launched;              /* the runtime was started on the bundle */
  enum sp_run_stage stage;    /* how far it got; a failure before SP_RUN_STAGE_PROBE is never the probe's */
  int exit_code;              /* the probe's exit status, or -1 when it died by a signal or is unknown */
  int signal;                 /* the signal that ended it, or 0 */
  bool oom;                   /* the kernel's OOM killer killed a process of the sandbox */
  bool timed_out;             /* the wall-clock timeout expired and the proxy killed the container */
  uint64_t wall_ns;           /* from launch to exit */
  uint64_t cpu_ns;            /* CPU time of the whole sandbox (its cgroup), or 0 when unknown */
  uint64_t peak_memory_bytes; /* peak memory of the whole sandbox (its cgroup), or 0 when unknown */
};

/* One run, as the proxy asks for it.  */
struct sp_runtime_job
{
  const char *bundle_dir;   /* absolute path of the written bundle */
  const char *container_id; /* sp_bundle_container_id: "sp-<run>-<invocation>" */
  const char *cgroup_path;  /* config.json's linux.cgroupsPath */
  uint32_t timeout_seconds; /* wall clock, from launch */
  /* create only, and only where ops->starts_ahead: the bundle's process is
     the interpreter started ahead (sp_bundle_spec.interpreter_waits), and
     create starts it too; start then only signals it.  */
  bool start_ahead;
};

/* What every backend is given when it is opened.  */
struct sp_runtime_settings
{
  const char *binary;           /* the runtime's executable; NULL: look for it in SP_RUNTIME_SEARCH_PATH */
  const char *state_dir;        /* absolute path of the proxy's protected state directory */
  const char *run_id;           /* this proxy run's id: every container, directory and cgroup carries it */
  const char *gvisor_platform;  /* gvisor only: runsc's --platform; NULL: SP_GVISOR_PLATFORM_DEFAULT */
  const char *docker_socket;    /* docker only: the daemon's Unix socket; NULL: /var/run/docker.sock */
  const char *docker_state_dir; /* docker only: the daemon's path for state_dir; NULL: the same */
  const char *sbx_template;     /* sbx only: the VM template, NAME@sha256:<64 hex> */
};

/* NAME@sha256:<64 lowercase hex>: an sbx template pinned by digest
   (`--sbx-template`); a tag alone is refused.  */
bool sp_sbx_template_pinned (const char *ref);

/* The gVisor platforms an operator may pick (`serve --gvisor-platform`).
   ptrace is the default: these machines lack VMX, so kvm cannot run, and
   Debian 12's runsc has no systrap.  */
#define SP_GVISOR_PLATFORM_DEFAULT "ptrace"
bool sp_gvisor_platform_valid (const char *name);

/* The kernel a backend's sandbox must show from inside: the confinement
   canary checks for it, so that a backend swapped for another one (a runc
   renamed runsc) is refused (docs/runtimes.md).  */
enum sp_sandbox_kernel
{
  SP_SANDBOX_KERNEL_HOST,    /* the host's own Linux kernel (runc) */
  SP_SANDBOX_KERNEL_GVISOR,  /* gVisor's sentry, a kernel in user space (runsc) */
  SP_SANDBOX_KERNEL_MICROVM, /* a microVM's own Linux kernel (sbx); from inside, only "not gVisor" shows */
};

/* What the backend of kind needs of its bundles (bundle.h).  */
static inline struct sp_bundle_rules
sp_runtime_bundle_rules_for (enum sp_runtime kind)
{
  if (kind == SP_RUNTIME_GVISOR)
    return (struct sp_bundle_rules){ .rootfs_nosuid_nodev = false,
                                     .tmp_on_host = true,
                                     .seccomp_enosys_by_kernel = true,
                                     .tasks_counted_by_kernel = true,
                                     .host_ids_direct = false,
                                     .workspaces_on_host = false,
                                     .masks_by_mount = true,
                                     .repo_exclusive = true };
  /* sbx: sandboxd, like dockerd, resolves mount sources in the host's
     mount namespace; the VM's user is 65534, as in a user namespace.  */
  if (kind == SP_RUNTIME_SBX)
    return (struct sp_bundle_rules){ .rootfs_nosuid_nodev = true,
                                     .tmp_on_host = false,
                                     .seccomp_enosys_by_kernel = false,
                                     .tasks_counted_by_kernel = false,
                                     .host_ids_direct = false,
                                     .workspaces_on_host = true };
  if (kind == SP_RUNTIME_DOCKER)
    return (struct sp_bundle_rules){ .rootfs_nosuid_nodev = true,
                                     .tmp_on_host = false,
                                     .seccomp_enosys_by_kernel = false,
                                     .tasks_counted_by_kernel = false,
                                     .host_ids_direct = true,
                                     .workspaces_on_host = true };
  return (struct sp_bundle_rules){ .rootfs_nosuid_nodev = true,
                                   .tmp_on_host = false,
                                   .seccomp_enosys_by_kernel = false,
                                   .tasks_counted_by_kernel = false,
                                   .host_ids_direct = false,
                                   .workspaces_on_host = false };
}

/* The fixed PATH a backend's binary is looked up in, and that a runtime is
   exec'd with: never the caller's environment.  */
#define SP_RUNTIME_SEARCH_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* What one cleanup_orphans removed of one earlier run (or of this run,
   with include_current), for serve to say: the backend itself prints
   nothing.  */
struct sp_orphan_run
{
  char run[SP_ID_MAX_CHARS + 1];
  unsigned containers; /* containers (sbx: VMs) deleted */
  unsigned cgroups;    /* sealed-probe cgroups removed, per hierarchy */
  bool state_dir;      /* its runtime state directory (STATE/runc/RUN, STATE/runsc/RUN) went */
};

struct sp_orphans_removed
{
  struct sp_orphan_run *runs; /* in the order found */
  size_t n;
};

/* Adds to run's entry of removed (made when absent); -1 (ENOMEM) when it
   cannot be.  removed may be NULL: then nothing is recorded.  */
int sp_orphans_note (struct sp_orphans_removed *removed, const char *run, unsigned containers,
                     unsigned cgroups, bool state_dir);
void sp_orphans_removed_release (struct sp_orphans_removed *removed);
#define cleanup_orphans_removed __attribute__ ((cleanup (sp_orphans_removed_release)))

/* One opened backend.  Named sp_runtime_backend, not sp_runtime: C shares
   one tag namespace between struct and enum, and config.h's enum sp_runtime
   (the config's choice of backend) already holds that tag.  */
struct sp_runtime_backend;

/* A container `create` made and `start` has not yet ended: the backend's
   own (runc's waiting init, a Docker container id).  */
struct sp_runtime_sandbox;

struct sp_runtime_ops
{
  const char *name;                   /* sp_runtime_name's spelling */
  enum sp_sandbox_kernel kernel;      /* what the canary must find inside */
  const char *const *canary_evidence; /* what the canary checked it by, for `check`; NULL-terminated */
  /* create can start a sandbox's interpreter ahead of its request, to wait
     on its stdin (docs/runtimes.md, "Interpreters started ahead").  */
  bool starts_ahead;
  /* The fail-closed preflight of the binary: it exists, is root's and not
     writable by others, and its version is one this project supports.  The
     confinement canary (serve's preflight) runs after it through `run`.  */
  int (*verify) (struct sp_runtime_backend *rt, sp_error_t *err);
  /* Once, before the first run: e.g. runc's run-unique --root directory.  */
  int (*prepare) (struct sp_runtime_backend *rt, sp_error_t *err);
  /* Optional (NULL: the backend runs the bundle's rootfs as it is): once,
     after prepare, the verified rootfs tree and its digest, from which a
     backend that needs an image of its own makes it (docker).  */
  int (*use_rootfs) (struct sp_runtime_backend *rt, const char *root, const char *digest, sp_error_t *err);
  /* Runs the bundle to completion under job->timeout_seconds, killing the
     whole container on expiry, and removes the container.  Returns 0 when
     the run happened and its facts are known, whatever the probe did; -1
     when the runtime failed (spawn, create, start, wait, delete), facts
     filled as far as known, facts->stage saying how far it got.  */
  int (*run) (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, struct sp_run_facts *facts,
              sp_error_t *err);
  /* The exact command lines `run` would exec for job, in order, as the JSON
     document `bundle --dry-run` writes beside config.json (docs/bundle.md).
     Built by the same code `run` uses.  */
  int (*describe) (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, char **json, size_t *len,
                   sp_error_t *err);
  /* Optional, all three or none (NULL: the backend cannot create ahead, and
     serve runs every sandbox cold through `run`).  `run` split in two, so
     that serve can create a sandbox before its request arrives
     (docs/runtimes.md, "Sandboxes created ahead"): `create` makes the
     container from job (workspace mounted, limits applied, its init waiting)
     and returns a handle that keeps copies of what it needs from job; it
     never starts the probe.  `start` releases the probe and waits for it,
     under job->timeout_seconds from that moment, with `run`'s facts and
     return rules (a failure at `start` itself leaves facts->stage at
     SP_RUN_STAGE_CREATE).  With job->start_ahead, create also starts
     the container, whose interpreter then waits for end of file on its
     stdin, a pipe whose write end the handle holds; start checks that it
     still waits, closes that end (the signal) and waits for the probe under
     the timeout from there, and the facts' CPU time counts from there too.
     Every other sandbox gets that pipe already closed, so that a probe's
     stdin is the same either way.  `destroy` kills what is left, removes the
     container, confirms it is gone and frees the handle, whatever happened
     before; it returns -1 when something stayed.  A handle is started at
     most once.  On a failed create, *out is NULL and nothing is left.  */
  int (*create) (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, struct sp_run_facts *facts,
                 struct sp_runtime_sandbox **out, sp_error_t *err);
  int (*start) (struct sp_runtime_backend *rt, struct sp_runtime_sandbox *sandbox, struct sp_run_facts *facts,
                sp_error_t *err);
  int (*destroy) (struct sp_runtime_backend *rt, struct sp_runtime_sandbox *sandbox, sp_error_t *err);
  /* Kills a running container of this run (SIGKILL to all of it).  Safe to
     call from another thread than the one in `run`.  */
  int (*kill) (struct sp_runtime_backend *rt, const char *container_id, sp_error_t *err);
  /* Removes every container, cgroup and runtime state directory that carries
     a sealed-probe run label: of earlier runs, and of this run too when
     include_current.  What went is added to *removed, run by run (NULL:
     not wanted), also when it returns -1 because something stayed; it
     prints nothing.  */
  int (*cleanup_orphans) (struct sp_runtime_backend *rt, bool include_current,
                          struct sp_orphans_removed *removed, sp_error_t *err);
  void (*close) (struct sp_runtime_backend *rt);
};

struct sp_runtime_backend
{
  const struct sp_runtime_ops *ops;
};

/* The executable `stage` expects on PATH for a backend of this build
   ("runc", "runsc"; "" for docker, which serve reaches over a socket, and
   for sbx, whose binary serve's --sbx may name), or NULL for a runtime this
   build does not have.  */
const char *sp_runtime_binary_name (enum sp_runtime kind);

/* What the backend's verify accepts, in words, for --version: "runc 1.1.0
   or later".  */
void sp_runtime_accepts (enum sp_runtime kind, char *out, size_t size);

/* Opens the backend the config names.  A backend this build does not have is
   an error naming it; nothing falls back.  */
int sp_runtime_open (enum sp_runtime kind, const struct sp_runtime_settings *settings,
                     struct sp_runtime_backend **out, sp_error_t *err);

static inline void
sp_runtime_closep (struct sp_runtime_backend **rt)
{
  if (*rt)
    (*rt)->ops->close (*rt);
  *rt = 0;
}
#define cleanup_runtime __attribute__ ((cleanup (sp_runtime_closep)))

#endif
