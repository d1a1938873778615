/* The proxy daemon, `sealed-probe-proxy serve` (docs/operations.md): the
   preflight that must pass before it is ready, the invocation path of
   ARCHITECTURE.md, and the accept loop with its bounded queue.  Internal to
   the proxy program.  */
#ifndef SP_SERVE_SERVE_H
#define SP_SERVE_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/protocol.h"
#include "base/release_ladder.h"
#include "rootfs/verify.h"
#include "runtimes/runtime.h"
#include "seccomp/profile.h"
#include "serve/audit.h"
#include "serve/ledger.h"
#include "serve/probe_identity.h"
#include "serve/workspace.h"
#include "stage/seed_store.h"
#include "text/answer_schema.h"
#include "text/config.h"

/* The operator's choices, from the command line.  */
struct sp_serve_options
{
  const char *verb; /* "serve" or "check": who holds the state directory (state_lock.h) */
  const char *config;
  const char *state;
  const char *run_dir; /* --run-dir: workspaces RUN_DIR/work, probe-id locks RUN_DIR/ids */
  const char *rootfs;
  const char *socket;
  const char *socket_group;
  const char *ready_file;
  const char *runc;             /* --runc: runtime runc's binary */
  const char *runsc;            /* --runsc: runtime gvisor's binary */
  const char *gvisor_platform;  /* --gvisor-platform; NULL: SP_GVISOR_PLATFORM_DEFAULT */
  const char *docker_socket;    /* --docker-socket: runtime docker's daemon */
  const char *docker_state_dir; /* --docker-state-dir: the daemon's path for --state */
  const char *sbx;              /* --sbx: runtime sbx's binary */
  const char *sbx_template;     /* --sbx-template: runtime sbx's VM template, pinned by digest */
  unsigned concurrency;
  unsigned queue;
  unsigned queue_wait_seconds;
  enum sp_snapshot_mode snapshot;
  uint64_t scratch_bytes;
  uint32_t probe_id_base;            /* --probe-ids: the first host id of the probes' range */
  enum sp_release_mode release;      /* --release: when answers leave (base/release_ladder.h) */
  uint64_t bit_budget_millibits;     /* --bit-budget, x1000: per repository; 0: none */
  uint64_t run_bit_budget_millibits; /* --run-bit-budget, x1000: the run's, pinned in the ledger; 0: none */
  unsigned pool;                     /* --pool: sandboxes created ahead per repository; 0: none */
};

/* One staged seed as serve uses it: verified once, kept open.  */
struct sp_serve_seed
{
  const struct sp_seed *seed;
  int dirfd;
  uint64_t bytes;   /* file bytes, for copy mode's tmpfs size */
  uint64_t entries; /* entries, for its inode count */
  /* The mount it was verified on (sp_serve_seed_check): its id, which no
     other mount can take while dirfd holds it, and the seed directory's
     device and inode, at path (STATE/seeds/RUN/K, absolute) in serve's
     mount namespace; rel is path's seeds/RUN/K.  */
  char *path;
  const char *rel;
  uint64_t mnt_id;
  dev_t dev;
  ino_t ino;
  /* runc, gvisor: the same seed as the host's mount namespace shows it
     (s->host_state_fd), held by an O_PATH fd, and that mount's id; -1 and
     0 otherwise.  */
  int host_fd;
  uint64_t host_mnt_id;
};

/* The client of one invocation in flight, one per worker (clients.c;
   docs/operations.md, "Cancellation"), under the proxy's lock.  */
struct sp_serve_client
{
  bool in_use;
  uint32_t generation; /* bumped at each watch and unwatch: a late report of an earlier client is ignored */
  bool cancelled;      /* its connection closed before its answer */
  int slot;            /* the slot whose container runs its probe, or -1 */
};

/* How often the accept loop kills again what still runs for a cancelled
   client: a kill that came between a container's creation and its start
   found nothing to kill.  */
#define SP_SERVE_CANCEL_REKILL_MS 200

