/* The one driver for runtimes that speak the OCI runtime command line
   (`--root`, `create`, `start`, `kill`, `delete`): runc and runsc.  It holds
   the binary checks, the bounded spawns, the run's lifecycle and the orphan
   sweep; a backend file keeps only what differs, in a small flavor table
   (its binary's name, its global flags, its version rule, what else
   `create` leaves for this process to reap).  Private to runtimes/.  */
#ifndef SP_RUNTIMES_OCI_CLI_H
#define SP_RUNTIMES_OCI_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "os/spawn.h"
#include "runtimes/runtime.h"

/* At most this many flags follow `--root ROOT` on every command line.  */
#define OCI_CLI_FLAGS_MAX 8

struct oci_cli;

struct oci_flavor
{
  const char *binary_name; /* looked up in SP_RUNTIME_SEARCH_PATH when no binary is given */
  const char *state_name;  /* its --root is <state>/<state_name>/<run> */
  /* Checks what `--version` printed (NUL-terminated, no NUL inside).  On a
     refusal, why says what was expected or found, for the operator.  */
  int (*version_check) (const char *out, char *why, size_t why_size);
  /* Called once `create` succeeded: takes hold of any other process
     `create` left to this process (the subreaper), to be reaped after the
     run.  NULL: none.  */
  /* Start a created container by reading its init's exec fifo,
     <root>/<id>/exec.fifo, as `runc start` does, rather than by running
     the binary again (its start-up is most of `runc start`'s time).  The
     confinement canary starts its sandbox this way too, so a runtime whose
     fifo protocol differs fails the preflight.  */
  bool start_by_exec_fifo;
  /* Remove a container whose init this process reaped without the binary:
     its cgroup in every hierarchy and its <root>/<id>/, which is all that
     `runc delete` does for a stopped container without hooks (its start-up
     is most of that command's CPU).  Anything left falls back to `delete
     --force`.  */
  bool remove_reaped_directly;
  int (*adopt_helpers) (const struct oci_cli *c, const char *container_id, struct sp_child *helper,
                        sp_error_t *err);
};

struct oci_cli
{
  struct sp_runtime_backend base;
  const struct oci_flavor *flavor;
  char *binary;    /* absolute; after verify, its realpath */
  char *state_dir; /* absolute */
  char *run_id;
  char *state_root; /* <state>/<state_name> */
  char *root;       /* <state>/<state_name>/<run>: the runtime's --root */
  char *flags[OCI_CLI_FLAGS_MAX + 1];
};

/* Opens a backend of this flavor: flags (NULL-terminated, at most
   OCI_CLI_FLAGS_MAX) follow `--root ROOT` on every command line.  */
int oci_cli_open (const struct oci_flavor *flavor, const struct sp_runtime_ops *ops,
                  const struct sp_runtime_settings *settings, const char *const *flags,
                  struct sp_runtime_backend **out, sp_error_t *err);

int oci_cli_verify (struct sp_runtime_backend *rt, sp_error_t *err);
int oci_cli_prepare (struct sp_runtime_backend *rt, sp_error_t *err);
int oci_cli_run (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, struct sp_run_facts *facts,
                 sp_error_t *err);
int oci_cli_create (struct sp_runtime_backend *rt, const struct sp_runtime_job *job,
                    struct sp_run_facts *facts, struct sp_runtime_sandbox **out, sp_error_t *err);
int oci_cli_start (struct sp_runtime_backend *rt, struct sp_runtime_sandbox *sandbox,
                   struct sp_run_facts *facts, sp_error_t *err);
int oci_cli_destroy (struct sp_runtime_backend *rt, struct sp_runtime_sandbox *sandbox, sp_error_t *err);
int oci_cli_kill (struct sp_runtime_backend *rt, const char *container_id, sp_error_t *err);
int oci_cli_cleanup_orphans (struct sp_runtime_backend *rt, bool include_current,
                             struct sp_orphans_removed *removed, sp_error_t *err);
int oci_cli_describe (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, char **json,
                      size_t *len, sp_error_t *err);
void oci_cli_close (struct sp_runtime_backend *rt);

/* The ops every flavor shares; name, kernel and evidence are its own.  */
#define OCI_CLI_OPS(NAME, KERNEL, EVIDENCE)                                                                  \
  {                                                                                                          \
    .name = (NAME), .kernel = (KERNEL), .canary_evidence = (EVIDENCE), .starts_ahead = true,                 \
    .verify = oci_cli_verify, .prepare = oci_cli_prepare, .run = oci_cli_run, .create = oci_cli_create,      \
    .start = oci_cli_start, .destroy = oci_cli_destroy, .kill = oci_cli_kill,                                \
    .cleanup_orphans = oci_cli_cleanup_orphans, .describe = oci_cli_describe, .close = oci_cli_close,        \
  }

/* Parses `N.N.N` at p (each part 1 to 6 digits), followed by anything that
   is not a digit or a dot.  */
int oci_cli_parse_triple (const char *p, unsigned v[3]);

/* The output's first line, made printable and cut, for an error.  */
void oci_cli_shown_line (const char *out, char *buf, size_t size);

#endif
