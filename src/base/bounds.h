/* Every bound in one place.  docs/ quotes these values; change both together.  */
#ifndef SP_BASE_BOUNDS_H
#define SP_BASE_BOUNDS_H

/* Request (docs/protocol.md).  */
#define SP_OUTCOME_COUNT     3
#define SP_OUTCOME_MAX_BYTES 64
#define SP_SCRIPT_MAX_BYTES  (64 * 1024)
#define SP_REPO_OWNER_MAX    39  /* GitHub's own limit for user and org names */
#define SP_REPO_NAME_MAX     100 /* GitHub's own limit for repository names */
#define SP_REPO_MAX_BYTES    (SP_REPO_OWNER_MAX + 1 + SP_REPO_NAME_MAX)

/* Result file /probe/out (docs/result-contract.md).  */
#define SP_RESULT_MAX_BYTES 4096
#define SP_RESULT_MAX_DEPTH 2

/* Config document (docs/config.md).  */
#define SP_CONFIG_MAX_BYTES (1024 * 1024)
#define SP_CONFIG_MAX_DEPTH 64
#define SP_CONFIG_MAX_REPOS 256

#define SP_TIMEOUT_MIN_SECONDS     1
#define SP_TIMEOUT_MAX_SECONDS     300
#define SP_TIMEOUT_DEFAULT_SECONDS 30

#define SP_MEMORY_MIN_BYTES     (64ULL << 20)
#define SP_MEMORY_MAX_BYTES     (8ULL << 30)
#define SP_MEMORY_DEFAULT_TEXT  "512m"
#define SP_MEMORY_DEFAULT_BYTES (512ULL << 20)

/* The default is the agent firewall's own "conservative bounded default"
   (docs/config.md).  */
#define SP_INVOCATIONS_MIN     1
#define SP_INVOCATIONS_MAX     100000
#define SP_INVOCATIONS_DEFAULT 32

/* Sensitivity classes' default budgets, whole bits per repository for the
   run: the firewall's ENCLAVE_SENSITIVITY_RUN_BITS (public unmetered,
   sealed 0: never runs).  sensitivityBudgets overrides them, each from 1 to
   SP_BIT_BUDGET_MAX.  */
#define SP_SENSITIVITY_INTERNAL_BITS     64
#define SP_SENSITIVITY_CONFIDENTIAL_BITS 8

/* The firewall's `enclaves` document (docs/config.md, "The enclaves
   document"): its own upper bounds, from its docs/awf-config.schema.json,
   where this proxy has no tighter one.  */
#define SP_ENCLAVES_MAX_ENTRIES     2     /* one script and one agent entry */
#define SP_ENCLAVE_INVOCATIONS_MAX  10000 /* its maxInvocations maximum */
#define SP_ENCLAVE_PIDS_LIMIT_MAX   4096  /* its pidsLimit maximum */
#define SP_ENCLAVE_OUTPUT_MAX_BYTES 8192  /* its maxOutputBytes maximum (MAX_RESULT_BYTES) */

/* Strict JSON trees (json.h).  The tree is freed recursively, so its depth
   stays modest whatever a caller asks for; a key echoed in a message shows at
   most SP_JSON_ECHO_MAX_CHARS characters.  */
#define SP_JSON_DEPTH_LIMIT    1024
#define SP_JSON_ECHO_MAX_CHARS 64

/* The sandbox (docs/bundle.md).  The probe runs as nobody:nogroup inside
   (its host id is its slot's, below); the cgroup pids limit is the real
   per-sandbox bound on processes, and RLIMIT_NPROC, which the kernel counts
   per host uid, is only a coarse backstop above it.  */
#define SP_PROBE_UID             65534
#define SP_PROBE_GID             65534
#define SP_SANDBOX_PIDS_MAX      64
#define SP_SANDBOX_CPU_PERIOD_US 100000
#define SP_SANDBOX_CPU_QUOTA_US  100000 /* one CPU */
#define SP_SANDBOX_FSIZE_BYTES   (64ULL << 20)
#define SP_SANDBOX_NOFILE        256
#define SP_SANDBOX_NPROC         1024
/* Under gVisor the probe's tasks live in the sentry, which enforces
   RLIMIT_NPROC itself over the sandbox's own tasks: it carries the bundle's
   SP_SANDBOX_PIDS_MAX there, with EAGAIN as runc's pids cgroup gives.  The
   host pids cgroup then holds the whole sandbox, the sentry's own threads
   (about 43) and about 8 host tasks per probe process on the ptrace
   platform (64 processes: about 555), as an outer bound
   (docs/runtimes.md).  */