/* Everything the preflight established, shared by every invocation.  */
struct sp_serve
{
  const struct sp_serve_options *opt;
  struct sp_config *config;
  bool runtime_verified;        /* its verify passed: it may be asked to clean up */
  struct sp_bundle_rules rules; /* the runtime's needs of its bundles, from the config */
  char *state_path;             /* absolute */
  int state_fd;
  /* runc, gvisor: STATE as the host's mount namespace shows it, opened
     before serve left it (sp_serve_setup), so that a remount of a seed
     there, which never reaches serve's own namespace, is seen; else -1.  */
  int host_state_fd;
  /* That namespace itself, held open: when serve was its last process (a
     systemd unit's own), leaving it would tear its mounts down, and the
     host's view above would look at a detached tree.  */
  int host_mnt_ns_fd;
  int owner_lock_fd; /* the state directory's one owner (state_lock.h), held to the very end */
  struct sp_staged staged;
  struct sp_serve_seed *seeds; /* parallel to config->private_repos */
  struct sp_rootfs_info rootfs;
  struct sp_seccomp_profile *seccomp;
  struct sp_ledger *ledger;
  struct sp_audit *audit;
  struct sp_runtime_backend *runtime;
  int work_fd;     /* RUN_DIR/work/KEY: this state directory's workspaces */
  int work_run_fd; /* RUN_DIR/work/KEY/RUN */
  char *work_path;
  char *work_run_path;
  char *rootfs_mount; /* RUN_DIR/work/KEY/RUN/rootfs: the private copy of the rootfs */
  char run_id[SP_ID_MAX_CHARS + 1];
  atomic_uint_fast64_t next_invocation;

  /* Shutdown: set under lock; a worker registers its container under the
     same lock just before launch, so that none starts after the kill.  */
  pthread_mutex_t lock;
  bool stopping;
  /* n_slots = opt->concurrency + 1 (the canary) + pool_slots.  A slot is
     taken by a sandbox from its creation to its removal; active[i] is its
     container id only while it may run (the kill on stop), never while it
     waits in the pool.  */
  unsigned n_slots;
  unsigned pool_slots; /* min (--pool x repositories, SP_SERVE_POOL_SLOTS_MAX); 0 without create */
  bool *slot_taken;
  char **active;
  /* One probe identity per slot (probe_identity.h): a slot's sandbox runs
     as its ids, which no other host process and no other slot has.  */
  struct sp_probe_identity *identities;

  /* Halted (under lock): a write that the proxy's guarantees rest on, the
     budget ledger's or the audit log's, failed.  From then on every request
     gets ERROR and nothing runs, until the operator restarts serve.  */
  bool halted;
  char halt_reason[256];

  /* Release (releaser.c): workers wait on release_cv, under lock, until
     their answer may leave or the proxy stops; refusals made off the slots
     wait in the releaser.  */
  pthread_cond_t release_cv;
  bool release_cv_ready;
  struct sp_serve_releaser *releaser;

  /* Sandboxes created ahead (pool.c), under lock; NULL when pool_slots is 0.  */
  struct sp_serve_pool *pool;

  /* The workers' clients (clients.c), under lock, and the epoll set their
     connections are watched in (the accept loop polls it).  */
  struct sp_serve_client *clients;
  int client_watch_fd;

  /* What serve tells of its state as it changes (report.c): NULL until
     ready, and for check.  */
  struct sp_serve_report *report;
};

/* A serve with no descriptor open yet, as the verbs that run one start it:
   every fd -1, so that the cleanup on any path closes only what was opened.  */
#define SP_SERVE_INIT                                                                                        \
  {                                                                                                          \
    .state_fd = -1, .host_state_fd = -1, .host_mnt_ns_fd = -1, .owner_lock_fd = -1, .work_fd = -1,           \
    .work_run_fd = -1, .client_watch_fd = -1                                                                 \
  }

/* One sandbox from its creation to its removal (sandbox.c): a slot (and so
   a probe identity), a workspace with the bundle and the repository's
   snapshot, and the container the runtime created from it (NULL for a
   backend without `create`, which makes it at `run`).  Nothing in it comes
   from a request until sp_serve_sandbox_put_script puts the script in.  */
