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

/* Budget ledger file (docs/threat-model.md).  */
#define SP_LEDGER_MAX_BYTES 4096

/* Client (docs/protocol.md).  */
#define SP_CLIENT_TIMEOUT_DEFAULT_SECONDS 600
#define SP_CLIENT_TIMEOUT_MAX_SECONDS     3600
#define SP_CLIENT_MAX_ARGS                16

#endif