#define SP_GVISOR_HOST_TASKS_MAX 1024
#define SP_SANDBOX_TMP_SIZE      "16m"
#define SP_SANDBOX_TMP_INODES    "4096"
#define SP_SANDBOX_DEV_SIZE      "64k"
#define SP_SANDBOX_OOM_SCORE_ADJ 1000
/* The probe's host identity (docs/runtimes.md, "The probe's identity"):
   every sandbox runs in a user namespace that maps its root and its
   SP_PROBE_UID:SP_PROBE_GID onto two host ids of its own, uid and gid alike,
   from a range the operator reserves: slot K (0 .. --concurrency, then the
   pool's) uses BASE + 2K (root) and BASE + 2K + 1 (the probe): 64 ids.  */
#define SP_PROBE_ID_BASE_DEFAULT 2100000000U
#define SP_PROBE_IDS_PER_SLOT    2U
#define SP_PROBE_ID_RANGE        (SP_PROBE_IDS_PER_SLOT * (SP_SERVE_CONCURRENCY_MAX + 1 + SP_SERVE_POOL_SLOTS_MAX))
/* Run and invocation ids: [a-z0-9-], chosen by the proxy, never the agent.  */
#define SP_ID_MAX_CHARS 32

/* The rootfs builder (docs/rootfs.md).  rootfs.lock (src/rootfs/lock.c).  */
#define SP_LOCK_MAX_BYTES    (64 * 1024)
#define SP_LOCK_MAX_PACKAGES 256
#define SP_LOCK_NAME_MAX     64
#define SP_LOCK_VERSION_MAX  64
#define SP_LOCK_ARCH_MAX     16

/* One .deb (deb.c): read whole into memory, so its size is capped.  */
#define SP_DEB_MAX_BYTES  (64 * 1024 * 1024)
#define SP_DEB_BINARY_MAX 16 /* the debian-binary member */
#define SP_DEB_READ_BLOCK (64 * 1024)

/* The extracted tree (extract.c): every package together.  */
#define SP_ROOTFS_MAX_ENTRIES (100 * 1000)
#define SP_ROOTFS_MAX_BYTES   (1024LL * 1024 * 1024)
#define SP_ROOTFS_LINK_MAX    1024 /* bytes of a symlink target */
/* The precompiled stdlib (src/rootfs/pyc.c): the tree's python3.11 compiles
   it in about a second; this much is a hung interpreter.  Of its output, the
   last this many bytes are kept for an error message.  The pycs count
   against SP_ROOTFS_MAX_ENTRIES and SP_ROOTFS_MAX_BYTES too (543 entries
   and 11 MB today).  */
#define SP_ROOTFS_COMPILE_TIMEOUT_MS (120 * 1000)
#define SP_ROOTFS_COMPILE_OUTPUT_MAX 4096

/* Every tree: seeds, clones, tarballs, snapshots and the rootfs
   (docs/staging.md, "Paths and names").  A path inside a tree is at most
   SP_TREE_PATH_MAX - 1 bytes, for every walk over one (src/tree/, the copy,
   the extractors); removal (sp_tree_remove_at) has no path limit at all.
   The walks hold one open directory fd per level, up to SP_TREE_MAX_DEPTH.  */
#define SP_TREE_PATH_MAX  4096 /* bytes, the NUL included */
#define SP_TREE_MAX_DEPTH 64
/* A name from a tree in an operator message (sp_quote_name, quote.h): at
   most this many of its bytes are shown.  */
#define SP_QUOTE_MAX_CHARS 128

/* Normalization (src/tree/normalize.c): every entry gets this mtime (the epoch).  */
#define SP_ROOTFS_MTIME 0

/* The seccomp profile document (docs/seccomp.md).  */
#define SP_SECCOMP_MAX_BYTES     (64 * 1024)
#define SP_SECCOMP_MAX_DEPTH     8 /* root, syscalls, rule, args, arg: 5 are used */
#define SP_SECCOMP_MAX_ARCHES    32
#define SP_SECCOMP_MAX_RULES     512
#define SP_SECCOMP_MAX_NAMES     1024 /* over all rules */
#define SP_SECCOMP_MAX_ARG_INDEX 5    /* six syscall arguments */
#define SP_SECCOMP_ERRNO_MAX     4095 /* the kernel's MAX_ERRNO */
#define SP_SECCOMP_BPF_MAX_INSNS 4096 /* the kernel's BPF_MAXINSNS */

/* Local clones (docs/staging.md, "Local clones").  The safe tree copy
   (tree/copy.c): a symlink target, and the deepest tree any caller may ask
   for.  */
#define SP_COPY_LINK_MAX      4096
#define SP_COPY_DEPTH_CEILING 256
#define SP_SEED_MAX_BYTES     (4ULL << 30) /* the default limits of one seed */
#define SP_SEED_MAX_ENTRIES   (500ULL * 1000)
#define SP_SEED_MAX_DEPTH     60 /* below the tree walks' SP_TREE_MAX_DEPTH */
/* Submodules a seed may omit, each path recorded in staged.json
   (docs/staging.md, "Submodules"); a commit with more is refused.  */