struct sp_serve_sandbox
{
  size_t seed_index; /* the repository it was made for: s->seeds[seed_index] */
  unsigned slot;
  char *name; /* the workspace's name, and the container id's last part */
  struct sp_workspace ws;
  char *container_id;
  char *cgroup_path;
  struct sp_runtime_sandbox *handle;
  int script_fd;             /* probe.py, open for the script's one write (sp_bundle_open_script), or -1 */
  struct sp_run_facts facts; /* create's, then start's */
  bool ran;                  /* the runtime was asked to create or run it */
  bool refill_owed;          /* taken from the pool, whose thread is told once its script is in */
  bool seed_gone; /* sp_serve_seed_check failed before its start or after its run: no answer is taken */
};

/* The clients in flight (clients.c).  open: before the workers start;
   watch: a worker's new client, fd its connection; unwatch: before fd is
   closed.  */
int sp_serve_clients_open (struct sp_serve *s, sp_error_t *err);
void sp_serve_clients_close (struct sp_serve *s);
void sp_serve_client_watch (struct sp_serve *s, unsigned worker, int fd);
void sp_serve_client_unwatch (struct sp_serve *s, unsigned worker, int fd);
/* Whether the worker's client has gone: said by the loop, or seen now.  */
bool sp_serve_client_gone (struct sp_serve *s, unsigned worker, int fd);
/* sp_serve_sandbox_activate for a worker's sandbox: false (nothing
   registered) once the proxy is stopping or the client has gone.  */
bool sp_serve_client_activate (struct sp_serve *s, unsigned worker, struct sp_serve_sandbox *sb);
/* The loop: the epoll set is readable (hangups), or the rekill time came.
   Kills what runs for each cancelled client; returns in how many ms to
   kill again, or -1 when nothing is left to kill.  */
int sp_serve_clients_hangups (struct sp_serve *s);
int sp_serve_clients_rekill (struct sp_serve *s);

/* Takes a free slot; -1 when none is free or the proxy is stopping.  */
int sp_serve_slot_claim (struct sp_serve *s);
/* Frees the slot (its sandbox is gone); returns whether the proxy is stopping.  */
bool sp_serve_slot_free (struct sp_serve *s, unsigned slot);

/* Whether seed seed_index is still the very one serve verified at
   preflight (docs/operations.md, "What serve answers from"): the same
   mount (by its id, which serve's open dirfd keeps from being reused), at
   the seed's path in serve's mount namespace, still read-only.  Two system
   calls, no read of mountinfo.  -1 when not, with a reason naming the
   repository, its cause SP_CAUSE_SEED_GONE: the seed was unmounted,
   covered, replaced or removed by hand while serve ran, and no answer
   from it can be trusted.  */
int sp_serve_seed_check (const struct sp_serve *s, size_t seed_index, sp_error_t *err);

/* Makes a sandbox for seed seed_index in slot, named name (workspace,
   bundle without a script, snapshot, and the runtime's `create` when it
   has one).  On failure *out is NULL, everything made is gone, the slot is
   still the caller's, *ran says whether the runtime was asked, and *facts
   (when not NULL) what its `create` did.  A seed found gone before the
   snapshot, or once a snapshot failed, is sp_serve_seed_check's error.
   ahead: made before its request (the pool), so that where the backend
   can, its interpreter is started too and waits for its script
   (docs/runtimes.md, "Interpreters started ahead").  */
int sp_serve_sandbox_make (struct sp_serve *s, size_t seed_index, unsigned slot, const char *name, bool ahead,
                           struct sp_serve_sandbox **out, bool *ran, struct sp_run_facts *facts,
                           sp_error_t *err);
/* Puts the script in, once the seed is checked (sp_serve_seed_check):
   found gone, sb->seed_gone is set and it returns -1 with that error.  The
   sandbox is the request's from then on, whether or not the script went
   in: a pool sandbox's refill is owed (sb->refill_owed), and the caller
   asks it (sp_serve_pool_refill), so that sandbox.c never calls the pool.  */
int sp_serve_sandbox_put_script (struct sp_serve *s, struct sp_serve_sandbox *sb, const void *script,
                                 size_t script_len, sp_error_t *err);
