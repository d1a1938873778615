/* Every bound in one place.  docs/ quotes these values; change both together.  */
#ifndef SEALED_PROBE_BOUNDS_H
#define SEALED_PROBE_BOUNDS_H

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

#define SP_INVOCATIONS_MIN     1
#define SP_INVOCATIONS_MAX     100000
#define SP_INVOCATIONS_DEFAULT 100

/* Strict JSON trees (json.h).  The tree is freed recursively, so its depth
   stays modest whatever a caller asks for; a key echoed in a message shows at
   most SP_JSON_ECHO_MAX_CHARS characters.  */
#define SP_JSON_DEPTH_LIMIT    1024
#define SP_JSON_ECHO_MAX_CHARS 64

/* The sandbox (docs/bundle.md).  The probe runs as nobody:nogroup; the
   cgroup pids limit is the real per-sandbox bound on processes, and
   RLIMIT_NPROC, which the kernel counts per uid across every sandbox at once,
   is only a coarse backstop above it.  */
#define SP_PROBE_UID             65534
#define SP_PROBE_GID             65534
#define SP_SANDBOX_PIDS_MAX      64
#define SP_SANDBOX_CPU_PERIOD_US 100000
#define SP_SANDBOX_CPU_QUOTA_US  100000 /* one CPU */
#define SP_SANDBOX_FSIZE_BYTES   (64ULL << 20)
#define SP_SANDBOX_NOFILE        256
#define SP_SANDBOX_NPROC         1024
#define SP_SANDBOX_TMP_SIZE      "16m"
#define SP_SANDBOX_TMP_INODES    "4096"
#define SP_SANDBOX_DEV_SIZE      "64k"
#define SP_SANDBOX_OOM_SCORE_ADJ 1000
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
#define SP_ROOTFS_PATH_MAX    1024 /* bytes of a path inside the tree */
#define SP_ROOTFS_LINK_MAX    1024 /* bytes of a symlink target */

/* Walks of the tree (tree_digest.c, normalize.c, rmtree.c, rootfs_verify.c):
   one open directory fd per level.  */
#define SP_TREE_MAX_DEPTH 64

/* Normalization (normalize.c): every entry gets this mtime (the epoch).  */
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

/* Budget ledger file (docs/threat-model.md).  */
#define SP_LEDGER_MAX_BYTES 4096

/* Client (docs/protocol.md).  */
#define SP_CLIENT_TIMEOUT_DEFAULT_SECONDS 600
#define SP_CLIENT_TIMEOUT_MAX_SECONDS     3600
#define SP_CLIENT_MAX_ARGS                16

#endif