#define SP_SEED_SUBMODULES_MAX 1000
/* Git metadata (git_seed.c): HEAD and loose ref files, a ref name, the
   packed-refs and config files, one config value, and symbolic-ref levels.  */
#define SP_GIT_REF_FILE_MAX_BYTES    1100
#define SP_GIT_REF_NAME_MAX          1024
#define SP_GIT_PACKED_REFS_MAX_BYTES (64 * 1024 * 1024)
#define SP_GIT_CONFIG_MAX_BYTES      (1024 * 1024)
#define SP_GIT_CONFIG_VALUE_MAX      4096
#define SP_GIT_SYMREF_MAX_DEPTH      5
#define SP_GIT_FRESH_CONFIG_SIZE     256 /* the minimal config sanitizing writes */
/* A pack's index read whole (pack_write.c): 28 bytes an object, so a 1 GiB
   index is some 38 million objects.  */
#define SP_GIT_PACK_INDEX_MAX_BYTES (1ULL << 30)
/* libgit2's memory while a clone is staged (git_stage.c): the window it maps
   of a pack at a time, and all windows together (its object cache is off).  */
#define SP_GIT_MWINDOW_BYTES        (8ULL << 20)
#define SP_GIT_MWINDOW_MAPPED_BYTES (64ULL << 20)
/* The deepest delta chain the seed's pack check follows: git's own cap on
   pack.depth.  */
#define SP_GIT_DELTA_DEPTH_MAX 4095
/* Threads that check the seed's pack, at most (one per CPU below it).  */
#define SP_GIT_CHECK_THREADS_MAX 4

/* Staging (docs/staging.md): --clone flags of one stage run, the catalog
   file, and the state file that records the staged seeds (with the paths of
   the submodules they omit: a run whose record would be larger is refused
   before anything is recorded).  */
#define SP_CLONE_FLAGS_MAX   SP_CONFIG_MAX_REPOS
#define SP_CATALOG_MAX_BYTES (1024 * 1024)
#define SP_STAGED_MAX_BYTES  (4 * 1024 * 1024)
/* Staging's progress line on a terminal (progress.h): redrawn at most once
   in this many milliseconds.  */
#define SP_PROGRESS_INTERVAL_MS 100

/* The GitHub tarball source (docs/staging.md; src/seed/github_fetch.c and
   tarball.c).  The three per-repository caps (tarball, entries, tree bytes)
   are the caller's; these are their defaults and the fixed bounds.  */
#define SP_GITHUB_DEFAULT_MAX_TARBALL_BYTES (512ULL << 20)
#define SP_GITHUB_DEFAULT_MAX_ENTRIES       200000
#define SP_GITHUB_DEFAULT_MAX_TREE_BYTES    (2ULL << 30)
#define SP_GITHUB_COMMIT_BODY_MAX           128         /* the commits endpoint answers with the bare id */
#define SP_GITHUB_DISCARD_BODY_MAX          (64 * 1024) /* a non-200 body is read and dropped, up to this */
#define SP_GITHUB_TOKEN_MAX                 1024
#define SP_GITHUB_REF_MAX                   255
#define SP_GITHUB_URL_MAX                   4096 /* api_base, and a redirect's Location */
#define SP_GITHUB_MAX_REDIRECTS             1    /* the API's one 302 to the codeload host */
#define SP_GITHUB_CONNECT_TIMEOUT_SECONDS   30
#define SP_GITHUB_LOW_SPEED_BYTES           1024 /* per second, sustained for ... */
#define SP_GITHUB_LOW_SPEED_SECONDS         60   /* ... this long, or the transfer is abandoned */
#define SP_GITHUB_TIMEOUT_SECONDS           1800 /* one request, whole */
#define SP_TARBALL_TOP_MAX                  255  /* bytes of the top directory's name, one component */
#define SP_TARBALL_LINK_MAX                 4096 /* bytes of a symlink target */
#define SP_TARBALL_READ_BLOCK               (64 * 1024)
/* The integrity pass inflates the whole stream before anything is written:
   it may hold the tree's bytes plus, per entry, headers and padding.  */
#define SP_TARBALL_ENTRY_OVERHEAD (16 * 1024)
#define SP_TARBALL_TAIL_BYTES     (1024 * 1024)

/* Budget ledger file (docs/threat-model.md): its bound is
   SP_LEDGER_FILE_MAX_BYTES, in ledger.h.  */

/* Client (docs/protocol.md).  */
#define SP_CLIENT_TIMEOUT_DEFAULT_SECONDS 600
#define SP_CLIENT_TIMEOUT_MAX_SECONDS     3600
#define SP_CLIENT_MAX_ARGS                16
/* `doctor` waits for a connection and the handshake reply at most this
   long, or the client's own deadline when that is shorter: serve answers a
   hello at once.  */