/* Runs the probe to its end (`start`, or `run` for a backend without
   `create`): sb->facts say what happened.  The caller has made it active
   (sp_serve_sandbox_activate).  The seed is checked again once the runtime
   returned: found gone, sb->seed_gone is set and it returns -1 with that
   error, whatever the probe did, so that no answer of a seed changed under
   it is ever taken.  */
int sp_serve_sandbox_start (struct sp_serve *s, struct sp_serve_sandbox *sb, uint32_t timeout_seconds,
                            sp_error_t *err);
/* Looks up the first max_entries entries of sb's overlay snapshot, from
   serve's side, so that the probe finds the overlay's own dentries made
   (a fresh overlay mount has none, and making them costs its first
   reader a few microseconds per entry).  Off the request path only: the
   pool's thread, before the sandbox joins the pool.  Reads no file.  */
void sp_serve_sandbox_warm (struct sp_serve_sandbox *sb, uint64_t max_entries);
/* Registers sb's container for the kill on stop; false (nothing
   registered) once the proxy is stopping.  */
bool sp_serve_sandbox_activate (struct sp_serve *s, struct sp_serve_sandbox *sb);
/* Removes the container and the workspace, and frees the slot and sb;
   -1 when something stayed.  NULL is a no-op.  */
int sp_serve_sandbox_destroy (struct sp_serve *s, struct sp_serve_sandbox *sb, sp_error_t *err);

/* The pool (pool.c, docs/operations.md "Sandboxes created ahead"): a thread
   keeps up to --pool sandboxes per repository created, each for exactly one
   invocation of its repository, within pool_slots in all.  */
int sp_serve_pool_start (struct sp_serve *s, sp_error_t *err);
/* A sandbox made ahead for seed seed_index, now the caller's, or NULL (none
   ready: the caller makes one cold).  Its replacement is made once
   its script is in (sp_serve_sandbox_put_script, sp_serve_pool_refill).  */
struct sp_serve_sandbox *sp_serve_pool_take (struct sp_serve *s, size_t seed_index);
/* Tells the pool's thread that a sandbox taken from it holds its request
   now: at no moment do more than --pool sandboxes wait without one.  */
void sp_serve_pool_refill (struct sp_serve *s);
/* Ends the thread and removes every sandbox still waiting.  Returns -1 when
   something stayed (named on stderr).  Called once no worker can take any
   more (loop.c joins them first): it frees the pool without the lock.  */
int sp_serve_pool_stop (struct sp_serve *s);

/* When one answer leaves (base/release_ladder.h): its release time, on the monotonic
   clock and as ms after the request's acceptance, and whether it was ready
   too late for any (then it leaves at once, as ERROR).  */
struct sp_serve_release
{
  enum sp_release_mode mode;
  uint64_t at_ns;
  uint64_t release_ms;
  bool overflow;
};

/* Answers refused off the slots that the releaser may hold at once; one
   more is answered at once (and its audit line says so).  */
#define SP_SERVE_RELEASE_HELD_MAX 4096

void sp_serve_release_plan (const struct sp_serve *s, uint64_t accepted_mono_ns, struct sp_serve_release *r);
/* A worker: waits, holding its slot, until r's time or the proxy stops.  */
void sp_serve_release_wait (struct sp_serve *s, const struct sp_serve_release *r);
/* The loop: hands fd to the releaser, which sends ERROR in the protocol
   version `version` (sp_serve_frame_version) at r's time and closes it.
   false (fd untouched) when it holds SP_SERVE_RELEASE_HELD_MAX already or
   is stopping.  */
bool sp_serve_release_later (struct sp_serve *s, int fd, uint8_t version, const struct sp_serve_release *r);
/* Whether the releaser has room for one more (only the loop adds to it).  */
bool sp_serve_release_room (struct sp_serve *s);
int sp_serve_releaser_start (struct sp_serve *s, sp_error_t *err);
/* Lets every held answer go, and ends the releaser.  */
void sp_serve_releaser_stop (struct sp_serve *s);

/* Below --run-dir (SP_DEFAULT_RUN_DIR): serve's workspaces, WORK/KEY/RUN
   (preflight.c), and one lock file per probe host id in use, IDS/ID
   (probe_identity.h).  */
#define SP_SERVE_RUN_WORK "work"
#define SP_SERVE_RUN_IDS  "ids"

/* serve's preflight, in the order docs/operations.md gives: state, seeds,
   rootfs, seccomp, ledger, audit log, runtime (verify, orphans, prepare),
   the run's work directory, the private copy of the rootfs, and the
   confinement canary.  Fills s.  */
int sp_serve_preflight (struct sp_serve *s, const struct sp_serve_options *opt, sp_error_t *err);

/* Copies the verified rootfs onto a tmpfs in serve's own mount namespace
   (RUN_DIR/work/KEY/RUN/rootfs), makes it read-only, verifies the copy, and points
   s->rootfs at it: every probe runs from it, whatever happens to the host's
   directory afterwards.  */
int sp_serve_rootfs_private (struct sp_serve *s, sp_error_t *err);

/* Unmounts the private rootfs, once no container uses it.  */
void sp_serve_rootfs_private_release (struct sp_serve *s);

/* detach, preflight, canary: everything before the socket exists.  On
   failure the caller still calls sp_serve_teardown.  */
int sp_serve_setup (struct sp_serve *s, const struct sp_serve_options *opt, struct sp_config *config,
                    sp_error_t *err);

/* Runs the confinement canary through the invocation path.  */
int sp_serve_canary (struct sp_serve *s, sp_error_t *err);
/* Its Python, canary.py, compiled in (src/embed.py): NUL-terminated, and
   sp_serve_canary_py_len long without the NUL.  */
extern const unsigned char sp_serve_canary_py[];
extern const size_t sp_serve_canary_py_len;

/* Removes everything of this run (containers, cgroups, workspaces, the
   runtime's state) and releases s.  Returns -1 when something stayed.  */
int sp_serve_teardown (struct sp_serve *s, sp_error_t *err);

/* What is known of a request from its accept on: when it came, and who
   sent it.  */
struct sp_serve_arrival
{
  uint64_t received_ns;      /* realtime, when accepted: for the audit record */
  uint64_t accepted_ns;      /* monotonic, when accepted: a refusal's release counts from it */
  struct sp_audit_peer peer; /* the client's credentials (SO_PEERCRED) */
};

/* The arrival of the connection fd, accepted now: the clocks, and its
   peer's credentials (unknown when the kernel cannot give them).  */
void sp_serve_arrival_init (struct sp_serve_arrival *a, int fd, uint64_t received_ns, uint64_t accepted_ns);

/* One connection whose request frame is still arriving: the accept loop
   holds up to SP_SERVE_UNREAD_MAX of them and reads each without blocking,
   off the slots (reader.c).  */
struct sp_serve_conn
{
  int fd;
  struct sp_serve_arrival arrival;
  uint64_t deadline_ns; /* monotonic: the whole frame by then */
  uint8_t hdr[SP_FRAME_HEADER_BYTES];
  size_t got;     /* bytes of the frame so far */
  uint8_t *frame; /* header and body, once the header is decoded */
  size_t len;     /* the whole frame's length, once known */
};

void sp_serve_conn_init (struct sp_serve_conn *c, int fd, const struct sp_serve_arrival *arrival);
/* Reads what the client has sent so far.  Returns 1 when the frame is whole
   and nothing follows it, 0 while more is awaited, -1 with the reason.  */
int sp_serve_conn_read (struct sp_serve_conn *c, sp_error_t *err);
/* Closes the fd and frees the frame.  */
void sp_serve_conn_release (struct sp_serve_conn *c);

/* A whole, valid request waiting for a slot.  */
struct sp_serve_request
{
  int fd;
  uint8_t *frame;        /* owned: req points into it */
  struct sp_request req; /* decoded and validated */
  /* A v2 request's answer schema, parsed off the slots (owned); NULL for
     v1.  */
  struct sp_answer_schema *schema;
  struct sp_serve_arrival arrival;
};

/* One request, from its slot to its end: debit, snapshot, run, read the
   answer, clean up, audit, answer; cancelled when its client goes away.
   worker is the caller's index (its client, struct sp_serve_client).
   Closes r->fd and frees r->frame.  */