#define SP_DOCTOR_WAIT_SECONDS 10

/* The proxy, serve (docs/operations.md).  */
#define SP_SERVE_CONCURRENCY_DEFAULT 1
#define SP_SERVE_CONCURRENCY_MAX     16
/* --pool: sandboxes created ahead per repository (docs/operations.md), and
   in all: each holds a slot, and so two probe ids, while it waits.  */
#define SP_SERVE_POOL_DEFAULT   1
#define SP_SERVE_POOL_MAX       4
#define SP_SERVE_POOL_SLOTS_MAX 15
/* Entries of a waiting sandbox's overlay snapshot looked up ahead (pool.c):
   all of them, the seed's own limit, so that a probe's walk finds every
   overlay dentry and inode made (docs/snapshot.md, "Looked up ahead").
   Their kernel memory, about 1 KiB an entry, is the dentry cache's:
   reclaimable, as the seed's own.  */
#define SP_SERVE_POOL_WARM_ENTRIES        SP_SEED_MAX_ENTRIES
#define SP_SERVE_QUEUE_DEFAULT            16 /* accepted requests waiting for a slot */
#define SP_SERVE_QUEUE_MAX                1024
#define SP_SERVE_QUEUE_WAIT_DEFAULT       120 /* seconds a request may wait for a slot */
#define SP_SERVE_QUEUE_WAIT_MAX           3600
#define SP_BIT_BUDGET_MAX                 1000000        /* --bit-budget, bits per repository */
#define SP_RUN_BIT_BUDGET_MAX             1000000        /* --run-bit-budget, bits for the run */
#define SP_SERVE_REQUEST_READ_SECONDS     10             /* to receive one whole request frame */
#define SP_SERVE_UNREAD_MAX               64             /* connections still sending their request */
#define SP_SERVE_KILL_GRACE_SECONDS       10             /* after a kill, for the runtime to return */
#define SP_SERVE_SCRATCH_DEFAULT_BYTES    (256ULL << 20) /* what a probe may write */
#define SP_SERVE_SCRATCH_MIN_BYTES        (1ULL << 20)
#define SP_SERVE_SCRATCH_MAX_BYTES        (16ULL << 30)
#define SP_SERVE_SCRATCH_INODES           16384        /* entries a probe may create */
#define SP_SERVE_WORKSPACE_OVERHEAD_BYTES (1ULL << 20) /* bundle files beside the repo */
/* A record holds at most a schema's canonical answer (8 KiB, its escapes
   at most doubling it) beside three outcomes and a cut reason.  */
#define SP_AUDIT_LINE_MAX_BYTES 32768
/* A failure is put down to a full state disk (audit status "environment")
   when its file system has less than this left.  */
#define SP_SERVE_FULL_BELOW_BYTES  (1ULL << 20)
#define SP_SERVE_FULL_BELOW_INODES 64
/* What a start found left by earlier runs is said one line per kind, each
   naming at most this many runs (or ids), then how many more.  */
#define SP_SERVE_LEFTOVERS_NAMED_MAX 8
#define SP_RUNTIME_VERSION_MAX_BYTES 4096 /* what `runc --version` may print */

/* Finite answer schemas (docs/answer-schemas.md): the agent firewall's
   protocol v2 bounds, and the output a script may write against one.  An
   integer is safe within +-SP_ANSWER_SCHEMA_SAFE_INTEGER (2^53 - 1), and a
   schema answers at most 2^SP_ANSWER_SCHEMA_MAX_CARDINALITY_LOG2 values: the
   firewall counts exactly up to there, and so do we; above it is refused.  */
#define SP_ANSWER_SCHEMA_MAX_BYTES            4096
#define SP_ANSWER_SCHEMA_MAX_DEPTH            6 /* the root node is at depth 0 */
#define SP_ANSWER_SCHEMA_MAX_NODES            64
#define SP_ANSWER_SCHEMA_MAX_ENUM_VALUES      4096
#define SP_ANSWER_SCHEMA_MAX_LITERAL_BYTES    64
#define SP_ANSWER_SCHEMA_MAX_FIELDS           16
#define SP_ANSWER_SCHEMA_MAX_ITEMS            16
#define SP_ANSWER_SCHEMA_MAX_VARIANTS         16
#define SP_ANSWER_SCHEMA_MAX_ARRAY_LENGTH     64
#define SP_ANSWER_SCHEMA_MAX_IDENTIFIER_BYTES 64
#define SP_ANSWER_SCHEMA_SAFE_INTEGER         9007199254740991LL
#define SP_ANSWER_SCHEMA_MAX_CARDINALITY_LOG2 1024
#define SP_ANSWER_OUTPUT_MAX_BYTES            8192

#endif