void sp_serve_invocation (struct sp_serve *s, struct sp_serve_request *r, uint64_t started_ns,
                          unsigned worker);

/* Audits as refused, and answers ERROR at its release time (through the
   releaser), a request that never got a slot (a bad frame, queue full,
   waited too long, shutting down), with its cause.  Takes fd.  */
void sp_serve_refuse (struct sp_serve *s, int client_fd, uint8_t version,
                      const struct sp_serve_arrival *arrival, enum sp_cause cause, const char *reason);

/* serve's ends (stop.c).  Halts the proxy (see struct sp_serve) and says
   why on stderr, once.  */
void sp_serve_halt (struct sp_serve *s, const char *why);
/* Whether the proxy is halted; if so, its reason into why.  */
bool sp_serve_halted (struct sp_serve *s, char *why, size_t size);

/* Kills the running containers and lets no new one start.  Returns how many
   were still running.  */
unsigned sp_serve_stop (struct sp_serve *s);
/* Whether sp_serve_stop was called.  */
bool sp_serve_stopping (struct sp_serve *s);

/* Answers on fd, once, in the request's protocol version: v1 the outcome's
   index (SP_RESPONSE_ERROR: ERROR); v2 the canonical value
   value[0..value_len), or ERROR when index is SP_RESPONSE_ERROR.  A client
   that has gone loses it (invocation.c).  */
void sp_serve_answer (int fd, uint8_t version, uint8_t index, const char *value, size_t value_len);

/* Whether private_repos[repo_index] is of the class `sealed`: it never
   runs (no debit, no sandbox, no pool, not the canary's).  */
static inline bool
sp_serve_repo_sealed (const struct sp_serve *s, size_t repo_index)
{
  return s->config->sensitivity != NULL && s->config->sensitivity[repo_index] == SP_SENSITIVITY_SEALED;
}

/* The bits a call on private_repos[repo_index] may take the repository to,
   x1000: the smaller of --bit-budget and its class's budget; 0 when
   neither bounds it (sensitivity.c).  */
uint64_t sp_serve_repo_bit_budget_millibits (const struct sp_serve *s, size_t repo_index);

/* Refuses, before anything starts, a config whose classes serve cannot
   keep with these options: a metered class under --release immediate, or
   every repository sealed.  */
int sp_serve_check_sensitivity (const struct sp_config *config, const struct sp_serve_options *opt,
                                sp_error_t *err);

/* The protocol version to answer a frame's sender in, from what arrived of
   it (bytes[0..got)): 2 when its header names version 2 after the magic, 1
   otherwise, a frame too short or malformed to say included (refuse.c).  */
uint8_t sp_serve_frame_version (const uint8_t *bytes, size_t got);
/* The result record of a request refused off the slots (refuse.c), with its
   cause and reason, and the release it will have.  */
void sp_serve_record_refusal (struct sp_serve *s, const struct sp_serve_arrival *arrival,
                              const struct sp_serve_release *release, enum sp_cause cause,
                              const char *reason);

/* The accept loop: it accepts, reads every request frame without blocking
   (at most SP_SERVE_UNREAD_MAX connections at once, each within
   SP_SERVE_REQUEST_READ_SECONDS), decodes and validates it, and queues only
   whole, valid requests for the --concurrency workers, in a bounded queue;
   signals come through signal_fd (sp_serve_signals_read).  Returns when a
   stopping signal came, after every worker ended.  */
int sp_serve_loop (struct sp_serve *s, int listen_fd, int signal_fd, sp_error_t *err);

/* Signals (signals.c): blocks every signal whose default would end the
   process without its cleanup, and returns a signalfd for them.  Before any
   thread exists, so that every thread inherits the mask (spawn.c clears it
   for the runtimes).  */
int sp_serve_signals_open (sp_error_t *err);
/* Reads what arrived on signal_fd: each ignored signal is said on stderr,
   for verb; returns the first stopping one (SIGTERM, SIGINT, SIGHUP,
   SIGQUIT), said too, or 0 when none is pending.  */
int sp_serve_signals_read (int signal_fd, const char *verb);
bool sp_serve_signal_stops (int signo);

/* Leaves the host's UTS namespace (one whose domain name is the sandboxes'),
   its network (a namespace with only `lo`, up) and its mount propagation (a
   private mount namespace, slave to the host's), before any thread
   exists.  */
int sp_serve_detach (bool private_mounts, sp_error_t *err);

/* Docker's and sbx's workspaces, below the state directory (preflight.c,
   open_work): their daemons resolve mount sources in the host's mount
   namespace.  */
#define SP_SERVE_DOCKER_WORK "docker-work"
#define SP_SERVE_SBX_WORK    "sbx-work"

/* A file this instance made (the socket, the ready file): removed on stop
   only while the path still names it, never another instance's.  */
struct sp_serve_owned
{
  bool made;
  dev_t dev;
  ino_t ino;
};

/* Whether name in dirfd is still the file owned describes.  */
int sp_serve_path_owned (int dirfd, const char *name, const struct sp_serve_owned *owned);

/* Before the preflight: refuses a socket path that another process listens
   on, or that holds anything but a socket.  Replaces nothing (it may make
   the socket's directory).  */
int sp_serve_socket_available (const char *path, sp_error_t *err);

/* The listening socket: its directory made or checked (root's, not writable
   by group or others), a stale socket (nobody listens) replaced, a live one
   refused, mode 0660, root:group.  Fills owned.  */
int sp_serve_listen (const char *path, gid_t group, int *fd, struct sp_serve_owned *owned, sp_error_t *err);

/* Removes the socket at path if it is still the one owned describes.  */
void sp_serve_unlisten (const char *path, const struct sp_serve_owned *owned);

/* Readiness: the ready file (the pid, atomically) and sd_notify.  */
struct sp_notify
{
  int fd; /* connected datagram socket to $NOTIFY_SOCKET, or -1 */
};
/* The longest state sp_notify_send sends (a STATUS= line fits).  */
#define SP_NOTIFY_STATE_MAX 512

/* serve's state as it changes (report.c; docs/operations.md, "The journal"
   and "status"): STATUS= through notify, and STATE/serve.json (0600,
   replaced by a rename, removed at stop), which `status` reads: serve's
   pid, run, backend, release mode and bit budgets, the requests answered,
   refused and failed so far, and per repository the sandboxes waiting.  */
#define SP_SERVE_REPORT_FILE    "serve.json"
#define SP_SERVE_REPORT_VERSION 1
struct sp_serve_report;
/* Before ready: the file's first version, then a thread that writes each
   change, at most every 200 ms.  */
int sp_serve_report_start (struct sp_serve *s, struct sp_notify *notify, sp_error_t *err);
/* Once READY=1 is sent: the first STATUS=.  */
void sp_serve_report_ready (struct sp_serve *s);
/* A request's result record was written with status (SP_AUDIT_STATUS_*).  */
void sp_serve_report_result (struct sp_serve *s, const char *status);
/* Repository seed_index has waiting sandboxes made ahead now.  */
void sp_serve_report_waiting (struct sp_serve *s, size_t seed_index, unsigned waiting);
/* Once no worker runs: the last state is sent (STATUS=) and the file
   removed.  */
void sp_serve_report_stop (struct sp_serve *s);
/* Connects to $NOTIFY_SOCKET when set; call before the environment is
   scrubbed and before the network namespace changes (an abstract socket
   belongs to the namespace it was made in).  */
int sp_notify_open (struct sp_notify *n, sp_error_t *err);
void sp_notify_send (struct sp_notify *n, const char *state);
void sp_notify_close (struct sp_notify *n);
/* Before the preflight: removes a ready file left by an earlier instance (a
   kill -9 leaves one naming a dead pid), so that nothing says ready until
   this instance is.  One that names another live serve is refused.  */
int sp_ready_file_claim (const char *path, sp_error_t *err);
/* Writes the pid and a newline, atomically; fills owned.  */
int sp_ready_file_write (const char *path, struct sp_serve_owned *owned, sp_error_t *err);
/* Removes the ready file if it is still the one owned describes.  */
void sp_ready_file_remove (const char *path, const struct sp_serve_owned *owned);

#endif
